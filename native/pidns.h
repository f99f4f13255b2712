// Which PID namespaces a process is in: its own and every one above it, as far as nasd's own.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace nas {

// `pid:[<inode>]` (as /proc/<pid>/ns/pid reads) of the process's namespace, then of its parent and so on up to
// nasd's own; empty when the process is gone. A run's process is the run's when any of these is the run's: a
// namespace made inside a run (unshare -p) is still below it.
std::vector<std::string> pid_namespaces(pid_t pid);

}  // namespace nas

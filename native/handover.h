#pragma once
#include "nasfuse.h"

namespace nas {
// /dev/fuse read and written through handover.cc's hooks (after fuse_session_mount, or instead of it).
bool install_io(Mount* m, int fd);
// A successor's session: the kernel's INIT (as the first nasd read it) is replayed once, its reply dropped.
bool prepare_takeover(Mount* m, const std::vector<char>& init);
// Every request read has been answered (with reads paused: nothing more will be).
bool drained(Mount* m);
// sd_notify: a datagram to systemd's notify socket, with a descriptor for its store when fd >= 0.
int notify(const std::string& socket_path, const std::string& state, int fd);
}  // namespace nas

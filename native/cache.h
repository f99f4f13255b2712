// What may be answered without asking JS (cache.cc): a node's attributes while they are fresh, a name a directory's
// cached listing holds or lacks, and only inside the views a run's process may reach. Every function here runs
// with the mount's mutex held; none replies (ops.cc does).
#pragma once
#include <sys/types.h>

#include "nasfuse.h"

namespace nas {

// Whether the node's attributes may be served without asking JS: known, not open for writing, not expired.
bool fresh(const Node* n);
// The top-level name a node is under (the root's child `name`, for the root itself); empty if unreachable.
std::string top_of(Mount* m, Node* n, const std::string& name);
// Whether the cache may answer process `pid` about node `n` (or its child `name`): a run's process (its PID
// namespace is a run's or below one: pidns.h) only inside the top-level names restrict() gave its run.
bool may_serve(Mount* m, pid_t pid, Node* n, const std::string& name = std::string());

// A getattr the cache answers: the node's attributes, with the timeout the kernel may keep them for (`ttl`).
bool attr_cached(Mount* m, pid_t pid, Node* n, double* ttl);

enum class Cached {
  ASK_JS,    // the cache does not know
  NO_ENTRY,  // the directory's current listing lacks the name: ENOENT, not cached by the kernel
  ENTRY,     // `e` holds the node (its lookup count taken)
};
// A lookup of `name` in directory `p`: a fresh node bound to the name, else an entry of p's cached listing (bound
// to a node now), else no such name if p's listing is current.
Cached lookup_cached(Mount* m, pid_t pid, Node* p, const std::string& name, struct fuse_entry_param* e);

}  // namespace nas

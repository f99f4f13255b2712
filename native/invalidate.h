#pragma once
#include "nasfuse.h"

namespace nas {
// Kernel cache invalidations, sent by a thread of their own (never from a request handler or the JS thread:
// either can deadlock against a request waiting for JS). The queue_* calls are made with the mount's mutex held.
void queue_attr(Mount* m, uint64_t ino);
void queue_expire(Mount* m, uint64_t parent, const std::string& name);
// Everything of these Homes (every top-level name of each role; all when `all`), and the root's listing: the cache forgets it,
// the kernel re-reads attributes, pages and names. `barrier` comes back through m->barriers once sent.
void invalidate_names(Mount* m, const std::set<std::string>& names, bool all, double barrier);
void start_notifier(Mount* m);
void stop_notifier(Mount* m);
}  // namespace nas

// The node table (table.cc): the nodes the kernel holds, their names and lookup counts, and what JS last said of
// each (cache.cc decides what of it may be served). Callers hold the mount's mutex.
#pragma once
#include "nasfuse.h"

namespace nas {

Node* get(Mount* m, uint64_t id);
// The node a name in a directory stands for, if the kernel holds it.
Node* child(Mount* m, uint64_t parent, const std::string& name);
// The node's path from the mount root ("/" for the root); `top` gets the first component. False: unreachable.
bool path_of(Mount* m, Node* n, std::string& out, std::string* top = nullptr);
// Forget what is cached of a node (attributes and listing); its name and lookup count stay.
void drop(Node* n);
// The node for a name just looked up with these attributes: the one the name already stands for, else
// one whose id is the inode number (a second name of a hard link joins it), else a private id.
Node* bind(Mount* m, uint64_t parent, const std::string& name, const struct stat& st);
// A new name for an existing node (link).
void alias(Mount* m, Node* n, uint64_t parent, const std::string& name);
void unbind(Mount* m, uint64_t parent, const std::string& name);
// A directory's listing kept current by a change made through the mount (no-ops without a listing); remove gives
// the entry's attributes, false when the name was not listed.
void listing_add(Node* p, const std::string& name, const struct stat& st);
bool listing_remove(Node* p, const std::string& name, struct stat* was = nullptr);
void move(Mount* m, uint64_t parent, const std::string& name, uint64_t parent2, const std::string& name2);
// The kernel dropped `count` lookups of node `id` (FORGET). More than it has is a bug (said on stderr; a checked
// build, NAS_CHECKED, aborts). A node at zero is kept while it has a name (FORGOTTEN_KEPT), else it goes.
void forget(Mount* m, uint64_t id, uint64_t count);
// BATCH_FORGET: each node of the list, as forget().
void forget_batch(Mount* m, const struct fuse_forget_data* list, size_t count);
// What JS said of a node: its attributes, served without JS for the mount's ttl when `cacheable`.
void remember(Mount* m, Node* n, const struct stat& st, bool cacheable);
void fill_entry(Mount* m, Node* n, struct fuse_entry_param* e, double ttl);

// A node as a reload hands it to the next nasd (src/daemon/handover.ts carries the table across): its id, the
// kernel's lookup count and its names. Ids stay uint64 here and in the bytes handover.cc makes of the table: they never reach JS.
struct Exported {
  uint64_t id = 0, nlookup = 0;
  std::vector<std::pair<uint64_t, std::string>> names;
};
std::vector<Exported> export_table(Mount* m);
// A successor's table before its first request: the nodes (and private ids) the kernel holds of its predecessor.
void import_table(Mount* m, const std::vector<Exported>& nodes);

}  // namespace nas

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
void forget(Mount* m, uint64_t id, uint64_t count);
void remember(Mount* m, Node* n, const struct stat& st, bool cacheable);
void fill_entry(Mount* m, Node* n, struct fuse_entry_param* e, double ttl);

}  // namespace nas

// The node table: node ids the kernel holds, their names, and what is cached of each. Every function here
// runs with the mount's mutex held.
#include "table.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

namespace nas {

NodeTable::NodeTable() {
  // The root: the kernel holds it from the mount on (its lookup count is the kernel's own, never forgotten).
  auto root = std::make_unique<Node>();
  root->id = FUSE_ROOT_ID;
  root->nlookup = 1;
  nodes.emplace(FUSE_ROOT_ID, std::move(root));
}

double now() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

std::string dentry_key(uint64_t parent, const std::string& name) {
  std::string key(reinterpret_cast<const char*>(&parent), sizeof parent);
  key += name;
  return key;
}

Node* get(Mount* m, uint64_t id) {
  auto it = m->nodes.find(id);
  return it == m->nodes.end() ? nullptr : it->second.get();
}

Node* child(Mount* m, uint64_t parent, const std::string& name) {
  auto it = m->dentries.find(dentry_key(parent, name));
  return it == m->dentries.end() ? nullptr : get(m, it->second);
}

bool path_of(Mount* m, Node* n, std::string& out, std::string* top) {
  std::vector<const std::string*> parts;
  while (n->id != FUSE_ROOT_ID) {
    if (n->names.empty() || parts.size() > 4096) return false;
    parts.push_back(&n->names[0].second);
    n = get(m, n->names[0].first);
    if (!n) return false;
  }
  out.clear();
  if (parts.empty()) out = "/";
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
    out += '/';
    out += **it;
  }
  if (top) *top = parts.empty() ? std::string() : *parts.back();
  return true;
}

void drop(Node* n) {
  n->fresh_until = 0;
  n->listing.reset();
}

// A name lost its node: its directory's listing may hold older attributes for it (a bound node's own are used
// while it is bound), so it goes.
static void unbound(Mount* m, uint64_t parent) {
  if (Node* p = get(m, parent)) p->listing.reset();
}

// The node's listing, to change in place: copied first if an open directory still reads the old one.
static Listing* own_listing(Node* p) {
  if (p->listing.use_count() > 1) p->listing = std::make_shared<Listing>(*p->listing);
  return p->listing.get();
}

void listing_add(Node* p, const std::string& name, const struct stat& st) {
  if (!p->listing) return;
  Listing* l = own_listing(p);
  if (auto it = l->index.find(name); it != l->index.end()) {
    l->attrs[it->second] = st;
    return;
  }
  l->index.emplace(name, l->names.size());
  l->names.push_back(name);
  l->attrs.push_back(st);
}

bool listing_remove(Node* p, const std::string& name, struct stat* was) {
  if (!p->listing) return false;
  Listing* l = own_listing(p);
  auto it = l->index.find(name);
  if (it == l->index.end()) return false;
  size_t i = it->second, last = l->names.size() - 1;
  if (was) *was = l->attrs[i];
  l->index.erase(it);
  // The last entry takes its place: the order of a listing is no one's to rely on.
  if (i != last) {
    l->names[i] = std::move(l->names[last]);
    l->attrs[i] = l->attrs[last];
    l->index[l->names[i]] = i;
  }
  l->names.pop_back();
  l->attrs.pop_back();
  return true;
}

static Node* make(Mount* m, uint64_t id) {
  auto& slot = m->nodes[id];
  slot = std::make_unique<Node>();
  slot->id = id;
  return slot.get();
}

static void name_node(Mount* m, Node* n, uint64_t parent, const std::string& name) {
  n->names.emplace_back(parent, name);
  m->dentries[dentry_key(parent, name)] = n->id;
}

static uint64_t private_id(Mount* m) {
  while (m->nodes.count(m->next_private)) m->next_private++;
  return m->next_private++;
}

Node* bind(Mount* m, uint64_t parent, const std::string& name, const struct stat& st) {
  if (Node* n = child(m, parent, name)) {
    // A copy-up gives a path a new inode number: the node stays. Another type is another file.
    if (!n->known || ((n->st.st_mode ^ st.st_mode) & S_IFMT) == 0) return n;
    unbind(m, parent, name);
    unbound(m, parent);
  }
  uint64_t id = st.st_ino;
  if (!m->private_ids && id > FUSE_ROOT_ID && id < PRIVATE_IDS) {
    Node* same = get(m, id);
    if (same && same->nlookup == 0 && same->id != FUSE_ROOT_ID) {
      // A node the kernel forgot: its number now names this path (a disk reuses inode numbers).
      for (auto& [p, nm] : same->names) {
        auto it = m->dentries.find(dentry_key(p, nm));
        if (it != m->dentries.end() && it->second == id) m->dentries.erase(it);
        unbound(m, p);
      }
      same->names.clear();
      same->known = false;
      drop(same);
      name_node(m, same, parent, name);
      return same;
    }
    if (!same) {
      Node* n = make(m, id);
      name_node(m, n, parent, name);
      return n;
    }
    // A hard link seen under a second name is one node; anything else keeps its own (the number was reused).
    // One file shares size and change time under every name; a reused number with st_nlink > 1 rarely does.
    bool link = !S_ISDIR(st.st_mode) && st.st_nlink > 1 && !same->names.empty() && same->known &&
                ((same->st.st_mode ^ st.st_mode) & S_IFMT) == 0 && same->st.st_size == st.st_size &&
                same->st.st_ctim.tv_sec == st.st_ctim.tv_sec && same->st.st_ctim.tv_nsec == st.st_ctim.tv_nsec;
    if (link) {
      name_node(m, same, parent, name);
      return same;
    }
  }
  Node* n = make(m, private_id(m));
  name_node(m, n, parent, name);
  return n;
}

void alias(Mount* m, Node* n, uint64_t parent, const std::string& name) {
  if (child(m, parent, name)) unbind(m, parent, name);
  name_node(m, n, parent, name);
}

void unbind(Mount* m, uint64_t parent, const std::string& name) {
  auto it = m->dentries.find(dentry_key(parent, name));
  if (it == m->dentries.end()) return;
  Node* n = get(m, it->second);
  m->dentries.erase(it);
  if (!n) return;
  for (auto i = n->names.begin(); i != n->names.end(); ++i) {
    if (i->first == parent && i->second == name) {
      n->names.erase(i);
      break;
    }
  }
  if (!n->names.empty()) return;
  n->st.st_nlink = 0;
  if (n->nlookup == 0 && n->id != FUSE_ROOT_ID) m->nodes.erase(n->id);
}

void move(Mount* m, uint64_t parent, const std::string& name, uint64_t parent2, const std::string& name2) {
  Node* n = child(m, parent, name);
  if (Node* target = child(m, parent2, name2); target && target != n) unbind(m, parent2, name2);
  if (!n) return;
  // The name changes in place (unbind could free a node the kernel no longer holds).
  m->dentries.erase(dentry_key(parent, name));
  m->dentries.erase(dentry_key(parent2, name2));
  for (auto& entry : n->names) {
    if (entry.first == parent && entry.second == name) {
      entry = {parent2, name2};
      m->dentries[dentry_key(parent2, name2)] = n->id;
      return;
    }
  }
  name_node(m, n, parent2, name2);
}

static void erase(Mount* m, Node* n) {
  for (auto& [parent, name] : n->names) {
    auto it = m->dentries.find(dentry_key(parent, name));
    if (it != m->dentries.end() && it->second == n->id) m->dentries.erase(it);
    unbound(m, parent);
  }
  m->nodes.erase(n->id);  // frees n
}

// The kernel forgets more lookups than this node was given: the table lost count (a reply that took a lookup
// without saying so, or a hand-over that dropped some). Said where nasd's journal gets it; a checked build stops.
static void forgot_too_many(Mount* m, Node* n, uint64_t count) {
  std::string path;
  if (!path_of(m, n, path)) path = n->names.empty() ? "(no name)" : "(unreachable)";
  fprintf(stderr, "nasfuse: FORGET of %" PRIu64 " lookups of node %" PRIu64 " %s, which has %" PRIu64 "\n", count,
          n->id, path.c_str(), n->nlookup);
#ifdef NAS_CHECKED
  abort();
#endif
}

void forget(Mount* m, uint64_t id, uint64_t count) {
  Node* n = get(m, id);
  if (!n || id == FUSE_ROOT_ID) return;
  if (count > n->nlookup) forgot_too_many(m, n, count);
  n->nlookup = n->nlookup > count ? n->nlookup - count : 0;
  if (n->nlookup > 0) return;
  // Kept, for a lookup by id; the oldest forgotten go once there are too many (unless the kernel took them back).
  if (n->names.empty()) return erase(m, n);
  m->forgotten.push_back(id);
  while (m->forgotten.size() > FORGOTTEN_KEPT) {
    Node* old = get(m, m->forgotten.front());
    m->forgotten.pop_front();
    if (old && old->nlookup == 0) erase(m, old);
  }
}

void forget_batch(Mount* m, const struct fuse_forget_data* list, size_t count) {
  for (size_t i = 0; i < count; i++) forget(m, list[i].ino, list[i].nlookup);
}

void remember(Mount* m, Node* n, const struct stat& st, bool cacheable) {
  n->st = st;
  n->known = true;
  n->fresh_until = cacheable ? now() + m->ttl : 0;
}

void fill_entry(Mount* m, Node* n, struct fuse_entry_param* e, double ttl) {
  (void)m;
  e->ino = n->id;
  e->generation = 0;
  e->attr = n->st;
  e->attr_timeout = ttl;
  e->entry_timeout = ttl;
}

std::vector<Exported> export_table(Mount* m) {
  std::vector<Exported> out;
  out.reserve(m->nodes.size());
  for (auto& [id, n] : m->nodes) out.push_back(Exported{id, n->nlookup, n->names});
  return out;
}

void import_table(Mount* m, const std::vector<Exported>& nodes) {
  for (const Exported& e : nodes) {
    // The root is made with the table (its lookup count is the kernel's own); 0 is no id (an unreadable one).
    if (e.id == FUSE_ROOT_ID || e.id == 0) continue;
    auto& slot = m->nodes[e.id];
    if (!slot) slot = std::make_unique<Node>();
    slot->id = e.id;
    slot->nlookup = e.nlookup;
    for (auto& [parent, name] : e.names) {
      slot->names.emplace_back(parent, name);
      m->dentries[dentry_key(parent, name)] = e.id;
    }
    if (e.id >= m->next_private && e.id >= PRIVATE_IDS) m->next_private = e.id + 1;
    if (e.nlookup == 0) m->forgotten.push_back(e.id);
  }
}

}  // namespace nas

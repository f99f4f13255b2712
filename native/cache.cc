// What the binding may answer without JS: freshness of a node's attributes, a directory's listing for lookups,
// and what a run's process may be answered about. The rules (native/README.md): a fill is fresh for the mount's
// ttl unless a change overlapped it (replies.cc decides at remember()); a node open for writing never is.
#include "cache.h"

#include "pidns.h"
#include "table.h"

namespace nas {

bool fresh(const Node* n) { return n->known && n->writers == 0 && n->fresh_until > now(); }

std::string top_of(Mount* m, Node* n, const std::string& name) {
  for (int depth = 0; n && n->id != FUSE_ROOT_ID && depth < 4096; depth++) {
    if (n->names.empty()) return std::string();
    if (n->names[0].first == FUSE_ROOT_ID) return n->names[0].second;
    n = get(m, n->names[0].first);
  }
  return n ? name : std::string();
}

// Nothing is looked up while no run is confined (the hot path); a process not known (pid 0) or gone is JS's to
// decide about.
bool may_serve(Mount* m, pid_t pid, Node* n, const std::string& name) {
  if (m->restricted.empty()) return true;
  std::string top = top_of(m, n, name);
  if (top.empty()) return true;
  if (pid <= 0) return false;
  std::vector<std::string> spaces = pid_namespaces(pid);
  if (spaces.empty()) return false;
  for (const std::string& ns : spaces) {
    auto it = m->restricted.find(ns);
    if (it != m->restricted.end()) return it->second.count(top) > 0;
  }
  return true;
}

bool attr_cached(Mount* m, pid_t pid, Node* n, double* ttl) {
  // An unlinked file (no name left) is not under any view: its attributes are its open handles' own.
  bool unlinked = n->names.empty() && n->id != FUSE_ROOT_ID;
  if (!fresh(n) || !(unlinked || may_serve(m, pid, n))) return false;
  *ttl = unlinked ? 0 : n->id == FUSE_ROOT_ID ? ROOT_TTL : m->ttl;
  return true;
}

Cached lookup_cached(Mount* m, pid_t pid, Node* p, const std::string& name, struct fuse_entry_param* e) {
  if (!may_serve(m, pid, p, name)) return Cached::ASK_JS;
  Node* n = child(m, p->id, name);
  if (!n && p->listing) {
    auto it = p->listing->index.find(name);
    if (it == p->listing->index.end()) return Cached::NO_ENTRY;
    // A copy: bind may drop this listing (a forgotten node it reuses had a name here).
    struct stat st = p->listing->attrs[it->second];
    n = bind(m, p->id, name, st);
    remember(m, n, st, p->listing != nullptr);
  }
  if (!n || !fresh(n)) return Cached::ASK_JS;
  n->nlookup++;
  fill_entry(m, n, e, m->ttl);
  return Cached::ENTRY;
}

}  // namespace nas

// libfuse's low-level handlers, on its worker threads. Lookups, attributes and listings of what the cache holds
// are answered here; everything else goes to JS as a Call (which answers through replies.cc). A worker never
// waits for JS.
#include "ops.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <memory>

#include "cache.h"
#include "handlers.h"
#include "table.h"

namespace nas {

Mount* mount_of(fuse_req_t req) { return static_cast<Mount*>(fuse_req_userdata(req)); }

Call* call(fuse_req_t req, Op op, uint64_t ino) {
  Mount* m = mount_of(req);
  Call* c = new Call();
  c->m = m;
  c->req = req;
  c->op = op;
  c->ino = ino;
  c->ctx = *fuse_req_ctx(req);
  c->mutations = m->mutations.load();
  c->invalidations = m->invalidations.load();
  return c;
}

void send(Call* c) {
  c->m->misses++;
  if (napi_call_threadsafe_function(c->m->requests, c, napi_tsfn_nonblocking) != napi_ok) {
    fuse_reply_err(c->req, EIO);
    free(c->data);
    delete c;
  }
}

// A request that changes something: fills from JS that overlap it are not cached.
void changing(Call* c) { c->m->mutations++; }

// A change begins: the versions of what it changes move (the mutex held); returns the version it leaves.
uint64_t begin(Node* n) { return n ? ++n->version : 0; }

// The path a request names (parent + name), or false when the parent is unknown.
static bool named(Mount* m, uint64_t parent, const char* name, std::string& out) {
  Node* p = get(m, parent);
  if (!p || !path_of(m, p, out)) return false;
  if (out.size() > 1) out += '/';
  out += name;
  return true;
}

// A request about a name in a directory: its path resolved now; false (and ESTALE) when the directory is unknown.
bool in_dir(Call* c, uint64_t parent, const char* name) {
  Mount* m = c->m;
  c->parent = parent;
  c->name = name;
  std::lock_guard<std::mutex> lock(m->mu);
  if (named(m, parent, name, c->path)) {
    Node* n = child(m, parent, name);
    c->version = n ? n->version : 0;
    if (c->op != LOOKUP) {
      // A change in the directory (and of the node the name stands for, which unlink or rename changes).
      c->dir_version = begin(get(m, parent));
      begin(n);
    }
    return true;
  }
  fuse_reply_err(c->req, ESTALE);
  delete c;
  return false;
}

static void ll_init(void* userdata, struct fuse_conn_info* conn) {
  Mount* m = static_cast<Mount*>(userdata);
  // POSIX_ACL: the kernel checks (and caches) the access ACLs nasd reports: how a branch's write-lease principals
  // share the rights of the Home's owner account on what it owns there (src/cow/owner-share.ts).
  conn->want |= FUSE_CAP_READDIRPLUS | FUSE_CAP_READDIRPLUS_AUTO | FUSE_CAP_EXPORT_SUPPORT |
                FUSE_CAP_CACHE_SYMLINKS | FUSE_CAP_AUTO_INVAL_DATA | FUSE_CAP_POSIX_ACL;
  conn->want &= conn->capable;
  // Writes go through (close-to-commit and fsync keep their guarantees); truncation comes as setattr, as before.
  conn->want &= ~(FUSE_CAP_WRITEBACK_CACHE | FUSE_CAP_ATOMIC_O_TRUNC | FUSE_CAP_HANDLE_KILLPRIV);
  conn->max_write = 1 << 20;
  conn->time_gran = 1;
  // The notifier may tell the kernel from now on (libfuse sends the INIT reply once this returns).
  m->initialized = true;
}

// NFS export: "." and ".." looked up by node id (a file handle names the node, the kernel may have dropped it).
static void lookup_by_id(fuse_req_t req, fuse_ino_t ino, bool parent) {
  Mount* m = mount_of(req);
  Call* c;
  {
    std::lock_guard<std::mutex> lock(m->mu);
    Node* n = get(m, ino);
    if (n && parent && ino != FUSE_ROOT_ID) n = n->names.empty() ? nullptr : get(m, n->names[0].first);
    if (!n) return (void)fuse_reply_err(req, ESTALE);
    if (n->known) {
      struct fuse_entry_param e {};
      n->nlookup++;
      fill_entry(m, n, &e, 0);
      return (void)fuse_reply_entry(req, &e);
    }
    c = call(req, LOOKUP, n->id);  // answered for the node itself: replies.cc binds no name when a call has none
    if (!path_of(m, n, c->path)) {
      delete c;
      return (void)fuse_reply_err(req, ESTALE);
    }
  }
  send(c);
}

static void ll_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  Mount* m = mount_of(req);
  std::string nm(name);
  if (nm == "." || nm == "..") return lookup_by_id(req, parent, nm == "..");
  {
    std::lock_guard<std::mutex> lock(m->mu);
    Node* p = get(m, parent);
    if (!p) return (void)fuse_reply_err(req, ESTALE);
    struct fuse_entry_param e {};
    switch (lookup_cached(m, fuse_req_ctx(req)->pid, p, nm, &e)) {
      case Cached::ASK_JS: break;
      case Cached::NO_ENTRY:
        m->hits++;
        return (void)fuse_reply_err(req, ENOENT);
      case Cached::ENTRY:
        m->hits++;
        return (void)fuse_reply_entry(req, &e);
    }
  }
  Call* c = call(req, LOOKUP, 0);
  if (in_dir(c, parent, name)) send(c);
}

static void ll_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  Mount* m = mount_of(req);
  {
    std::lock_guard<std::mutex> lock(m->mu);
    forget(m, ino, nlookup);
  }
  fuse_reply_none(req);
}

static void ll_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data* list) {
  Mount* m = mount_of(req);
  {
    std::lock_guard<std::mutex> lock(m->mu);
    forget_batch(m, list, count);
  }
  fuse_reply_none(req);
}

// A request about one node, sent to JS with its path; false (and an error reply) when the node is unknown.
bool with_path(fuse_req_t req, Call* c) {
  Mount* m = c->m;
  std::lock_guard<std::mutex> lock(m->mu);
  Node* n = get(m, c->ino);
  if (n) c->version = n->version;
  if (n && path_of(m, n, c->path)) return true;
  // A node whose every name is gone (unlinked while open): requests by handle still work without a path.
  if (n && row(c->op).by_handle && c->has_fi) {
    c->path.clear();
    return true;
  }
  fuse_reply_err(req, n ? ENOENT : ESTALE);
  delete c;
  return false;
}

static void ll_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  Mount* m = mount_of(req);
  {
    std::lock_guard<std::mutex> lock(m->mu);
    Node* n = get(m, ino);
    if (!n) return (void)fuse_reply_err(req, ESTALE);
    double ttl;
    if (attr_cached(m, fuse_req_ctx(req)->pid, n, &ttl)) {
      m->hits++;
      return (void)fuse_reply_attr(req, &n->st, ttl);
    }
    // An unlinked file has no path: asked through the descriptor it is open on, else as last seen.
    bool unlinked = n->names.empty() && ino != FUSE_ROOT_ID;
    if (unlinked && !fi) return n->known ? (void)fuse_reply_attr(req, &n->st, 0) : (void)fuse_reply_err(req, ENOENT);
  }
  Call* c = call(req, GETATTR, ino);
  if (fi) {
    c->has_fi = true;
    c->fi = *fi;
  }
  if (with_path(req, c)) send(c);
}

static void ll_setattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, struct fuse_file_info* fi) {
  Call* c = call(req, SETATTR, ino);
  c->valid = to_set;
  c->set = *attr;
  if (fi) {
    c->has_fi = true;
    c->fi = *fi;
  }
  if (!with_path(req, c)) return;
  {
    std::lock_guard<std::mutex> lock(c->m->mu);
    c->version = begin(get(c->m, ino));
  }
  changing(c);
  send(c);
}

static void ll_readlink(fuse_req_t req, fuse_ino_t ino) {
  Call* c = call(req, READLINK, ino);
  if (with_path(req, c)) send(c);
}

// A request that makes or removes a name: sent as a change.
static void change_in_dir(fuse_req_t req, Op op, fuse_ino_t parent, const char* name, mode_t mode = 0, dev_t rdev = 0) {
  Call* c = call(req, op, 0);
  c->mode = mode;
  c->rdev = rdev;
  if (!in_dir(c, parent, name)) return;
  changing(c);
  send(c);
}

static void ll_mknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev) {
  change_in_dir(req, MKNOD, parent, name, mode, rdev);
}
static void ll_mkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) { change_in_dir(req, MKDIR, parent, name, mode); }
static void ll_unlink(fuse_req_t req, fuse_ino_t parent, const char* name) { change_in_dir(req, UNLINK, parent, name); }
static void ll_rmdir(fuse_req_t req, fuse_ino_t parent, const char* name) { change_in_dir(req, RMDIR, parent, name); }

static void ll_symlink(fuse_req_t req, const char* link, fuse_ino_t parent, const char* name) {
  Call* c = call(req, SYMLINK, 0);
  c->text = link;
  if (!in_dir(c, parent, name)) return;
  changing(c);
  send(c);
}

static void ll_rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent, const char* newname,
                      unsigned int flags) {
  Call* c = call(req, RENAME, 0);
  c->parent2 = newparent;
  c->name2 = newname;
  c->flags = static_cast<int>(flags);
  if (!in_dir(c, parent, name)) return;
  {
    std::lock_guard<std::mutex> lock(c->m->mu);
    if (!named(c->m, newparent, newname, c->path2)) {
      fuse_reply_err(req, ESTALE);
      delete c;
      return;
    }
    c->dir_version2 = newparent == parent ? c->dir_version : begin(get(c->m, newparent));
    begin(child(c->m, newparent, newname));
  }
  changing(c);
  send(c);
}

static void ll_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char* newname) {
  Mount* m = mount_of(req);
  Call* c = call(req, LINK, ino);
  c->parent = newparent;
  c->name = newname;
  {
    std::lock_guard<std::mutex> lock(m->mu);
    Node* n = get(m, ino);
    if (!n || !path_of(m, n, c->path) || !named(m, newparent, newname, c->path2)) {
      delete c;
      return (void)fuse_reply_err(req, n ? ENOENT : ESTALE);
    }
    c->dir_version = begin(get(m, newparent));
    begin(n);
  }
  changing(c);
  send(c);
}

// The one extended attribute nasd has is a node's access ACL, asked of JS (the kernel caches it until the node is
// invalidated or changed). Every other name has no value, answered here: the kernel asks security.capability
// before every write.
static constexpr const char* ACL_ACCESS = "system.posix_acl_access";

// Whether a node may have an ACL: it has a name, under a view JS said shares (share()).
static bool may_share(fuse_req_t req, fuse_ino_t ino) {
  Mount* m = mount_of(req);
  std::lock_guard<std::mutex> lock(m->mu);
  if (m->shared.empty() || ino == FUSE_ROOT_ID) return false;
  Node* n = get(m, ino);
  if (!n || n->names.empty()) return false;
  return m->shared.count(top_of(m, n, std::string())) > 0;
}

static void ll_getxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  if (strcmp(name, ACL_ACCESS) != 0 || !may_share(req, ino)) return (void)fuse_reply_err(req, ENODATA);
  Call* c = call(req, GETXATTR, ino);
  c->size = size;
  if (with_path(req, c)) send(c);
}

static void ll_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  if (!may_share(req, ino)) return (void)(size ? fuse_reply_buf(req, nullptr, 0) : fuse_reply_xattr(req, 0));
  Call* c = call(req, LISTXATTR, ino);
  c->size = size;
  if (with_path(req, c)) send(c);
}

static void ll_statfs(fuse_req_t req, fuse_ino_t ino) {
  Call* c = call(req, STATFS, ino);
  if (with_path(req, c)) send(c);
}

const struct fuse_lowlevel_ops* operations() {
  static struct fuse_lowlevel_ops ops = {};
  ops.init = ll_init;
  ops.lookup = ll_lookup;
  ops.forget = ll_forget;
  ops.forget_multi = ll_forget_multi;
  ops.getattr = ll_getattr;
  ops.setattr = ll_setattr;
  ops.readlink = ll_readlink;
  ops.mknod = ll_mknod;
  ops.mkdir = ll_mkdir;
  ops.unlink = ll_unlink;
  ops.rmdir = ll_rmdir;
  ops.symlink = ll_symlink;
  ops.rename = ll_rename;
  ops.link = ll_link;
  ops.open = ll_open;
  ops.read = ll_read;
  ops.write = ll_write;
  ops.release = ll_release;
  ops.fsync = ll_fsync;
  ops.opendir = ll_opendir;
  ops.readdir = ll_readdir;
  ops.readdirplus = ll_readdirplus;
  ops.releasedir = ll_releasedir;
  ops.fsyncdir = ll_fsyncdir;
  ops.statfs = ll_statfs;
  ops.create = ll_create;
  ops.getxattr = ll_getxattr;
  ops.listxattr = ll_listxattr;
  // No setxattr or removexattr: the kernel answers EOPNOTSUPP for them (setfacl, setfattr) once told ENOSYS.
  // No flush: the kernel then stops sending FLUSH on every close; written files join a commit at release.
  return &ops;
}

}  // namespace nas

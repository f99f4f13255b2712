// Answers on the JS thread: JS's answer to a Call (reply) becomes the reply to the kernel and what the cache and the
// node table learn from it, by the answer kind protocol.h gives its op. Each kind's function replies exactly once.
#include "replies.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>

#include "invalidate.h"
#include "js.h"
#include "ops.h"
#include "table.h"

namespace nas {

static void unpack(const double* w, struct stat* st) {
  memset(st, 0, sizeof *st);
  st->st_ino = static_cast<ino_t>(w[0]);
  st->st_mode = static_cast<mode_t>(w[1]);
  st->st_nlink = static_cast<nlink_t>(w[2]);
  st->st_uid = static_cast<uid_t>(w[3]);
  st->st_gid = static_cast<gid_t>(w[4]);
  st->st_rdev = static_cast<dev_t>(w[5]);
  st->st_size = static_cast<off_t>(w[6]);
  st->st_blocks = static_cast<blkcnt_t>(w[7]);
  st->st_blksize = 4096;
  st->st_atim = {static_cast<time_t>(w[8]), static_cast<long>(w[9])};
  st->st_mtim = {static_cast<time_t>(w[10]), static_cast<long>(w[11])};
  st->st_ctim = {static_cast<time_t>(w[12]), static_cast<long>(w[13])};
}

// An answer as read from JS (before the mount's mutex is taken), and what the request saw of the mount's changes.
struct Answered {
  Call* c;
  Mount* m;
  bool attr = false;  // st holds the answer's `attr`
  struct stat st {};
  const double* dirs = nullptr;  // `dirs`: a change's directories after it (the second: a rename's target's)
  size_t dir_words = 0;
  uint64_t fh = 0;
  int fd = -1;
  bool keep_cache = false;
  size_t count = 0;
  std::string target;
  const double* stats = nullptr;
  void* bytes = nullptr;
  size_t size = 0;
  std::shared_ptr<Listing> listing;
  bool cacheable = false;  // nothing changed or was invalidated while JS answered
  bool settled = false;    // nothing was invalidated meanwhile
  double ttl = 0;

  const double* dir_after(size_t i) const { return dirs && dir_words >= (i + 1) * ATTR_WORDS ? dirs + i * ATTR_WORDS : nullptr; }
};

static bool read_listing(Js& js, napi_value answer, Answered& a) {
  napi_value names = js.get(answer, "names");
  const double* w = nullptr;
  size_t words = 0;
  if (!js.is_array(names) || !js.doubles(js.get(answer, "attrs"), &w, &words)) return false;
  uint32_t count = js.length(names);
  if (words < count * ATTR_WORDS) return false;
  a.listing = std::make_shared<Listing>();
  a.listing->names.reserve(count);
  a.listing->attrs.resize(count);
  for (uint32_t i = 0; i < count; i++) {
    std::string name = js.text(js.at(names, i));
    a.listing->index.emplace(name, i);
    a.listing->names.push_back(std::move(name));
    unpack(w + i * ATTR_WORDS, &a.listing->attrs[i]);
  }
  return !js.failed;
}

// The fields the op's answer kind needs; false: the answer lacks one (the kernel gets EIO).
static bool read_answer(Js& js, napi_value answer, Answered& a) {
  Answer kind = row(a.c->op).answer;
  if (kind == A_NONE || kind == A_COUNT) {
    if (kind == A_COUNT) a.count = static_cast<size_t>(js.to_number(js.present(answer) ? js.get(answer, "count") : nullptr));
    return !js.failed;
  }
  if (!js.present(answer)) return kind == A_CHANGED || kind == A_RELEASED;
  const double* w = nullptr;
  size_t words = 0;
  if (js.doubles(js.get(answer, "attr"), &w, &words) && words >= ATTR_WORDS) a.attr = true, unpack(w, &a.st);
  js.doubles(js.get(answer, "dirs"), &a.dirs, &a.dir_words);
  switch (kind) {
    case A_ENTRY: case A_ATTR: case A_MADE: return a.attr;
    case A_OPENED: case A_CREATED:
      a.fh = static_cast<uint64_t>(js.to_number(js.get(answer, "fh")));
      a.fd = static_cast<int>(js.to_number(js.get(answer, "fd"), -1));
      a.keep_cache = js.to_bool(js.get(answer, "keepCache"));
      return kind == A_OPENED || a.attr;
    case A_TEXT: {
      napi_value target = js.get(answer, "target");
      if (js.type(target) != napi_string) return false;
      a.target = js.text(target);
      return !js.failed;
    }
    case A_STATFS: return js.doubles(js.get(answer, "stats"), &a.stats, &words) && words >= STATFS_WORDS;
    case A_BYTES: return js.bytes(js.get(answer, "bytes"), &a.bytes, &a.size);
    case A_LISTING: return read_listing(js, answer, a);
    default: return true;
  }
}

static void reply_entry(Call* c, Node* n, double ttl) {
  struct fuse_entry_param e {};
  n->nlookup++;
  fill_entry(c->m, n, &e, ttl);
  fuse_reply_entry(c->req, &e);
}

// A git path's inode number (cow/attr.ts gitIno): what it is until a copy-up puts it on disk.
static bool from_git(const Node* n) { return n->st.st_ino >= GIT_INOS && n->st.st_ino < PRIVATE_IDS; }

// Node n's attributes changed: they are asked again. Its listing (its names) stays: what changes names edits the
// listing or drops it; and its directories' listings give a bound node's own attributes, so they stay too.
static void touched(Node* n) {
  n->fresh_until = 0;
  n->version++;
}

// After a change by a request: the cache forgets the node. A path served from git that is now on disk (copied
// up) has new attributes the kernel must re-read, and so has the directory it was made in: up to the first
// directory that was on disk already (or not known).
static void changed(Mount* m, Node* n) {
  for (int depth = 0; n && depth < 4096; depth++) {
    touched(n);
    if (!n->known || !from_git(n)) break;
    n->known = false;
    queue_attr(m, n->id);
    // Its inode number is the disk's now: the listings that name it by git's go.
    for (auto& [parent, name] : n->names)
      if (Node* p = get(m, parent)) p->listing.reset();
    if (n->names.empty()) break;
    n = get(m, n->names[0].first);
  }
}

// A request made, removed or renamed a name in directory `id`. If nothing else changed it meanwhile (it is at the
// version the request left) and it was on disk already, its attributes are the ones JS read after the change
// (`after`) and its listing stays, for the caller to edit: the directory is returned. Else both are asked again.
static Node* dir_changed(Mount* m, uint64_t id, uint64_t left, const double* after, bool settled) {
  Node* p = get(m, id);
  if (!p) return nullptr;
  struct stat st {};
  if (after) unpack(after, &st);
  if (after && settled && id != FUSE_ROOT_ID && p->known && !from_git(p) && p->version == left && st.st_ino == p->st.st_ino) {
    touched(p);
    remember(m, p, st, true);
    return p;
  }
  changed(m, p);
  p->listing.reset();
  return nullptr;
}

// An open file on disk: JS gave its descriptor, and the binding reads through a duplicate of it (the mutex held).
static void keep_descriptor(Mount* m, uint64_t fh, int fd) {
  if (fd < 0) return;
  int dup = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (dup < 0) return;
  if (auto it = m->files.find(fh); it != m->files.end()) close(it->second);
  m->files[fh] = dup;
}

// An open the kernel did not take (its caller was interrupted): no release will come for it.
static void forget_descriptor(Mount* m, uint64_t fh) {
  std::lock_guard<std::mutex> lock(m->mu);
  if (auto it = m->files.find(fh); it != m->files.end()) {
    close(it->second);
    m->files.erase(it);
  }
}

using Lock = std::unique_lock<std::mutex>;

// A refusal. A change refused may have changed part of what it touched: its directories are listed again. A node
// JS no longer finds (nasd removed it on its own): the kernel looks its name up again.
static void refused(Answered& a, Lock& lock, int err) {
  Call* c = a.c;
  Mount* m = a.m;
  if (row(c->op).changes_names) {
    for (uint64_t dir : {c->parent, c->parent2})
      if (Node* p = get(m, dir)) p->listing.reset();
  }
  if (err == ENOENT && (c->op == GETATTR || c->op == OPEN)) {
    if (Node* n = get(m, c->ino)) {
      for (auto& [parent, name] : n->names) queue_expire(m, parent, name);
      n->known = false;
      drop(n);
    }
  }
  lock.unlock();
  fuse_reply_err(c->req, err);
}

static void finish_entry(Answered& a, Lock& lock) {
  Call* c = a.c;
  Mount* m = a.m;
  Node* n = c->name.empty() ? get(m, c->ino) : bind(m, c->parent, c->name, a.st);
  if (!n) {
    lock.unlock();
    fuse_reply_err(c->req, ESTALE);
    return;
  }
  remember(m, n, a.st, a.cacheable && n->version == c->version && n->writers == 0);
  reply_entry(c, n, a.ttl);
}

static void finish_attr(Answered& a, Lock& lock) {
  Call* c = a.c;
  Mount* m = a.m;
  if (Node* n = get(m, c->ino)) {
    // Cached if nothing else changed the node meanwhile (a setattr's own change is the version it left).
    bool alone = n->version == c->version && n->writers == 0;
    if (c->op == SETATTR) {
      bool on_disk = n->known && !from_git(n) && a.st.st_ino == n->st.st_ino;
      changed(m, n);
      remember(m, n, a.st, alone && on_disk && a.settled);
    } else {
      remember(m, n, a.st, a.cacheable && alone);
    }
  }
  lock.unlock();
  fuse_reply_attr(c->req, &a.st, c->ino == FUSE_ROOT_ID ? ROOT_TTL : a.ttl);
}

static void finish_made(Answered& a, Lock& lock) {
  Call* c = a.c;
  Mount* m = a.m;
  Node* n;
  bool made = !child(m, c->parent, c->name);
  if (c->op == LINK && (n = get(m, c->ino))) alias(m, n, c->parent, c->name);
  else n = bind(m, c->parent, c->name, a.st);
  touched(n);
  remember(m, n, a.st, false);
  // A directory made here is empty: its listing is known, and the changes made through the mount keep it so.
  if (c->op == MKDIR) n->listing = made && a.settled ? std::make_shared<Listing>() : nullptr;
  if (Node* p = dir_changed(m, c->parent, c->dir_version, a.dir_after(0), a.settled)) listing_add(p, c->name, a.st);
  reply_entry(c, n, a.ttl);
}

static void finish_created(Answered& a, Lock& lock) {
  Call* c = a.c;
  Mount* m = a.m;
  Node* n = bind(m, c->parent, c->name, a.st);
  remember(m, n, a.st, false);
  n->version++;
  n->writers++;
  if (Node* p = dir_changed(m, c->parent, c->dir_version, a.dir_after(0), a.settled)) listing_add(p, c->name, a.st);
  struct fuse_entry_param e {};
  n->nlookup++;
  fill_entry(m, n, &e, a.ttl);
  c->fi.fh = a.fh;
  c->fi.keep_cache = 0;
  keep_descriptor(m, c->fi.fh, a.fd);
  lock.unlock();
  if (fuse_reply_create(c->req, &e, &c->fi) != 0) forget_descriptor(m, c->fi.fh);
}

// A name removed (unlink, rmdir) or moved (rename).
static void finish_changed(Answered& a, Lock& lock) {
  Call* c = a.c;
  Mount* m = a.m;
  if (c->op != RENAME) {
    // Its link count and ctime changed (a hard link's other names still show it).
    if (Node* n = child(m, c->parent, c->name)) drop(n), n->version++;
    unbind(m, c->parent, c->name);
    if (Node* p = dir_changed(m, c->parent, c->dir_version, a.dir_after(0), a.settled)) listing_remove(p, c->name);
    lock.unlock();
    fuse_reply_err(c->req, 0);
    return;
  }
  Node* moved = child(m, c->parent, c->name);
  Node* replaced = child(m, c->parent2, c->name2);
  if (moved) touched(moved);
  if (replaced && replaced != moved) drop(replaced), replaced->version++;
  move(m, c->parent, c->name, c->parent2, c->name2);
  // The entry moves with its attributes as listed (or as last known): the node's own are asked again.
  struct stat entry {};
  bool listed = false;
  if (Node* p = dir_changed(m, c->parent, c->dir_version, a.dir_after(0), a.settled)) listed = listing_remove(p, c->name, &entry);
  if (!listed && moved && moved->known) entry = moved->st, listed = true;
  // Moved from git, it is on disk now (a copy-up): under another inode number than any listing knows.
  if (moved && moved->known && from_git(moved)) listed = false;
  Node* to = c->parent2 == c->parent ? get(m, c->parent) : dir_changed(m, c->parent2, c->dir_version2, a.dir_after(1), a.settled);
  if (to && to->listing) {
    if (listed) listing_add(to, c->name2, entry);
    else to->listing.reset();
  }
  lock.unlock();
  fuse_reply_err(c->req, 0);
}

static void finish_opened(Answered& a, Lock& lock) {
  Call* c = a.c;
  Mount* m = a.m;
  if (Node* n = get(m, c->ino); n && (c->fi.flags & O_ACCMODE) != O_RDONLY) {
    changed(m, n);
    n->writers++;
  }
  c->fi.fh = a.fh;
  c->fi.keep_cache = a.keep_cache;
  keep_descriptor(m, c->fi.fh, a.fd);
  lock.unlock();
  if (fuse_reply_open(c->req, &c->fi) != 0) forget_descriptor(m, c->fi.fh);
}

static void finish_listing(Answered& a, Lock& lock) {
  Call* c = a.c;
  Mount* m = a.m;
  bool cacheable = a.cacheable;
  if (Node* n = get(m, c->ino); n && cacheable && c->ino != FUSE_ROOT_ID) n->listing = a.listing;
  if (c->ino == FUSE_ROOT_ID) cacheable = false;  // Homes and branches come and go: asked each time
  if (c->relist) {
    // A readdir that asked for a fresh listing: its handle lists this one from now on.
    m->dirs[c->fi.fh] = a.listing;
    list_into(c->req, m, c->ino, a.listing, c->size, c->off, c->plus);
    lock.unlock();
    return;
  }
  c->fi.fh = m->next_dir++;
  m->dirs[c->fi.fh] = a.listing;
  lock.unlock();
  c->fi.cache_readdir = cacheable;
  c->fi.keep_cache = cacheable;
  if (fuse_reply_open(c->req, &c->fi) != 0) {
    std::lock_guard<std::mutex> again(m->mu);
    m->dirs.erase(c->fi.fh);
  }
}

// The last writer's close: the file's attributes as it is left, unless something changed it meanwhile (or the
// name now stands for another file).
static void finish_released(Answered& a, Lock& lock) {
  Call* c = a.c;
  Node* n = get(a.m, c->ino);
  if (n && a.attr && c->writing && n->writers == 0 && n->version == c->version && a.settled && n->known &&
      a.st.st_ino == n->st.st_ino && !n->names.empty())
    remember(a.m, n, a.st, true);
  lock.unlock();
  fuse_reply_err(c->req, 0);
}

// The answers that teach the table nothing: the mutex is let go first.
static void finish_plain(Answered& a, Lock& lock) {
  Call* c = a.c;
  if (c->op == WRITE) {
    // What a request read about the file while this write ran is not kept.
    if (Node* n = get(a.m, c->ino)) touched(n);
  }
  lock.unlock();
  switch (row(c->op).answer) {
    case A_COUNT:
      if (c->op == READ) fuse_reply_buf(c->req, c->data, std::min(a.count, c->size));
      else fuse_reply_write(c->req, a.count);
      break;
    case A_TEXT: fuse_reply_readlink(c->req, a.target.c_str()); break;
    case A_BYTES:
      // An ACL, or names each ended by a NUL; a size of 0 asks only how many bytes there are.
      if (c->size == 0) fuse_reply_xattr(c->req, a.size);
      else if (a.size > c->size) fuse_reply_err(c->req, ERANGE);
      else fuse_reply_buf(c->req, static_cast<const char*>(a.bytes), a.size);
      break;
    case A_STATFS: {
      const double* w = a.stats;
      struct statvfs sv {};
      sv.f_bsize = w[0]; sv.f_frsize = w[1]; sv.f_blocks = w[2]; sv.f_bfree = w[3]; sv.f_bavail = w[4];
      sv.f_files = w[5]; sv.f_ffree = w[6]; sv.f_favail = w[7]; sv.f_fsid = w[8]; sv.f_flag = w[9]; sv.f_namemax = w[10];
      fuse_reply_statfs(c->req, &sv);
      break;
    }
    default: fuse_reply_err(c->req, 0);
  }
}

void finish(napi_env env, Call* c, int result, napi_value answer) {
  Mount* m = c->m;
  Js js(env);
  Answered a{c, m};
  a.cacheable = c->mutations == m->mutations.load() && c->invalidations == m->invalidations.load();
  a.settled = c->invalidations == m->invalidations.load();
  a.ttl = a.settled ? m->ttl : 0;
  int err = result < 0 ? -result : 0;
  bool readable = err || read_answer(js, answer, a);
  Lock lock(m->mu);
  if (c->op == RELEASE && c->writing) {
    if (Node* n = get(m, c->ino); n && n->writers > 0) n->writers--;
  }
  if (row(c->op).mutates) m->mutations++;
  // A listing is cached only if nothing changed meanwhile, up to now (it was read from JS without the mutex).
  if (c->op == OPENDIR) a.cacheable = c->mutations == m->mutations.load() && c->invalidations == m->invalidations.load();
  if (err) refused(a, lock, err);
  else if (!readable) lock.unlock(), fuse_reply_err(c->req, EIO);
  else {
    switch (row(c->op).answer) {
      case A_ENTRY: finish_entry(a, lock); break;
      case A_ATTR: finish_attr(a, lock); break;
      case A_MADE: finish_made(a, lock); break;
      case A_CREATED: finish_created(a, lock); break;
      case A_CHANGED: finish_changed(a, lock); break;
      case A_OPENED: finish_opened(a, lock); break;
      case A_LISTING: finish_listing(a, lock); break;
      case A_RELEASED: finish_released(a, lock); break;
      default: finish_plain(a, lock);
    }
  }
  if (c->buffer) js.check(napi_delete_reference(env, c->buffer));
  if (c->op != READ) free(c->data);
  delete c;
}

}  // namespace nas

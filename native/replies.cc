// Answers on the JS thread: JS's answer to a Call (reply) becomes the reply to the kernel and what the cache and the
// node table learn from it. The Call reaches JS through deliver (calls.cc).
#include "replies.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <string.h>
#include <sys/statvfs.h>

#include "invalidate.h"
#include "ops.h"
#include "table.h"

namespace nas {

// Attributes cross as 14 doubles: ino, mode, nlink, uid, gid, rdev, size, blocks, then seconds and
// nanoseconds of atime, mtime, ctime (src/fuse-ops/native.ts packs them).
constexpr size_t ATTR_WORDS = 14;

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

static bool doubles(napi_env env, napi_value v, const double** out, size_t* count) {
  napi_typedarray_type type;
  void* data;
  size_t length;
  if (napi_get_typedarray_info(env, v, &type, &length, &data, nullptr, nullptr) != napi_ok || type != napi_float64_array)
    return false;
  *out = static_cast<const double*>(data);
  *count = length;
  return true;
}

static void reply_entry(Call* c, Node* n, bool cacheable, double ttl) {
  struct fuse_entry_param e {};
  n->nlookup++;
  fill_entry(c->m, n, &e, ttl);
  (void)cacheable;
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

void finish(napi_env env, Call* c, double result, napi_value value, napi_value extra, int flag, int fd) {
  Mount* m = c->m;
  int err = result < 0 ? static_cast<int>(-result) : 0;
  const double* w = nullptr;
  size_t words = 0;
  bool cacheable = c->mutations == m->mutations.load() && c->invalidations == m->invalidations.load();
  double ttl = c->invalidations == m->invalidations.load() ? m->ttl : 0;
  bool attr = value && doubles(env, value, &w, &words) && words >= ATTR_WORDS;
  struct stat st {};
  if (attr) unpack(w, &st);
  // A change's directories as JS read them after it (the second: a rename's target directory).
  const double* dirs = nullptr;
  size_t dir_words = 0;
  if (c->op != OPENDIR && extra && !doubles(env, extra, &dirs, &dir_words)) dirs = nullptr;
  auto dir_after = [&](size_t i) { return dirs && dir_words >= (i + 1) * ATTR_WORDS ? dirs + i * ATTR_WORDS : nullptr; };
  bool settled = c->invalidations == m->invalidations.load();
  std::unique_lock<std::mutex> lock(m->mu);
  if (c->op == RELEASE && c->writing) {
    if (Node* n = get(m, c->ino); n && n->writers > 0) n->writers--;
  }
  if (c->op != READ && c->op != WRITE && c->op != RELEASE && c->op != FSYNC && c->op != GETATTR && c->op != LOOKUP &&
      c->op != READLINK && c->op != OPENDIR && c->op != STATFS && c->op != FSYNCDIR && c->op != GETXATTR && c->op != LISTXATTR)
    m->mutations++;
  if (err) {
    // A change refused may have changed part of what it touched: its directories are listed again.
    if (c->op == MKNOD || c->op == MKDIR || c->op == SYMLINK || c->op == LINK || c->op == CREATE || c->op == UNLINK ||
        c->op == RMDIR || c->op == RENAME) {
      for (uint64_t dir : {c->parent, c->parent2})
        if (Node* p = get(m, dir)) p->listing.reset();
    }
    // A node JS no longer finds (nasd removed it on its own): the kernel looks its name up again.
    if (err == ENOENT && (c->op == GETATTR || c->op == OPEN)) {
      if (Node* n = get(m, c->ino)) {
        for (auto& [parent, name] : n->names) queue_expire(m, parent, name);
        n->known = false;
        drop(n);
      }
    }
    lock.unlock();
    fuse_reply_err(c->req, err);
  } else {
    switch (c->op) {
      case LOOKUP: {
        if (!attr) goto bad;
        Node* n = c->name.empty() ? get(m, c->ino) : bind(m, c->parent, c->name, st);
        if (!n) { lock.unlock(); fuse_reply_err(c->req, ESTALE); break; }
        remember(m, n, st, cacheable && n->version == c->version && n->writers == 0);
        reply_entry(c, n, cacheable, ttl);
        break;
      }
      case MKNOD: case MKDIR: case SYMLINK: case LINK: {
        if (!attr) goto bad;
        Node* n;
        bool made = !child(m, c->parent, c->name);
        if (c->op == LINK && (n = get(m, c->ino))) alias(m, n, c->parent, c->name);
        else n = bind(m, c->parent, c->name, st);
        touched(n);
        remember(m, n, st, false);
        // A directory made here is empty: its listing is known, and the changes made through the mount keep it so.
        if (c->op == MKDIR) n->listing = made && settled ? std::make_shared<Listing>() : nullptr;
        if (Node* p = dir_changed(m, c->parent, c->dir_version, dir_after(0), settled)) listing_add(p, c->name, st);
        reply_entry(c, n, false, ttl);
        break;
      }
      case CREATE: {
        if (!attr) goto bad;
        Node* n = bind(m, c->parent, c->name, st);
        remember(m, n, st, false);
        n->version++;
        n->writers++;
        if (Node* p = dir_changed(m, c->parent, c->dir_version, dir_after(0), settled)) listing_add(p, c->name, st);
        struct fuse_entry_param e {};
        n->nlookup++;
        fill_entry(m, n, &e, ttl);
        c->fi.fh = static_cast<uint64_t>(result);
        c->fi.keep_cache = 0;
        keep_descriptor(m, c->fi.fh, fd);
        lock.unlock();
        if (fuse_reply_create(c->req, &e, &c->fi) != 0) forget_descriptor(m, c->fi.fh);
        break;
      }
      case GETATTR: case SETATTR: {
        if (!attr) goto bad;
        Node* n = get(m, c->ino);
        if (n) {
          // Cached if nothing else changed the node meanwhile (a setattr's own change is the version it left).
          bool alone = n->version == c->version && n->writers == 0;
          if (c->op == SETATTR) {
            bool on_disk = n->known && !from_git(n) && st.st_ino == n->st.st_ino;
            changed(m, n);
            remember(m, n, st, alone && on_disk && settled);
          } else {
            remember(m, n, st, cacheable && alone);
          }
        }
        lock.unlock();
        fuse_reply_attr(c->req, &st, c->ino == FUSE_ROOT_ID ? ROOT_TTL : ttl);
        break;
      }
      case UNLINK: case RMDIR:
        // Its link count and ctime changed (a hard link's other names still show it).
        if (Node* n = child(m, c->parent, c->name)) drop(n), n->version++;
        unbind(m, c->parent, c->name);
        if (Node* p = dir_changed(m, c->parent, c->dir_version, dir_after(0), settled)) listing_remove(p, c->name);
        lock.unlock();
        fuse_reply_err(c->req, 0);
        break;
      case RENAME: {
        Node* moved = child(m, c->parent, c->name);
        Node* replaced = child(m, c->parent2, c->name2);
        if (moved) touched(moved);
        if (replaced && replaced != moved) drop(replaced), replaced->version++;
        move(m, c->parent, c->name, c->parent2, c->name2);
        // The entry moves with its attributes as listed (or as last known): the node's own are asked again.
        struct stat entry {};
        bool listed = false;
        if (Node* p = dir_changed(m, c->parent, c->dir_version, dir_after(0), settled)) listed = listing_remove(p, c->name, &entry);
        if (!listed && moved && moved->known) entry = moved->st, listed = true;
        // Moved from git, it is on disk now (a copy-up): under another inode number than any listing knows.
        if (moved && moved->known && from_git(moved)) listed = false;
        Node* to = c->parent2 == c->parent ? get(m, c->parent) : dir_changed(m, c->parent2, c->dir_version2, dir_after(1), settled);
        if (to && to->listing) {
          if (listed) listing_add(to, c->name2, entry);
          else to->listing.reset();
        }
        lock.unlock();
        fuse_reply_err(c->req, 0);
        break;
      }
      case OPEN: {
        if (Node* n = get(m, c->ino); n && (c->fi.flags & O_ACCMODE) != O_RDONLY) {
          changed(m, n);
          n->writers++;
        }
        c->fi.fh = static_cast<uint64_t>(result);
        c->fi.keep_cache = flag & 1;
        keep_descriptor(m, c->fi.fh, fd);
        lock.unlock();
        if (fuse_reply_open(c->req, &c->fi) != 0) forget_descriptor(m, c->fi.fh);
        break;
      }
      case OPENDIR: {
        // value: the names; extra: their attributes, ATTR_WORDS each.
        auto listing = std::make_shared<Listing>();
        uint32_t count = 0;
        const double* aw = nullptr;
        size_t awords = 0;
        if (!value || napi_get_array_length(env, value, &count) != napi_ok || !doubles(env, extra, &aw, &awords) ||
            awords < count * ATTR_WORDS)
          goto bad;
        lock.unlock();
        listing->names.reserve(count);
        listing->attrs.resize(count);
        for (uint32_t i = 0; i < count; i++) {
          napi_value item;
          size_t len;
          napi_get_element(env, value, i, &item);
          napi_get_value_string_utf8(env, item, nullptr, 0, &len);
          std::string name(len, '\0');
          napi_get_value_string_utf8(env, item, name.data(), len + 1, &len);
          listing->index.emplace(name, i);
          listing->names.push_back(std::move(name));
          unpack(aw + i * ATTR_WORDS, &listing->attrs[i]);
        }
        lock.lock();
        cacheable = c->mutations == m->mutations.load() && c->invalidations == m->invalidations.load();
        if (Node* n = get(m, c->ino); n && cacheable && c->ino != FUSE_ROOT_ID) n->listing = listing;
        if (c->ino == FUSE_ROOT_ID) cacheable = false;  // Homes and branches come and go: asked each time
        if (c->relist) {
          // A readdir that asked for a fresh listing: its handle lists this one from now on.
          m->dirs[c->fi.fh] = listing;
          list_into(c->req, m, c->ino, listing, c->size, c->off, c->plus);
          lock.unlock();
          break;
        }
        c->fi.fh = m->next_dir++;
        m->dirs[c->fi.fh] = listing;
        lock.unlock();
        c->fi.cache_readdir = cacheable;
        c->fi.keep_cache = cacheable;
        if (fuse_reply_open(c->req, &c->fi) != 0) {
          std::lock_guard<std::mutex> again(m->mu);
          m->dirs.erase(c->fi.fh);
        }
        break;
      }
      case READ:
        lock.unlock();
        fuse_reply_buf(c->req, c->data, std::min(static_cast<size_t>(result), c->size));
        break;
      case WRITE:
        // What a request read about the file while this write ran is not kept.
        if (Node* n = get(m, c->ino)) touched(n);
        lock.unlock();
        fuse_reply_write(c->req, static_cast<size_t>(result));
        break;
      case READLINK: {
        lock.unlock();
        size_t len = 0;
        if (!value || napi_get_value_string_utf8(env, value, nullptr, 0, &len) != napi_ok) goto bad;
        std::string target(len, '\0');
        napi_get_value_string_utf8(env, value, target.data(), len + 1, &len);
        fuse_reply_readlink(c->req, target.c_str());
        break;
      }
      case RELEASE:
        // The last writer's close: the file's attributes as it is left, unless something changed it meanwhile
        // (or the name now stands for another file).
        if (Node* n = get(m, c->ino); n && attr && c->writing && n->writers == 0 && n->version == c->version && settled &&
                                       n->known && st.st_ino == n->st.st_ino && !n->names.empty())
          remember(m, n, st, true);
        lock.unlock();
        fuse_reply_err(c->req, 0);
        break;
      case GETXATTR: case LISTXATTR: {
        // value: the bytes (an ACL, or names each ended by a NUL); a size of 0 asks only how many there are.
        lock.unlock();
        void* bytes = nullptr;
        size_t len = 0;
        if (!value || napi_get_buffer_info(env, value, &bytes, &len) != napi_ok) goto bad;
        if (c->size == 0) fuse_reply_xattr(c->req, len);
        else if (len > c->size) fuse_reply_err(c->req, ERANGE);
        else fuse_reply_buf(c->req, static_cast<const char*>(bytes), len);
        break;
      }
      case STATFS: {
        lock.unlock();
        if (!value || !doubles(env, value, &w, &words) || words < 11) goto bad;
        struct statvfs sv {};
        sv.f_bsize = w[0]; sv.f_frsize = w[1]; sv.f_blocks = w[2]; sv.f_bfree = w[3]; sv.f_bavail = w[4];
        sv.f_files = w[5]; sv.f_ffree = w[6]; sv.f_favail = w[7]; sv.f_fsid = w[8]; sv.f_flag = w[9]; sv.f_namemax = w[10];
        fuse_reply_statfs(c->req, &sv);
        break;
      }
      default:
        lock.unlock();
        fuse_reply_err(c->req, 0);
    }
  }
  goto done;
bad:
  if (lock.owns_lock()) lock.unlock();
  fuse_reply_err(c->req, EIO);
done:
  if (c->buffer) napi_delete_reference(env, c->buffer);
  if (c->op != READ) free(c->data);
  delete c;
}

}  // namespace nas

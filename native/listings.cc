// Directory listings on libfuse's worker threads: opendir, readdir(plus) from the cached listing when it is
// current, releasedir and fsyncdir; what the cache lacks is asked of JS (replies.cc fills it).
#include <errno.h>

#include <memory>

#include "cache.h"
#include "handlers.h"
#include "ops.h"
#include "table.h"

namespace nas {

// A handle number for a listing, in the mount's table (the mutex held).
static uint64_t dir_handle(Mount* m, std::shared_ptr<Listing> listing) {
  uint64_t fh = m->next_dir++;
  m->dirs[fh] = std::move(listing);
  return fh;
}

void ll_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  Mount* m = mount_of(req);
  {
    std::lock_guard<std::mutex> lock(m->mu);
    Node* n = get(m, ino);
    if (!n) return (void)fuse_reply_err(req, ESTALE);
    if (n->listing && may_serve(m, fuse_req_ctx(req)->pid, n)) {
      m->hits++;
      fi->fh = dir_handle(m, n->listing);
      fi->cache_readdir = 1;
      fi->keep_cache = 1;
      return (void)fuse_reply_open(req, fi);
    }
  }
  Call* c = call(req, OPENDIR, ino);
  c->has_fi = true;
  c->fi = *fi;
  if (with_path(req, c)) send(c);
}

void list_into(fuse_req_t req, Mount* m, fuse_ino_t ino, const std::shared_ptr<Listing>& listing, size_t size, off_t off, bool plus) {
  std::vector<char> buf(size);
  size_t used = 0;
  Node* dir = get(m, ino);
  // Attributes from a listing that is no longer the directory's current one are given without a timeout.
  bool current = dir && dir->listing == listing;
  for (size_t i = off; i < listing->names.size() + 2; i++) {
    struct stat st {};
    const char* name;
    if (i < 2) {
      name = i == 0 ? "." : "..";
      st.st_mode = S_IFDIR;
      st.st_ino = ino;
    } else {
      name = listing->names[i - 2].c_str();
      st = listing->attrs[i - 2];
    }
    size_t left = size - used;
    size_t need;
    if (plus) {
      struct fuse_entry_param e {};
      e.attr = st;
      // The size first: an entry that does not fit is not looked up (the kernel never gets it).
      if (fuse_add_direntry_plus(req, nullptr, 0, name, &e, i + 1) > left) break;
      if (i >= 2) {
        // A name with a node: the node's own attributes, if fresh; else none (node id 0: the kernel looks the
        // name up when it needs it). A name without: the listing's, which changes made here keep current.
        Node* n = child(m, ino, listing->names[i - 2]);
        if (n && !fresh(n)) {
          e.ino = 0;
        } else {
          if (!n) {
            n = bind(m, ino, listing->names[i - 2], st);
            remember(m, n, st, current);
          }
          fill_entry(m, n, &e, current ? m->ttl : 0);
          n->nlookup++;
        }
      }
      need = fuse_add_direntry_plus(req, buf.data() + used, left, name, &e, i + 1);
    } else {
      need = fuse_add_direntry(req, buf.data() + used, left, name, &st, i + 1);
      if (need > left) break;
    }
    used += need;
  }
  fuse_reply_buf(req, buf.data(), used);
}

// A listing from offset `off`: "." and ".." first, as on a disk. With `plus`, each entry (not "." or "..") counts
// as a lookup and carries its attributes. At offset 0 the directory's current listing is used when it changed
// since the handle was opened (the kernel keeps what is answered here as the directory's, for an hour); with no
// current one, or a handle this nasd did not open (a hand-over), the listing is asked of JS again.
static void list(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info* fi, bool plus) {
  Mount* m = mount_of(req);
  {
    std::lock_guard<std::mutex> lock(m->mu);
    Node* dir = get(m, ino);
    auto it = m->dirs.find(fi->fh);
    bool known = it != m->dirs.end();
    if (known && dir && off == 0 && dir->listing && it->second != dir->listing) it->second = dir->listing;
    // The root's listing is never cached: the handle's own, asked at opendir, is the current one.
    bool stale = !known || (off == 0 && ino != FUSE_ROOT_ID && (!dir || it->second != dir->listing));
    if (!stale) return list_into(req, m, ino, it->second, size, off, plus);
  }
  Call* c = call(req, OPENDIR, ino);
  c->has_fi = true;
  c->fi = *fi;
  c->relist = true;
  c->plus = plus;
  c->size = size;
  c->off = off;
  if (with_path(req, c)) send(c);
}

void ll_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info* fi) {
  list(req, ino, size, off, fi, false);
}
void ll_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info* fi) {
  list(req, ino, size, off, fi, true);
}

void ll_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  (void)ino;
  Mount* m = mount_of(req);
  {
    std::lock_guard<std::mutex> lock(m->mu);
    m->dirs.erase(fi->fh);
  }
  fuse_reply_err(req, 0);
}

void ll_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info* fi) {
  (void)datasync;
  (void)fi;
  Call* c = call(req, FSYNCDIR, ino);
  if (with_path(req, c)) send(c);
}

}  // namespace nas

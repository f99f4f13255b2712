// Open files on libfuse's worker threads: open and create (JS opens), reads of a file on disk answered here
// through the descriptor JS gave, writes (here within a grant, else JS), release and fsync (to JS).
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "grants.h"
#include "handlers.h"
#include "table.h"

namespace nas {

void ll_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  Call* c = call(req, OPEN, ino);
  c->has_fi = true;
  c->fi = *fi;
  c->flags = fi->flags;
  if (!with_path(req, c)) return;
  if ((fi->flags & O_ACCMODE) != O_RDONLY) {
    std::lock_guard<std::mutex> lock(c->m->mu);
    begin(get(c->m, ino));
    changing(c);
  }
  send(c);
}

void ll_create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, struct fuse_file_info* fi) {
  Call* c = call(req, CREATE, 0);
  c->mode = mode;
  c->flags = fi->flags;
  c->has_fi = true;
  c->fi = *fi;
  if (!in_dir(c, parent, name)) return;
  changing(c);
  send(c);
}

// A read of a file on disk JS gave the descriptor of: read here. The kernel sends no release while a read of the
// handle is under way, so the descriptor stays open until it returns.
static bool read_here(Mount* m, fuse_req_t req, size_t size, off_t off, uint64_t fh) {
  int fd;
  {
    std::lock_guard<std::mutex> lock(m->mu);
    auto it = m->files.find(fh);
    if (it == m->files.end()) return false;
    fd = it->second;
  }
  m->hits++;
  std::unique_ptr<char[]> buf(new char[size ? size : 1]);
  ssize_t n;
  do n = pread(fd, buf.get(), size, off); while (n < 0 && errno == EINTR);
  if (n < 0) return (void)fuse_reply_err(req, errno), true;
  fuse_reply_buf(req, buf.get(), static_cast<size_t>(n));
  return true;
}

void ll_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info* fi) {
  if (read_here(mount_of(req), req, size, off, fi->fh)) return;
  Call* c = call(req, READ, ino);
  c->has_fi = true;
  c->fi = *fi;
  c->size = size;
  c->off = off;
  send(c);
}

void ll_write(fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size, off_t off, struct fuse_file_info* fi) {
  if (write_here(mount_of(req), req, ino, buf, size, off, fi->fh)) return;
  Call* c = call(req, WRITE, ino);
  c->has_fi = true;
  c->fi = *fi;
  // The bytes live in the worker's buffer only until this returns: JS gets its own copy.
  c->data = static_cast<char*>(malloc(size ? size : 1));
  if (!c->data) {
    delete c;
    return (void)fuse_reply_err(req, ENOMEM);
  }
  memcpy(c->data, buf, size);
  c->size = size;
  c->off = off;
  {
    // The kernel keeps its own size and times of a file it writes; the cache's copy is stale from now on.
    std::lock_guard<std::mutex> lock(c->m->mu);
    if (Node* n = get(c->m, ino)) {
      begin(n);
      n->fresh_until = 0;
    }
  }
  changing(c);
  send(c);
}

// A handle open for writing: JS answers with the file's attributes as it leaves it (cached, unless it changed meanwhile).
void ll_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  {
    Mount* m = mount_of(req);
    std::lock_guard<std::mutex> lock(m->mu);
    if (auto it = m->files.find(fi->fh); it != m->files.end()) {
      close(it->second);
      m->files.erase(it);
    }
  }
  bool writing = (fi->flags & O_ACCMODE) != O_RDONLY;
  Call* c = call(req, RELEASE, ino);
  c->has_fi = true;
  c->fi = *fi;
  c->writing = writing;
  if (with_path(req, c)) send(c);
}
void ll_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info* fi) {
  Call* c = call(req, FSYNC, ino);
  c->has_fi = true;
  c->fi = *fi;
  c->datasync = datasync != 0;
  if (with_path(req, c)) send(c);
}

}  // namespace nas

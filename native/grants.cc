// Write grants: the writes of a file open for writing answered on the worker (pwrite on a duplicate of JS's
// descriptor), as JS would answer them: counted against the room reserved before they are written, an
// append-only file's floor kept, the node's cached attributes forgotten. JS settles a grant at fsync, sync,
// release, and before anything else touches the file (its own write, a truncate, a rename, a lease's end).
#include "grants.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>

#include "handlers.h"
#include "table.h"

namespace nas {

Grant::~Grant() {
  if (fd >= 0) close(fd);
}

bool grant_writes(Mount* m, uint64_t fh, int fd, const Grant& terms) {
  int dup = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (dup < 0) return false;
  auto g = std::make_shared<Grant>(terms);
  g->fd = dup;
  g->wrote = g->failed = false;
  std::lock_guard<std::mutex> lock(m->mu);
  m->grants[fh] = std::move(g);
  return true;
}

Settled settle_writes(Mount* m, uint64_t fh, bool revoke) {
  Settled s;
  std::shared_ptr<Grant> g;
  std::lock_guard<std::mutex> lock(m->mu);
  auto it = m->grants.find(fh);
  if (it == m->grants.end()) return s;
  g = it->second;
  s = Settled{true, g->size, g->floor, g->wrote, g->failed};
  g->wrote = g->failed = false;
  // A write under way keeps its own reference: the descriptor is closed when it is done.
  if (revoke) m->grants.erase(it);
  return s;
}

// Under the mutex: the grant a write may use, its place counted (before it is written, as JS counts), or null.
static std::shared_ptr<Grant> take_room(Mount* m, uint64_t fh, size_t size, off_t off) {
  auto it = m->grants.find(fh);
  if (it == m->grants.end()) return nullptr;
  std::shared_ptr<Grant> g = it->second;
  uint64_t at = g->append ? g->size : static_cast<uint64_t>(off);
  uint64_t end = at + size;
  if ((g->append_only && at < g->floor) || end > g->limit) return nullptr;
  g->size = std::max(g->size, end);
  if (g->append_only) g->floor = std::max(g->floor, end);
  g->wrote = true;
  return g;
}

bool write_here(Mount* m, fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size, off_t off, uint64_t fh) {
  std::shared_ptr<Grant> g;
  {
    std::lock_guard<std::mutex> lock(m->mu);
    if (!(g = take_room(m, fh, size, off))) return false;
    if (Node* n = get(m, ino)) begin(n), n->fresh_until = 0;
  }
  m->mutations++;
  // On an O_APPEND descriptor Linux's pwrite lands at the file's end, whatever `off` says.
  ssize_t n;
  do n = pwrite(g->fd, buf, size, off); while (n < 0 && errno == EINTR);
  int err = errno;
  {
    std::lock_guard<std::mutex> lock(m->mu);
    if (n < static_cast<ssize_t>(size)) g->failed = true;
    // What a request read about the file while this write ran is not kept.
    if (Node* node = get(m, ino)) begin(node), node->fresh_until = 0;
  }
  m->mutations++;
  m->written++;
  if (n < 0) fuse_reply_err(req, err);
  else fuse_reply_write(req, static_cast<size_t>(n));
  return true;
}

}  // namespace nas

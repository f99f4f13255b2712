// Write grants: the writes of a file open for writing answered on the worker (pwrite on a duplicate of JS's
// descriptor), as JS would answer them: counted against the room held before they are written, an append-only
// file's floor kept, the node's cached attributes forgotten. JS settles a grant at fsync, sync, release, and
// revokes it before anything else touches the file (its own write, a truncate, a rename, a lease's end).
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

bool grant_writes(Mount* m, uint64_t fh, int fd, const GrantTerms& terms) {
  {
    std::lock_guard<std::mutex> lock(m->mu);
    if (m->grants.count(fh)) return false;
  }
  int dup = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (dup < 0) return false;
  auto g = std::make_shared<Grant>(terms, dup);
  std::lock_guard<std::mutex> lock(m->mu);
  return m->grants.emplace(fh, std::move(g)).second;  // else the new grant (and its duplicate) goes
}

Settled settle_writes(Mount* m, uint64_t fh, bool revoke) {
  std::unique_lock<std::mutex> lock(m->mu);
  auto it = m->grants.find(fh);
  if (it == m->grants.end()) return Settled{};
  std::shared_ptr<Grant> g = it->second;
  if (revoke) {
    m->grants.erase(it);
    g->cv.wait(lock, [&] { return g->busy == 0; });
  }
  Settled s{true, g->terms.size, g->terms.floor, g->wrote, g->failed};
  g->wrote = g->failed = false;
  return s;
}

// Under the mutex: the grant a write may use, with its place counted before it is written (as JS counts), or null.
static std::shared_ptr<Grant> take_room(Mount* m, fuse_req_t req, uint64_t fh, size_t size, off_t off, uint64_t* at_out) {
  auto it = m->grants.find(fh);
  if (it == m->grants.end()) return nullptr;
  std::shared_ptr<Grant> g = it->second;
  GrantTerms& t = g->terms;
  uint64_t at = t.append ? t.size : static_cast<uint64_t>(off);
  if ((t.append_only && at < t.floor) || at + size > t.limit || fuse_req_ctx(req)->uid != t.uid) return nullptr;
  t.size = std::max(t.size, at + size);
  *at_out = at;
  g->wrote = true;
  g->busy++;
  return g;
}

// What a request read about the file while it was written is not kept (the mutex held).
static void forget_attributes(Mount* m, fuse_ino_t ino) {
  if (Node* node = get(m, ino)) {
    node->version++;
    node->fresh_until = 0;
  }
}

bool write_here(Mount* m, fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size, off_t off, uint64_t fh) {
  std::shared_ptr<Grant> g;
  uint64_t at = 0;
  {
    std::lock_guard<std::mutex> lock(m->mu);
    if (!(g = take_room(m, req, fh, size, off, &at))) return false;
    forget_attributes(m, ino);
  }
  // On an O_APPEND descriptor Linux's pwrite lands at the file's end, whatever `off` says.
  ssize_t done;
  do done = pwrite(g->fd, buf, size, off); while (done < 0 && errno == EINTR);
  int err = errno;
  {
    std::lock_guard<std::mutex> lock(m->mu);
    if (done < static_cast<ssize_t>(size)) g->failed = true;
    // An append-only file's floor rises by what was written, not by what was asked (a retry after ENOSPC).
    if (g->terms.append_only && done > 0) g->terms.floor = std::max(g->terms.floor, at + static_cast<uint64_t>(done));
    forget_attributes(m, ino);
    if (--g->busy == 0) g->cv.notify_all();
  }
  m->written++;
  if (done < 0) fuse_reply_err(req, err);
  else fuse_reply_write(req, static_cast<size_t>(done));
  return true;
}

}  // namespace nas

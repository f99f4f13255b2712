// Write grants (grants.cc): a file open for writing whose writes the binding answers itself, on the worker, within
// the room and the rules JS gave when it opened the file. JS learns what was written when it settles the grant.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <memory>

#include "nasfuse.h"

namespace nas {

// What JS allows a handle to write without asking: up to `limit` bytes from the file's start (the room the branch's
// quota holds for it), never below `floor` in an append-only file, and only for the account `uid` that opened it
// (another account's write through the same descriptor is JS's: it names its writer). `size`: the file's end.
struct GrantTerms {
  uint64_t size = 0, limit = 0, floor = 0;
  uint32_t uid = 0;
  bool append = false;       // opened with O_APPEND: every write lands at `size`
  bool append_only = false;  // an append-only file: a write below `floor` is JS's to refuse
};

// A grant in the mount's table. `fd` (a duplicate of JS's descriptor) and `cv` are set before it is published and
// not changed after; every other field is guarded by the mount's `mu`.
struct Grant {
  explicit Grant(const GrantTerms& t, int fd) : terms(t), fd(fd) {}
  ~Grant();
  Grant(const Grant&) = delete;
  Grant& operator=(const Grant&) = delete;

  GrantTerms terms;
  const int fd;
  std::condition_variable cv;  // told when `busy` drops to 0 (a revoke waits for the writes under way)
  unsigned busy = 0;           // writes past take_room whose pwrite has not returned
  bool wrote = false;          // written since JS last settled
  bool failed = false;         // a write failed or was short: JS counts the file again from its descriptor
};

// What settling told JS: the grant's state, and whether it was there.
struct Settled {
  bool found = false;
  uint64_t size = 0, floor = 0;
  bool wrote = false, failed = false;
};

// JS's thread: a grant for handle `fh`; false when it has one already or the descriptor cannot be duplicated.
bool grant_writes(Mount* m, uint64_t fh, int fd, const GrantTerms& terms);
// JS's thread: what was written through `fh` since the last settle; `revoke`: its writes go to JS from now on, and
// the writes under way are waited for (each a pwrite on nasd's own disk), so that nothing lands after.
Settled settle_writes(Mount* m, uint64_t fh, bool revoke);
// A worker: a write answered here, or false when it is JS's to answer (no grant, past the room, below the floor,
// another account).
bool write_here(Mount* m, fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size, off_t off, uint64_t fh);

}  // namespace nas

// Write grants (grants.cc): a file open for writing whose writes the binding answers itself, on the worker, within
// the room and the rules JS gave when it opened the file. JS learns what was written when it settles the grant.
#pragma once

#include <memory>

#include "nasfuse.h"

namespace nas {

// What JS allows a handle to write without asking: up to `limit` bytes from the file's start (the room the branch's
// quota reserved for it), never below `floor` in an append-only file. `size` is the file's end as written.
struct Grant {
  int fd = -1;  // a duplicate of JS's descriptor, closed when the last write holding the grant is done
  uint64_t size = 0, limit = 0, floor = 0;
  bool append = false;       // opened with O_APPEND: every write lands at `size`
  bool append_only = false;  // an append-only file: a write below `floor` is JS's to refuse
  bool wrote = false;        // written since JS last settled
  bool failed = false;       // a write failed or was short: JS counts the file again from its descriptor
  ~Grant();
};

// What settling told JS: the grant's state, and whether it was still there.
struct Settled {
  bool found = false;
  uint64_t size = 0, floor = 0;
  bool wrote = false, failed = false;
};

// JS's thread: a grant for handle `fh` (replacing one it had); false when the descriptor cannot be duplicated.
bool grant_writes(Mount* m, uint64_t fh, int fd, const Grant& terms);
// JS's thread: what was written through `fh` since the last settle; `revoke`: its writes go to JS from now on.
Settled settle_writes(Mount* m, uint64_t fh, bool revoke);
// A worker: a write answered here, or false when it is JS's to answer (no grant, past the room, below the floor).
bool write_here(Mount* m, fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size, off_t off, uint64_t fh);

}  // namespace nas

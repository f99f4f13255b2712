#pragma once
#include "nasfuse.h"

namespace nas {
// The handlers libfuse calls on its worker threads (ops.cc).
const struct fuse_lowlevel_ops* operations();
// Reply to a readdir(plus) from a listing (the mount's mutex held).
void list_into(fuse_req_t req, Mount* m, fuse_ino_t ino, const std::shared_ptr<Listing>& listing, size_t size, off_t off, bool plus);
}  // namespace nas

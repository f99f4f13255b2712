#pragma once
#include "nasfuse.h"

namespace nas {
// The handlers libfuse calls on its worker threads (ops.cc).
const struct fuse_lowlevel_ops* operations();
}  // namespace nas

// The protocol between the binding and JS, one row per request kind (as libfuse's fuse_ll_ops[] and go-fuse's
// opcode table keep one): what each request carries to JS, what its answer holds, and what the cache learns from it.
// src/fuse-ops/protocol.ts mirrors it; test/unit/protocol.test.ts reads this file and fails when they differ.
#pragma once

#include <cstddef>
#include <cstdint>

namespace nas {

// What a request carries to JS besides op, call, path and the caller (uid, gid, pid, umask): one bit per field,
// named in JS as FIELD_NAMES says (same order).
enum Field : uint32_t {
  F_FH = 1u << 0,        // the open handle (-1: none)
  F_VALID = 1u << 1,     // setattr: which of `set` apply (FUSE_SET_ATTR_*)
  F_SET = 1u << 2,       // setattr: SETATTR_WORDS doubles
  F_MODE = 1u << 3,
  F_RDEV = 1u << 4,
  F_FLAGS = 1u << 5,     // open's and create's flags, rename's RENAME_* flags
  F_TARGET = 1u << 6,    // symlink: what the link points to
  F_TO = 1u << 7,        // rename and link: the other path
  F_BUFFER = 1u << 8,    // read: where the bytes go; write: the bytes
  F_OFFSET = 1u << 9,
  F_WRITING = 1u << 10,  // release: of a handle open for writing
  F_DATASYNC = 1u << 11,
};
constexpr const char* FIELD_NAMES[] = {"fh", "valid", "set", "mode", "rdev", "flags", "target", "to", "buffer", "offset",
                                       "writing", "datasync"};
constexpr size_t FIELD_COUNT = sizeof FIELD_NAMES / sizeof FIELD_NAMES[0];

// What JS answers with (besides an errno), by kind; the fields each kind reads are in replies.cc.
enum Answer : uint8_t {
  A_NONE,      // nothing
  A_ENTRY,     // attr
  A_ATTR,      // attr
  A_TEXT,      // target
  A_MADE,      // attr, dirs: the new name's attributes and its directory's after the change
  A_CHANGED,   // dirs: the attributes of the directories a change of names was made in, after it
  A_OPENED,    // fh, keepCache, fd (a descriptor on disk the binding reads through, or -1)
  A_CREATED,   // fh, attr, dirs, fd
  A_COUNT,     // count: bytes read or written
  A_RELEASED,  // attr or null: a written file's attributes as its last close left them
  A_LISTING,   // names, attrs
  A_STATFS,    // stats: STATFS_WORDS doubles
  A_BYTES,     // bytes
};

// Attributes cross as 14 doubles: ino, mode, nlink, uid, gid, rdev, size, blocks, then seconds and nanoseconds of
// atime, mtime, ctime. setattr's values as 8: mode, uid, gid, size, atime (s, ns), mtime (s, ns). statfs's as 11:
// bsize, frsize, blocks, bfree, bavail, files, ffree, favail, fsid, flag, namemax.
constexpr size_t ATTR_WORDS = 14;
constexpr size_t SETATTR_WORDS = 8;
constexpr size_t STATFS_WORDS = 11;

// One row per request kind JS answers:
//   mutates:       its answer moves the mount's change count (a fill from JS that overlapped it is not cached)
//   changes_names: makes, removes or moves a name (refused, its directories' listings are asked again)
//   by_handle:     works without a path when given an open handle (a file unlinked while open)
#define NAS_OPS(X)                                                                          \
  /* op         code  name         mutates changes_names by_handle fields answer */        \
  X(LOOKUP,     1,  "lookup",     false, false, false, 0,                         A_ENTRY)    \
  X(GETATTR,    2,  "getattr",    false, false, true,  F_FH,                      A_ATTR)     \
  X(SETATTR,    3,  "setattr",    true,  false, true,  F_FH | F_VALID | F_SET,    A_ATTR)     \
  X(READLINK,   4,  "readlink",   false, false, false, 0,                         A_TEXT)     \
  X(MKNOD,      5,  "mknod",      true,  true,  false, F_MODE | F_RDEV,           A_MADE)     \
  X(MKDIR,      6,  "mkdir",      true,  true,  false, F_MODE,                    A_MADE)     \
  X(UNLINK,     7,  "unlink",     true,  true,  false, 0,                         A_CHANGED)  \
  X(RMDIR,      8,  "rmdir",      true,  true,  false, 0,                         A_CHANGED)  \
  X(SYMLINK,    9,  "symlink",    true,  true,  false, F_TARGET,                  A_MADE)     \
  X(RENAME,     10, "rename",     true,  true,  false, F_FLAGS | F_TO,            A_CHANGED)  \
  X(LINK,       11, "link",       true,  true,  false, F_TO,                      A_MADE)     \
  X(OPEN,       12, "open",       true,  false, false, F_FLAGS,                   A_OPENED)   \
  X(READ,       13, "read",       false, false, true,  F_FH | F_BUFFER | F_OFFSET, A_COUNT)   \
  X(WRITE,      14, "write",      false, false, true,  F_FH | F_BUFFER | F_OFFSET, A_COUNT)   \
  X(RELEASE,    15, "release",    false, false, true,  F_FH | F_WRITING,          A_RELEASED) \
  X(FSYNC,      16, "fsync",      false, false, true,  F_FH | F_DATASYNC,         A_NONE)     \
  X(OPENDIR,    17, "opendir",    false, false, false, 0,                         A_LISTING)  \
  X(FSYNCDIR,   18, "fsyncdir",   false, false, false, 0,                         A_NONE)     \
  X(STATFS,     19, "statfs",     false, false, false, 0,                         A_STATFS)   \
  X(CREATE,     20, "create",     true,  true,  false, F_MODE | F_FLAGS,          A_CREATED)  \
  X(GETXATTR,   21, "getxattr",   false, false, false, 0,                         A_BYTES)    \
  X(LISTXATTR,  22, "listxattr",  false, false, false, 0,                         A_BYTES)

enum Op : uint8_t {
#define NAS_OP_ENUM(op, code, name, mutates, changes_names, by_handle, fields, answer) op = code,
  NAS_OPS(NAS_OP_ENUM)
#undef NAS_OP_ENUM
};

struct OpRow {
  Op op;
  const char* name;
  bool mutates, changes_names, by_handle;
  uint32_t fields;
  Answer answer;
};

constexpr OpRow OP_ROWS[] = {
#define NAS_OP_ROW(op, code, name, mutates, changes_names, by_handle, fields, answer) \
  {op, name, mutates, changes_names, by_handle, fields, answer},
    NAS_OPS(NAS_OP_ROW)
#undef NAS_OP_ROW
};
constexpr size_t OP_COUNT = sizeof OP_ROWS / sizeof OP_ROWS[0];

// The row of an op (codes run 1..OP_COUNT without gaps: checked below).
constexpr const OpRow& row(Op op) { return OP_ROWS[op - 1]; }

constexpr bool codes_dense() {
  for (size_t i = 0; i < OP_COUNT; i++)
    if (OP_ROWS[i].op != i + 1) return false;
  return true;
}
static_assert(codes_dense(), "op codes run 1..OP_COUNT in table order");

}  // namespace nas

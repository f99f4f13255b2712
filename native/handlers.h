// What the low-level handlers share (ops.cc, files.cc, listings.cc): the mount a request is for, a Call for JS and its
// sending, the path of a node. (What the cache may answer, for whom: cache.h.)
#pragma once

#include <string>

#include "nasfuse.h"

namespace nas {

Mount* mount_of(fuse_req_t req);
// A request for JS about node `ino` (the caller, the versions it saw).
Call* call(fuse_req_t req, Op op, uint64_t ino);
void send(Call* c);
// A request about one node, sent to JS with its path; false (and an error reply) when the node is unknown.
bool with_path(fuse_req_t req, Call* c);
// A change begins: the versions of what it changes move (the mutex held); returns the version it leaves.
uint64_t begin(Node* n);
// A request that changes something: fills from JS that overlap it are not cached.
void changing(Call* c);
// A request about a name in a directory: its path resolved now; false (and ESTALE) when the directory is unknown.
bool in_dir(Call* c, uint64_t parent, const char* name);

void ll_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi);
void ll_create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, struct fuse_file_info* fi);
void ll_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info* fi);
void ll_write(fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size, off_t off, struct fuse_file_info* fi);
void ll_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi);
void ll_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info* fi);
void ll_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi);
void ll_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info* fi);
void ll_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info* fi);
void ll_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi);
void ll_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info* fi);

}  // namespace nas

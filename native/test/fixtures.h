// What the unit tests of the table and the cache build their mounts from: attributes as JS would give them and a
// lookup as a reply to LOOKUP makes it (bind, remember, one more lookup).
#pragma once

#include <sys/stat.h>

#include "../table.h"

namespace fixture {

inline struct stat attrs(uint64_t ino, mode_t type = S_IFREG, nlink_t nlink = 1, off_t size = 0, time_t ctime = 1) {
  struct stat st {};
  st.st_ino = ino;
  st.st_mode = type | 0644;
  st.st_nlink = nlink;
  st.st_size = size;
  st.st_ctim.tv_sec = ctime;
  return st;
}

inline struct stat dir(uint64_t ino) { return attrs(ino, S_IFDIR, 2); }

inline nas::Node* look(nas::Mount& m, uint64_t parent, const std::string& name, const struct stat& st) {
  nas::Node* n = nas::bind(&m, parent, name, st);
  nas::remember(&m, n, st, true);
  n->nlookup++;
  return n;
}

inline std::string path(nas::Mount& m, nas::Node* n) {
  std::string out;
  return nas::path_of(&m, n, out) ? out : std::string("(unreachable)");
}

constexpr uint64_t ROOT = FUSE_ROOT_ID;

}  // namespace fixture

#pragma once
#include <string>
#include <vector>

#include "nasfuse.h"
#include "table.h"

namespace nas {
// /dev/fuse read and written through handover.cc's hooks (after fuse_session_mount, or instead of it).
bool install_io(Mount* m, int fd);
// A successor's session: the kernel's INIT (as the first nasd read it) is replayed once, its reply dropped.
bool prepare_takeover(Mount* m, const std::vector<char>& init);
// Every request read has been answered (with reads paused: nothing more will be).
bool drained(Mount* m);
// sd_notify: a datagram to systemd's notify socket, with a descriptor for its store when fd >= 0.
int notify(const std::string& socket_path, const std::string& state, int fd);
}  // namespace nas

namespace nas {
// The node table as bytes for a successor (node ids stay 64-bit end to end, never a JS number), and back; false
// when the bytes are not such a table.
std::string pack_table(const std::vector<Exported>& nodes);
bool unpack_table(const char* bytes, size_t size, std::vector<Exported>& out);
}  // namespace nas

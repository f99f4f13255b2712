// Keeping the kernel connection across a restart. Every mount reads and writes /dev/fuse through these hooks:
// they keep the kernel's INIT (a successor replays it to its own libfuse: the kernel sends INIT once per
// connection), count requests read but not yet answered, and stop reading when asked, so a stopping nasd
// answers everything it took and leaves the rest queued in the kernel for the next one.
#include "handover.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/uio.h>
#include <unistd.h>

#include "table.h"

namespace nas {

// The unique id of the replayed INIT: the kernel's own ids are even, so its reply is told apart and dropped.
constexpr uint64_t REPLAYED_INIT = 1;

static ssize_t io_read(int fd, void* buf, size_t len, void* userdata) {
  Mount* m = static_cast<Mount*>(userdata);
  if (m->replay_init.exchange(false)) {
    memcpy(buf, m->init_request.data(), m->init_request.size());
    return static_cast<ssize_t>(m->init_request.size());
  }
  for (;;) {
    if (fuse_session_exited(m->se)) {
      errno = ENODEV;  // the loop ends
      return -1;
    }
    // A successor reads nothing until its libfuse has taken the replayed INIT: before that it answers EIO.
    if (m->takeover && !m->init_replayed.load()) {
      usleep(1000);
      continue;
    }
    struct pollfd p = {fd, POLLIN, 0};
    int ready = poll(&p, 1, 200);
    if (ready < 0 && errno != EINTR) return -1;
    if (ready <= 0) continue;
    // Counted before the pause is looked at: a stop that sees zero after pausing cannot miss a request being read.
    m->inflight++;
    if (m->paused.load()) {
      m->inflight--;
      usleep(5000);
      continue;
    }
    ssize_t n = read(fd, buf, len);
    if (n < 0) {
      int err = errno;
      m->inflight--;
      if (err == EAGAIN || err == EINTR) continue;  // another thread took it
      errno = err;
      return -1;
    }
    auto* in = static_cast<const struct fuse_in_header*>(buf);
    if (n >= static_cast<ssize_t>(sizeof *in)) {
      // These get no reply.
      if (in->opcode == FUSE_FORGET || in->opcode == FUSE_BATCH_FORGET || in->opcode == FUSE_INTERRUPT) m->inflight--;
      if (in->opcode == FUSE_INIT && m->init_request.empty()) {
        m->init_request.assign(static_cast<char*>(buf), static_cast<char*>(buf) + n);
      }
    }
    return n;
  }
}

static ssize_t io_writev(int fd, struct iovec* iov, int count, void* userdata) {
  Mount* m = static_cast<Mount*>(userdata);
  auto* out = static_cast<const struct fuse_out_header*>(iov[0].iov_base);
  if (out->unique == REPLAYED_INIT && m->takeover) {
    ssize_t total = 0;
    for (int i = 0; i < count; i++) total += iov[i].iov_len;
    m->init_replayed = true;
    return total;  // the kernel was answered by the nasd that mounted
  }
  ssize_t n = writev(fd, iov, count);
  // A reply to a request read (unique 0: a notification; odd: libfuse answering an INTERRUPT, itself uncounted).
  if (out->unique != 0 && (out->unique & 1) == 0) m->inflight--;
  return n;
}

bool install_io(Mount* m, int fd) {
  static const struct fuse_custom_io io = {io_writev, io_read, nullptr, nullptr};
  // Reads poll first and never block: a thread waits in poll, where a stop can find it idle.
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fuse_session_custom_io(m->se, &io, fd) == 0;
}

bool prepare_takeover(Mount* m, const std::vector<char>& init) {
  if (init.size() < sizeof(struct fuse_in_header) + sizeof(struct fuse_init_in)) return false;
  m->init_request = init;
  auto* in = reinterpret_cast<struct fuse_in_header*>(m->init_request.data());
  if (in->opcode != FUSE_INIT) return false;
  in->unique = REPLAYED_INIT;
  m->takeover = true;
  m->replay_init = true;
  return true;
}

bool drained(Mount* m) { return m->inflight.load() <= 0; }

int notify(const std::string& socket_path, const std::string& state, int fd) {
  if (socket_path.empty() || socket_path.size() >= sizeof(sockaddr_un::sun_path)) return -EINVAL;
  int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return -errno;
  struct sockaddr_un addr {};
  addr.sun_family = AF_UNIX;
  memcpy(addr.sun_path, socket_path.data(), socket_path.size());
  if (addr.sun_path[0] == '@') addr.sun_path[0] = '\0';  // an abstract socket
  socklen_t alen = offsetof(struct sockaddr_un, sun_path) + socket_path.size();
  struct iovec iov = {const_cast<char*>(state.data()), state.size()};
  struct msghdr msg {};
  msg.msg_name = &addr;
  msg.msg_namelen = alen;
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  char control[CMSG_SPACE(sizeof(int))] = {};
  if (fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  int rc = sendmsg(s, &msg, MSG_NOSIGNAL) < 0 ? -errno : 0;
  close(s);
  return rc;
}

}  // namespace nas

namespace nas {

// The table's bytes: "nasT", a format version, then per node its id, lookup count and name count, and per name
// its parent and the name's length and bytes; numbers little-endian 64-bit (lengths 32-bit) as this machine writes them.
constexpr char TABLE_MAGIC[4] = {'n', 'a', 's', 'T'};
constexpr uint32_t TABLE_VERSION = 1;

template <typename T>
static void put(std::string& out, T v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }

template <typename T>
static bool take(const char*& p, const char* end, T* v) {
  if (static_cast<size_t>(end - p) < sizeof *v) return false;
  memcpy(v, p, sizeof *v);
  p += sizeof *v;
  return true;
}

std::string pack_table(const std::vector<Exported>& nodes) {
  std::string out(TABLE_MAGIC, sizeof TABLE_MAGIC);
  put(out, TABLE_VERSION);
  for (const Exported& n : nodes) {
    put(out, n.id);
    put(out, n.nlookup);
    put(out, static_cast<uint32_t>(n.names.size()));
    for (const auto& [parent, name] : n.names) {
      put(out, parent);
      put(out, static_cast<uint32_t>(name.size()));
      out += name;
    }
  }
  return out;
}

bool unpack_table(const char* bytes, size_t size, std::vector<Exported>& out) {
  const char* p = bytes;
  const char* end = bytes + size;
  uint32_t version = 0;
  if (size < sizeof TABLE_MAGIC || memcmp(p, TABLE_MAGIC, sizeof TABLE_MAGIC) != 0) return false;
  p += sizeof TABLE_MAGIC;
  if (!take(p, end, &version) || version != TABLE_VERSION) return false;
  while (p < end) {
    Exported n;
    uint32_t names = 0;
    if (!take(p, end, &n.id) || !take(p, end, &n.nlookup) || !take(p, end, &names)) return false;
    for (uint32_t k = 0; k < names; k++) {
      uint64_t parent = 0;
      uint32_t len = 0;
      if (!take(p, end, &parent) || !take(p, end, &len) || static_cast<size_t>(end - p) < len) return false;
      n.names.emplace_back(parent, std::string(p, len));
      p += len;
    }
    out.push_back(std::move(n));
  }
  return true;
}

}  // namespace nas

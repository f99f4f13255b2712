// The pieces of the binding shared by its files: a mount, its node table, and the requests that go to JS.
#pragma once
#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <node_api.h>
#include <sys/stat.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "protocol.h"

namespace nas {

// Node ids at or above this are the binding's own: given when a view's inode number is taken by another node.
constexpr uint64_t PRIVATE_IDS = 1ull << 62;
// Nodes the kernel forgot stay known (names, attributes) up to this many: a file handle (NFS export,
// open_by_handle_at) names a node by id long after the kernel dropped it, and the id still finds its path.
constexpr size_t FORGOTTEN_KEPT = 65536;
// The root's attributes never change and never expire in the kernel: while nasd restarts no one answers, and
// systemd stats the mount point as it starts the next one (ReadWritePaths=). Its listing is never cached.
constexpr double ROOT_TTL = 10.0 * 365 * 24 * 3600;
// Inode numbers of paths served from git (cow/attr.ts gitIno): bit 52 set. A copy-up gives the path a disk's.
constexpr uint64_t GIT_INOS = 1ull << 52;

// A directory's listing as JS gave it, with each entry's attributes: opendir, readdir(plus) and lookups of its
// names are answered from it until something changes the directory.
struct Listing {
  std::vector<std::string> names;
  std::vector<struct stat> attrs;
  std::unordered_map<std::string, size_t> index;
};

// One node the kernel knows (its lookup count is above zero), or knew (kept while FORGOTTEN_KEPT allows), named
// by one or more (parent, name) pairs.
struct Node {
  uint64_t id = 0;
  uint64_t nlookup = 0;
  std::vector<std::pair<uint64_t, std::string>> names;  // the first one builds the path
  bool known = false;        // st holds the last attributes JS gave
  struct stat st {};
  double fresh_until = 0;    // st may be served without JS until then (monotonic seconds)
  std::shared_ptr<Listing> listing;
  // Moves with every change of this node by a request (a directory's: of its names too), at its start and its
  // end: what JS read about the node is cached only if its version stayed the same meanwhile.
  uint64_t version = 0;
  uint32_t writers = 0;      // handles open for writing: its size and times move, nothing of it is cached
};

struct Inval {
  enum Kind { INODE, EXPIRE, BARRIER } kind;
  uint64_t ino = 0;
  std::string name;
  off_t off = 0;
  double barrier = 0;
};

// One mounted filesystem (or one taken over from an earlier nasd). Four kinds of thread use it: libfuse's workers
// (the requests), the notifier (invalidate.cc), the JS thread (addon.cc, replies.cc) and libuv's pool (unmount,
// suspend). Its parts say what keeps each field safe:
//
//   Settings      written once by mount() before any thread starts; read by all without a lock.
//   NodeTable, OpenHandles, RunAccess, and every Node and Listing they hold: guarded by `mu`.
//   Counters      atomics, moved and read without a lock.
//   Notifier      the invalidation queue, guarded by `qmu`; `initialized` an atomic.
//   SessionEnd    `ended`, guarded by `endmu`; the loop's thread handle is the JS thread's.
//   Handover      atomics, and the INIT, written once before it is read (handover.cc says how).
//
// Lock order: mu, then qmu (a change queues invalidations while it holds the table). endmu is taken alone. No lock
// is held while calling JS, and the notifier holds none while it tells the kernel: an invalidation can wait for a
// request whose worker needs mu. (A reply, fuse_reply_*, never waits: a worker may send one holding mu.)
struct Settings {
  fuse_session* se = nullptr;
  std::string mountpoint;
  int fd = -1;
  napi_threadsafe_function requests = nullptr;  // a request for JS
  napi_threadsafe_function barriers = nullptr;  // an invalidation batch was sent
  double ttl = 3600;
  bool private_ids = false;  // tests: every node gets a private id (they otherwise come from inode-number collisions)
};

// The nodes the kernel holds or held (table.cc), by id and by (parent, name). Made with the root in it.
struct NodeTable {
  NodeTable();
  std::unordered_map<uint64_t, std::unique_ptr<Node>> nodes;
  std::unordered_map<std::string, uint64_t> dentries;  // key(parent, name) -> node id
  uint64_t next_private = PRIVATE_IDS;
  std::deque<uint64_t> forgotten;  // oldest first; an id may be there again if its node came back
};

struct Grant;

struct OpenHandles {
  // Open directories by handle number (never a pointer: a successor gets handles it did not make).
  std::unordered_map<uint64_t, std::shared_ptr<Listing>> dirs;
  uint64_t next_dir = 1;
  // Open files JS gave a descriptor of (a file on disk, by handle number): their reads are answered here, on
  // the worker, from a duplicate of that descriptor (closed at release).
  std::unordered_map<uint64_t, int> files;
  // Files open for writing whose writes are answered here, within what JS granted (grants.h).
  std::unordered_map<uint64_t, std::shared_ptr<Grant>> grants;
};

struct RunAccess {
  // Run namespaces (readlink of /proc/<pid>/ns/pid) and the top-level names their processes may reach; a
  // request from one is answered from the cache only inside those names (else JS refuses it).
  std::map<std::string, std::set<std::string>> restricted;
  // Top-level names (branch views) whose nodes may have an access ACL: their ACLs are asked of JS, every other
  // node's answered here (none).
  std::set<std::string> shared;
};

struct Counters {
  // Changes made by requests (mutations) and by nasd on its own (invalidations): a fill from JS whose request
  // saw either move is not cached, and one that saw an invalidation is given to the kernel with no timeout.
  std::atomic<uint64_t> mutations{0};
  std::atomic<uint64_t> invalidations{0};
  std::atomic<uint64_t> hits{0}, misses{0};
  std::atomic<uint64_t> written{0};  // writes answered here (grants.cc)
};

struct Notifier {
  std::thread notifier;  // started and joined by mount() and unmount, never by the thread itself
  std::mutex qmu;
  std::condition_variable qcv;
  std::deque<Inval> queue;  // qmu
  bool qstop = false;       // qmu
  // The kernel's INIT was answered (set by the INIT handler on a worker): before it there is nothing to tell.
  std::atomic<bool> initialized{false};
};

struct SessionEnd {
  std::thread loop;  // the session loop; joined or detached by the JS thread at unmount
  std::mutex endmu;
  std::condition_variable endcv;
  bool ended = false;  // endmu: the session loop returned
};

// The connection's hand-over (handover.cc): the kernel's INIT as read (written once: by mount() on a successor,
// else by the worker that reads the INIT, before any other request is read; suspend reads it after a drain),
// whether this session took the connection over from an earlier nasd (and replays that INIT once), requests
// read but not answered, and whether reading is paused for a stop that hands the connection on.
struct Handover {
  std::vector<char> init_request;
  bool takeover = false;  // a Setting: written before the loop starts
  std::atomic<bool> replay_init{false};
  std::atomic<int64_t> inflight{0};
  std::atomic<bool> paused{false};
  std::atomic<bool> init_replayed{false};  // a successor reads nothing before its replayed INIT was answered
};

// The parts are bases, not members: each field reads as m->field wherever it is used, and its part says its lock.
struct Mount : Settings, NodeTable, OpenHandles, RunAccess, Counters, Notifier, SessionEnd, Handover {
  // Guards NodeTable, OpenHandles, RunAccess and every Node and Listing in them.
  std::mutex mu;
};

// A request on its way to JS and back. JS names it by `id` (calls.cc keeps the ones it was given), never by address.
struct Call {
  Mount* m;
  fuse_req_t req;
  Op op;
  uint32_t id = 0;
  uint64_t ino = 0, parent = 0, parent2 = 0;
  std::string name, name2, path, path2, text;
  // The request's fields (protocol.h says which op carries which): path2 is `to`, text is `target`.
  uint32_t mode = 0;
  uint64_t rdev = 0;
  int flags = 0;
  bool datasync = false;
  bool has_fi = false;
  struct fuse_file_info fi {};
  int valid = 0;
  struct stat set {};
  char* data = nullptr;  // a write's bytes (freed with the JS buffer), or where a read's go
  size_t size = 0;
  off_t off = 0;
  napi_ref buffer = nullptr;
  uint64_t mutations = 0, invalidations = 0;
  // The versions of the node (ino, or the name looked up), and of the directories a change is made in, as the
  // request saw them; `writing`: a release of a handle open for writing.
  uint64_t version = 0, dir_version = 0, dir_version2 = 0;
  bool writing = false;
  struct fuse_ctx ctx {};
  // A readdir whose handle's listing is gone or stale: the listing is asked again (as OPENDIR), then listed.
  bool relist = false;
  bool plus = false;
};

std::string dentry_key(uint64_t parent, const std::string& name);
double now();

}  // namespace nas

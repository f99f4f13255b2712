// What JS calls: mount, reply, invalidate, restrict, share, unmount, stats, fd, lutimens, pidNamespaces, becomeSubreaper, reapChild (src/fuse-ops/native.ts).
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/openat2.h>
#include <sys/syscall.h>

#include "handover.h"
#include "invalidate.h"
#include "ops.h"
#include "pidns.h"
#include "replies.h"
#include "table.h"

namespace nas {

static napi_value fail(napi_env env, const std::string& message, const char* code = nullptr) {
  napi_throw_error(env, code, message.c_str());
  return nullptr;
}

static std::string text(napi_env env, napi_value v) {
  size_t len = 0;
  if (napi_get_value_string_utf8(env, v, nullptr, 0, &len) != napi_ok) return std::string();
  std::string out(len, '\0');
  napi_get_value_string_utf8(env, v, out.data(), len + 1, &len);
  return out;
}

static double number(napi_env env, napi_value v, double fallback = 0) {
  double out;
  return napi_get_value_double(env, v, &out) == napi_ok ? out : fallback;
}

static napi_value property(napi_env env, napi_value object, const char* name) {
  napi_value out = nullptr;
  napi_get_named_property(env, object, name, &out);
  return out;
}

static Mount* mount_arg(napi_env env, napi_value v) {
  void* data = nullptr;
  napi_get_value_external(env, v, &data);
  return static_cast<Mount*>(data);
}

static void barrier_done(napi_env env, napi_value callback, void*, void* data) {
  if (!env) return;
  napi_value id, global, result;
  napi_create_double(env, static_cast<double>(reinterpret_cast<uintptr_t>(data)), &id);
  napi_get_global(env, &global);
  napi_call_function(env, global, callback, 1, &id, &result);
}

static void serve(Mount* m, unsigned threads) {
  struct fuse_loop_config* cfg = fuse_loop_cfg_create();
  fuse_loop_cfg_set_max_threads(cfg, threads);
  fuse_loop_cfg_set_idle_threads(cfg, threads);
  fuse_session_loop_mt(m->se, cfg);
  fuse_loop_cfg_destroy(cfg);
  {
    // No more reads come: the descriptors read through go (JS closes its own).
    std::lock_guard<std::mutex> lock(m->mu);
    for (auto& [fh, fd] : m->files) close(fd);
    m->files.clear();
  }
  std::lock_guard<std::mutex> lock(m->endmu);
  m->ended = true;
  m->endcv.notify_all();
}

// The node table as a flat array: id, lookup count, number of names, then parent and name for each.
static napi_value export_nodes(napi_env env, Mount* m) {
  napi_value out;
  napi_create_array(env, &out);
  uint32_t i = 0;
  auto push = [&](napi_value v) { napi_set_element(env, out, i++, v); };
  auto num = [&](double d) { napi_value v; napi_create_double(env, d, &v); push(v); };
  std::lock_guard<std::mutex> lock(m->mu);
  for (auto& [id, n] : m->nodes) {
    num(static_cast<double>(id));
    num(static_cast<double>(n->nlookup));
    num(static_cast<double>(n->names.size()));
    for (auto& [parent, name] : n->names) {
      num(static_cast<double>(parent));
      napi_value v;
      napi_create_string_utf8(env, name.data(), name.size(), &v);
      push(v);
    }
  }
  return out;
}

static void import_nodes(napi_env env, Mount* m, napi_value array) {
  uint32_t len = 0;
  if (napi_get_array_length(env, array, &len) != napi_ok) return;
  auto at = [&](uint32_t i) { napi_value v; napi_get_element(env, array, i, &v); return v; };
  for (uint32_t i = 0; i + 3 <= len;) {
    uint64_t id = static_cast<uint64_t>(number(env, at(i)));
    uint64_t nlookup = static_cast<uint64_t>(number(env, at(i + 1)));
    uint32_t names = static_cast<uint32_t>(number(env, at(i + 2)));
    i += 3;
    if (id == FUSE_ROOT_ID) {  // the root is made at mount; its lookup count is the kernel's own
      i += 2 * names;
      continue;
    }
    Node* n = m->nodes.count(id) ? m->nodes[id] : new Node();
    n->id = id;
    n->nlookup = nlookup;
    m->nodes[id] = n;
    for (uint32_t k = 0; k < names && i + 2 <= len; k++, i += 2) {
      uint64_t parent = static_cast<uint64_t>(number(env, at(i)));
      std::string name = text(env, at(i + 1));
      n->names.emplace_back(parent, name);
      m->dentries[dentry_key(parent, name)] = id;
    }
    if (id >= m->next_private && id >= PRIVATE_IDS) m->next_private = id + 1;
    if (nlookup == 0) m->forgotten.push_back(id);
  }
}

static std::set<std::string> strings(napi_env env, napi_value array, bool* present) {
  std::set<std::string> out;
  bool is = false;
  napi_is_array(env, array, &is);
  *present = is;
  uint32_t n = 0;
  if (is) napi_get_array_length(env, array, &n);
  for (uint32_t i = 0; i < n; i++) {
    napi_value item;
    napi_get_element(env, array, i, &item);
    out.insert(text(env, item));
  }
  return out;
}

// mount({ mountpoint, options, ttl, threads, shared?, fd?, init?, nodes? }, dispatch, barrierDone) -> a mount. With `fd`
// (a kernel connection an earlier nasd handed on), `init` (the INIT it read) and `nodes` (its node table), the
// connection is taken over instead of mounted. The calling process must not touch the mount synchronously
// (its JS thread answers it).
static napi_value js_mount(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  if (argc < 3) return fail(env, "mount(options, dispatch, barrierDone)");
  Mount* m = new Mount();
  m->mountpoint = text(env, property(env, argv[0], "mountpoint"));
  std::string options = text(env, property(env, argv[0], "options"));
  m->ttl = number(env, property(env, argv[0], "ttl"), 3600);
  // The views whose nodes have ACLs, known before the first request (share() changes them later).
  bool listed;
  m->shared = strings(env, property(env, argv[0], "shared"), &listed);
  unsigned threads = static_cast<unsigned>(number(env, property(env, argv[0], "threads"), 8));

  napi_value name;
  napi_create_string_utf8(env, "nasfuse", NAPI_AUTO_LENGTH, &name);
  napi_create_threadsafe_function(env, argv[1], nullptr, name, 0, 1, nullptr, nullptr, nullptr, deliver, &m->requests);
  napi_create_threadsafe_function(env, argv[2], nullptr, name, 0, 1, nullptr, nullptr, nullptr, barrier_done, &m->barriers);

  int inherited = static_cast<int>(number(env, property(env, argv[0], "fd"), -1));
  std::vector<char> init;
  if (inherited >= 0) {
    void* bytes = nullptr;
    size_t len = 0;
    if (napi_get_buffer_info(env, property(env, argv[0], "init"), &bytes, &len) == napi_ok && bytes)
      init.assign(static_cast<char*>(bytes), static_cast<char*>(bytes) + len);
  }
  const char* args[] = {"nasd", "-o", options.c_str()};
  struct fuse_args fargs = FUSE_ARGS_INIT(options.empty() ? 1 : 3, const_cast<char**>(args));
  m->se = fuse_session_new(&fargs, operations(), sizeof(struct fuse_lowlevel_ops), m);
  bool ready = m->se && (inherited >= 0 ? prepare_takeover(m, init) && install_io(m, inherited)
                                        : fuse_session_mount(m->se, m->mountpoint.c_str()) == 0 &&
                                              install_io(m, fuse_session_fd(m->se)));
  if (!ready) {
    if (m->se) fuse_session_destroy(m->se);
    napi_release_threadsafe_function(m->requests, napi_tsfn_abort);
    napi_release_threadsafe_function(m->barriers, napi_tsfn_abort);
    std::string where = m->mountpoint;
    delete m;
    return fail(env, inherited >= 0 ? "cannot take over the kernel connection of " + where
                                     : "cannot mount " + where + " (libfuse said why above)", "EMOUNT");
  }
  m->fd = fuse_session_fd(m->se);
  if (inherited >= 0) import_nodes(env, m, property(env, argv[0], "nodes"));
  // The kernel connection is nasd's alone: git and every other child nasd starts must not inherit it.
  fcntl(m->fd, F_SETFD, fcntl(m->fd, F_GETFD) | FD_CLOEXEC);
  Node* root = new Node();
  root->id = FUSE_ROOT_ID;
  root->nlookup = 1;
  m->nodes[FUSE_ROOT_ID] = root;
  start_notifier(m);
  m->loop = std::thread(serve, m, threads);
  napi_value out;
  napi_create_external(env, m, nullptr, nullptr, &out);
  return out;
}

// reply(call, result, value, extra, flag, fd)
static napi_value js_reply(napi_env env, napi_callback_info info) {
  size_t argc = 6;
  napi_value argv[6];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  Call* c = reinterpret_cast<Call*>(static_cast<uintptr_t>(number(env, argv[0])));
  if (!c) return fail(env, "reply: no call");
  finish(env, c, number(env, argv[1]), argc > 2 ? argv[2] : nullptr, argc > 3 ? argv[3] : nullptr,
         argc > 4 ? static_cast<int>(number(env, argv[4])) : 0, argc > 5 ? static_cast<int>(number(env, argv[5])) : -1);
  return nullptr;
}

// groups(call) -> the caller's supplementary groups (fuse_req_getgroups reads them from /proc: asked only when
// a handler wants them, while its request is unanswered).
static napi_value js_groups(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], out;
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  Call* c = reinterpret_cast<Call*>(static_cast<uintptr_t>(number(env, argv[0])));
  napi_create_array(env, &out);
  if (!c) return out;
  gid_t list[256];
  int n = fuse_req_getgroups(c->req, 256, list);
  for (int i = 0; i < n && i < 256; i++) {
    napi_value v;
    napi_create_uint32(env, list[i], &v);
    napi_set_element(env, out, i, v);
  }
  return out;
}

// invalidate(mount, roles | null, barrierId): every view of these Homes; null is everything.
static napi_value js_invalidate(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  Mount* m = mount_arg(env, argv[0]);
  if (!m) return fail(env, "invalidate: not a mount");
  bool listed;
  auto names = strings(env, argv[1], &listed);
  invalidate_names(m, names, !listed, number(env, argv[2]));
  return nullptr;
}

// restrict(mount, pidNamespace, allowedTopLevelNames | null): null lifts it.
static napi_value js_restrict(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  Mount* m = mount_arg(env, argv[0]);
  if (!m) return fail(env, "restrict: not a mount");
  bool listed;
  auto names = strings(env, argv[2], &listed);
  std::lock_guard<std::mutex> lock(m->mu);
  if (listed) m->restricted[text(env, argv[1])] = names;
  else m->restricted.erase(text(env, argv[1]));
  return nullptr;
}

// share(mount, names): the views whose nodes may have an access ACL (the others have none, answered natively).
static napi_value js_share(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  Mount* m = mount_arg(env, argv[0]);
  if (!m) return fail(env, "share: not a mount");
  bool listed;
  auto names = strings(env, argv[1], &listed);
  std::lock_guard<std::mutex> lock(m->mu);
  m->shared = listed ? names : std::set<std::string>();
  return nullptr;
}

static napi_value js_stats(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], out;
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  Mount* m = mount_arg(env, argv[0]);
  if (!m) return fail(env, "stats: not a mount");
  size_t nodes;
  {
    std::lock_guard<std::mutex> lock(m->mu);
    nodes = m->nodes.size();
  }
  napi_create_object(env, &out);
  napi_value v;
  napi_create_double(env, static_cast<double>(m->hits.load()), &v);
  napi_set_named_property(env, out, "hits", v);
  napi_create_double(env, static_cast<double>(m->misses.load()), &v);
  napi_set_named_property(env, out, "misses", v);
  napi_create_double(env, static_cast<double>(nodes), &v);
  napi_set_named_property(env, out, "nodes", v);
  return out;
}

// Run `job` on libuv's thread pool and give JS a promise its completion settles (Job has m, work, deferred).
template <typename Job>
static napi_value on_thread_pool(napi_env env, const char* name, Job* job, napi_async_execute_callback execute,
                                 napi_async_complete_callback complete) {
  napi_value promise, label;
  napi_create_promise(env, &job->deferred, &promise);
  napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &label);
  napi_create_async_work(env, nullptr, label, execute, complete, job, &job->work);
  napi_queue_async_work(env, job->work);
  return promise;
}

struct Unmounting {
  Mount* m;
  napi_async_work work;
  napi_deferred deferred;
  bool ended;
};

static void unmount_execute(napi_env, void* data) {
  auto* u = static_cast<Unmounting*>(data);
  Mount* m = u->m;
  fuse_session_exit(m->se);
  fuse_session_unmount(m->se);
  // The loop ends when the kernel lets go of the connection; a file still open in the detached mount keeps it.
  {
    std::unique_lock<std::mutex> lock(m->endmu);
    u->ended = m->endcv.wait_for(lock, std::chrono::seconds(3), [m] { return m->ended; });
  }
  // Here, not on the JS thread: an invalidation in progress may wait for a request only JS answers.
  stop_notifier(m);
}

static void unmount_complete(napi_env env, napi_status, void* data) {
  auto* u = static_cast<Unmounting*>(data);
  Mount* m = u->m;
  // The session is not destroyed: a worker still in libfuse (a mount detached but held open) would use it;
  // nasd exits after an unmount. Requests still queued for JS are answered EIO by deliver.
  if (u->ended) {
    m->loop.join();
    napi_release_threadsafe_function(m->requests, napi_tsfn_release);
    napi_release_threadsafe_function(m->barriers, napi_tsfn_release);
  } else {
    m->loop.detach();
  }
  napi_value undefined;
  napi_get_undefined(env, &undefined);
  napi_resolve_deferred(env, u->deferred, undefined);
  napi_delete_async_work(env, u->work);
  delete u;
}

// unmount(mount) -> Promise<void>
static napi_value js_unmount(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  Mount* m = mount_arg(env, argv[0]);
  if (!m) return fail(env, "unmount: not a mount");
  return on_thread_pool(env, "nasfuse-unmount", new Unmounting{m, nullptr, nullptr, false}, unmount_execute, unmount_complete);
}

struct Suspending {
  Mount* m;
  napi_async_work work;
  napi_deferred deferred;
  bool drained;
};

static void suspend_execute(napi_env, void* data) {
  auto* s = static_cast<Suspending*>(data);
  s->m->paused = true;
  for (int i = 0; i < 6000 && !(s->drained = drained(s->m)); i++) usleep(5000);
}

static void suspend_complete(napi_env env, napi_status, void* data) {
  auto* s = static_cast<Suspending*>(data);
  Mount* m = s->m;
  napi_value out, v;
  napi_create_object(env, &out);
  void* bytes;
  napi_create_buffer_copy(env, m->init_request.size(), m->init_request.data(), &bytes, &v);
  napi_set_named_property(env, out, "init", v);
  napi_set_named_property(env, out, "nodes", export_nodes(env, m));
  napi_get_boolean(env, s->drained, &v);
  napi_set_named_property(env, out, "drained", v);
  napi_resolve_deferred(env, s->deferred, out);
  napi_delete_async_work(env, s->work);
  delete s;
}

// suspend(mount) -> Promise<{ init, nodes, drained }>: stop reading requests, wait until every request read
// was answered (JS keeps answering meanwhile), and give what a successor needs to take the connection over.
static napi_value js_suspend(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  Mount* m = mount_arg(env, argv[0]);
  if (!m) return fail(env, "suspend: not a mount");
  return on_thread_pool(env, "nasfuse-suspend", new Suspending{m, nullptr, nullptr, false}, suspend_execute, suspend_complete);
}

// notify(socket, state, fd) -> 0 or -errno: sd_notify, with a descriptor for systemd's store when fd >= 0.
static napi_value js_notify(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3], out;
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  int rc = notify(text(env, argv[0]), text(env, argv[1]), argc > 2 ? static_cast<int>(number(env, argv[2], -1)) : -1);
  napi_create_int32(env, rc, &out);
  return out;
}

static napi_value js_fd(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], out;
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  Mount* m = mount_arg(env, argv[0]);
  napi_create_int32(env, m ? m->fd : -1, &out);
  return out;
}

// A time for lutimens: a bigint of nanoseconds since the epoch, 'now' or 'omit'.
static bool timespec_of(napi_env env, napi_value v, struct timespec* ts) {
  napi_valuetype type;
  napi_typeof(env, v, &type);
  if (type == napi_string) {
    std::string s = text(env, v);
    if (s == "now") ts->tv_nsec = UTIME_NOW;
    else if (s == "omit") ts->tv_nsec = UTIME_OMIT;
    else return false;
    ts->tv_sec = 0;
    return true;
  }
  if (type != napi_bigint) return false;
  int64_t ns;
  bool lossless;
  napi_get_value_bigint_int64(env, v, &ns, &lossless);
  ts->tv_sec = ns / 1000000000;
  ts->tv_nsec = ns % 1000000000;
  if (ts->tv_nsec < 0) {
    ts->tv_nsec += 1000000000;
    ts->tv_sec -= 1;
  }
  return true;
}

// A JS error for errno `err` about `what`, with .code and .errno as Node's fs errors have them.
static void throw_errno(napi_env env, int err, const std::string& what) {
  napi_value error, message, code, errnum;
  std::string msg = std::string(strerror(err)) + ", " + what;
  napi_create_string_utf8(env, msg.c_str(), NAPI_AUTO_LENGTH, &message);
  napi_create_error(env, nullptr, message, &error);
  const char* name = strerrorname_np(err);
  napi_create_string_utf8(env, name ? name : "EIO", NAPI_AUTO_LENGTH, &code);
  napi_set_named_property(env, error, "code", code);
  napi_create_int32(env, -err, &errnum);
  napi_set_named_property(env, error, "errno", errnum);
  napi_throw(env, error);
}

// openBeneath(root, rel): directory rel below directory root, opened in one openat2(2) that follows no symbolic
// link and cannot leave root (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS): what util/beneath.ts did one component at a
// time, in two system calls. Synchronous: only for nasd's own directories (the state directory), never a path
// inside a mount it serves. Returns the descriptor (close-on-exec).
static napi_value js_open_beneath(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  std::string root = text(env, argv[0]), rel = text(env, argv[1]);
  int dir = open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return throw_errno(env, errno, "open '" + root + "'"), nullptr;
  int fd = dir;
  if (!rel.empty()) {
    struct open_how how {};
    how.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;  // no O_NOFOLLOW: a link at the end is ELOOP too, not ENOTDIR
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    do fd = static_cast<int>(syscall(SYS_openat2, dir, rel.c_str(), &how, sizeof how)); while (fd < 0 && errno == EAGAIN);
    int err = errno;
    close(dir);
    if (fd < 0) return throw_errno(env, err, "openat2 '" + rel + "' below '" + root + "'"), nullptr;
  }
  napi_value out;
  napi_create_int32(env, fd, &out);
  return out;
}

// pidNamespaces(pid): the process's PID namespace and those above it, innermost first (pidns.h); [] when gone.
static napi_value js_pid_namespaces(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  std::vector<std::string> spaces = pid_namespaces(static_cast<pid_t>(number(env, argv[0], -1)));
  napi_value out;
  napi_create_array_with_length(env, spaces.size(), &out);
  for (size_t i = 0; i < spaces.size(); i++) {
    napi_value s;
    napi_create_string_utf8(env, spaces[i].c_str(), spaces[i].size(), &s);
    napi_set_element(env, out, static_cast<uint32_t>(i), s);
  }
  return out;
}

// lutimens(path, atime, mtime): exact times on a file of nasd's own (never a path inside a mount it serves),
// not following a symlink. Node's utimes keeps microseconds; tar, rsync and touch set nanoseconds.
static napi_value js_lutimens(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  std::string path = text(env, argv[0]);
  struct timespec ts[2];
  if (argc < 3 || !timespec_of(env, argv[1], &ts[0]) || !timespec_of(env, argv[2], &ts[1]))
    return fail(env, "lutimens(path, atime, mtime): each time a bigint of nanoseconds, 'now' or 'omit'");
  if (utimensat(AT_FDCWD, path.c_str(), ts, AT_SYMLINK_NOFOLLOW) != 0) throw_errno(env, errno, "lutimens '" + path + "'");
  return nullptr;
}

// exec(file, argv, env, fd): this process becomes `file` (the next nasd, in place: same pid, same namespaces and
// cgroup, nothing for systemd to set up), with the kernel connection `fd` as descriptor 3 (LISTEN_FDS). Every
// other descriptor is close-on-exec. Returns only if execve failed: -errno.
static napi_value js_exec(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  auto list = [&](napi_value array) {
    std::vector<std::string> out;
    uint32_t count = 0;
    napi_get_array_length(env, array, &count);
    for (uint32_t i = 0; i < count; i++) {
      napi_value item;
      napi_get_element(env, array, i, &item);
      out.push_back(text(env, item));
    }
    return out;
  };
  std::string file = text(env, argv[0]);
  std::vector<std::string> args = list(argv[1]), vars = list(argv[2]);
  int fd = static_cast<int>(number(env, argv[3], -1));
  std::vector<char*> a, e;
  for (auto& s : args) a.push_back(s.data());
  for (auto& s : vars) e.push_back(s.data());
  a.push_back(nullptr);
  e.push_back(nullptr);
  int rc = 0;
  // Standard input, output and error go on too (Node may have marked them close-on-exec).
  for (int std = 0; std < 3; std++) fcntl(std, F_SETFD, 0);
  // dup2 leaves descriptor 3 open across exec; one that is 3 already only loses its close-on-exec flag.
  if (fd == 3 ? fcntl(3, F_SETFD, 0) < 0 : dup2(fd, 3) < 0) rc = -errno;
  if (rc == 0) {
    // A SIGHUP from here on stays pending across execve (a blocked signal does), until the preloaded guard of the
    // next nasd handles it (native/hup-guard.cc): no moment in which SIGHUP's default action could end the process.
    sigset_t hup, before;
    sigemptyset(&hup);
    sigaddset(&hup, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &hup, &before);
    execve(file.c_str(), a.data(), e.data());
    rc = -errno;
    pthread_sigmask(SIG_SETMASK, &before, nullptr);
  }
  napi_value out;
  napi_create_int32(env, rc, &out);
  return out;
}

// becomeSubreaper(): this process adopts its orphaned descendants, as init would (PR_SET_CHILD_SUBREAPER): a
// process that called setsid() or forked twice stays its child. The check runner (merge/check-runner.ts) is one.
static napi_value js_become_subreaper(napi_env env, napi_callback_info) {
  if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) throw_errno(env, errno, "prctl(PR_SET_CHILD_SUBREAPER)");
  return nullptr;
}

// reapChild(block): wait for any child to end (waitpid(-1)): its pid, 0 when none has ended (block false), -1
// when there is no child left. Only for a process that no longer waits for a child through Node (libuv would
// miss the status this takes).
static napi_value js_reap_child(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  bool block = false;
  if (argc > 0) napi_get_value_bool(env, argv[0], &block);
  int status = 0;
  pid_t pid;
  do pid = waitpid(-1, &status, block ? 0 : WNOHANG); while (pid < 0 && errno == EINTR);
  if (pid < 0 && errno != ECHILD) return throw_errno(env, errno, "waitpid"), nullptr;
  napi_value out;
  napi_create_int32(env, pid < 0 ? -1 : pid, &out);
  return out;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"mount", nullptr, js_mount, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"reply", nullptr, js_reply, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"groups", nullptr, js_groups, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"invalidate", nullptr, js_invalidate, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"restrict", nullptr, js_restrict, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"share", nullptr, js_share, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"stats", nullptr, js_stats, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"unmount", nullptr, js_unmount, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"fd", nullptr, js_fd, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"suspend", nullptr, js_suspend, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"notify", nullptr, js_notify, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"lutimens", nullptr, js_lutimens, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"exec", nullptr, js_exec, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"openBeneath", nullptr, js_open_beneath, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"pidNamespaces", nullptr, js_pid_namespaces, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"becomeSubreaper", nullptr, js_become_subreaper, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"reapChild", nullptr, js_reap_child, nullptr, nullptr, nullptr, napi_default, nullptr},
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  return exports;
}

}  // namespace nas

NAPI_MODULE(NODE_GYP_MODULE_NAME, nas::init)

// What JS calls of a mount: mount, reply, groups, invalidate, restrict, share, stats, unmount, suspend, fd
// (src/fuse-ops/native.ts); the system calls that are not FUSE are system.cc's.
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "handover.h"
#include "js.h"
#include "invalidate.h"
#include "ops.h"
#include "napi-args.h"
#include "replies.h"
#include "system.h"
#include "table.h"

namespace nas {

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

// The node table as a flat array: id, lookup count, number of names, then parent and name for each; ids and
// parents as decimal strings (id_value: exact up to 2^64).
static napi_value export_nodes(napi_env env, Mount* m) {
  napi_value out;
  napi_create_array(env, &out);
  uint32_t i = 0;
  auto push = [&](napi_value v) { napi_set_element(env, out, i++, v); };
  auto num = [&](double d) { napi_value v; napi_create_double(env, d, &v); push(v); };
  std::vector<Exported> nodes;
  {
    std::lock_guard<std::mutex> lock(m->mu);
    nodes = export_table(m);
  }
  for (const Exported& n : nodes) {
    push(id_value(env, n.id));
    num(static_cast<double>(n.nlookup));
    num(static_cast<double>(n.names.size()));
    for (auto& [parent, name] : n.names) {
      push(id_value(env, parent));
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
  std::vector<Exported> nodes;
  for (uint32_t i = 0; i + 3 <= len;) {
    Exported n;
    n.id = id_of(env, at(i));
    n.nlookup = static_cast<uint64_t>(number(env, at(i + 1)));
    uint32_t names = static_cast<uint32_t>(number(env, at(i + 2)));
    i += 3;
    for (uint32_t k = 0; k < names && i + 2 <= len; k++, i += 2) n.names.emplace_back(id_of(env, at(i)), text(env, at(i + 1)));
    nodes.push_back(std::move(n));
  }
  std::lock_guard<std::mutex> lock(m->mu);
  import_table(m, nodes);
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
  bool private_ids = false;
  napi_get_value_bool(env, property(env, argv[0], "privateIds"), &private_ids);
  m->private_ids = private_ids;
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
  start_notifier(m);
  m->loop = std::thread(serve, m, threads);
  napi_value out;
  napi_create_external(env, m, nullptr, nullptr, &out);
  return out;
}

// reply(call, result, answer?): JS's answer to the request it was given as `call` (0 or a negative errno, and what
// the op's answer kind holds: protocol.h). A call answered already is not answered again.
static napi_value js_reply(napi_env env, napi_callback_info info) {
  Js js(env);
  size_t argc = 3;
  napi_value argv[3] = {nullptr, nullptr, nullptr};
  if (!js.check(napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr)) || argc < 2)
    return js.fail("reply(call, result, answer?)");
  Call* c = take_call(static_cast<uint32_t>(js.to_number(argv[0])));
  if (c) finish(env, c, static_cast<int>(js.to_number(argv[1], -EIO)), argc > 2 ? argv[2] : nullptr);
  return nullptr;
}

// groups(call) -> the caller's supplementary groups (fuse_req_getgroups reads them from /proc: asked only when
// a handler wants them, while its request is unanswered).
static napi_value js_groups(napi_env env, napi_callback_info info) {
  Js js(env);
  napi_value argv[1];
  if (!js.args(info, 1, argv, "groups(call)")) return nullptr;
  napi_value out = js.array();
  Call* c = pending_call(static_cast<uint32_t>(js.to_number(argv[0])));
  if (!c) return out;
  gid_t list[256];
  int n = fuse_req_getgroups(c->req, 256, list);
  for (int i = 0; i < n && i < 256; i++) js.set_at(out, static_cast<uint32_t>(i), js.number(list[i]));
  return js.failed ? nullptr : out;
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

static napi_value js_fd(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], out;
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  Mount* m = mount_arg(env, argv[0]);
  napi_create_int32(env, m ? m->fd : -1, &out);
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
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  define_system(env, exports);
  return exports;
}

}  // namespace nas

NAPI_MODULE(NODE_GYP_MODULE_NAME, nas::init)

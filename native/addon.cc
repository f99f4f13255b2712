// The N-API surface of a mount: mount, reply, groups, invalidate, restrict, share, stats, unmount, suspend, fd,
// grant, settle
// (src/fuse-ops/native.ts types them); the system calls that are not FUSE are system.cc's. Every N-API status is
// checked through js.h.
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "grants.h"
#include "handover.h"
#include "js.h"
#include "invalidate.h"
#include "ops.h"
#include "replies.h"
#include "system.h"
#include "table.h"

namespace nas {

static Mount* mount_arg(Js& js, napi_value v) {
  void* data = nullptr;
  return js.type(v) == napi_external && js.check(napi_get_value_external(js.env, v, &data)) ? static_cast<Mount*>(data) : nullptr;
}

static void barrier_done(napi_env env, napi_value callback, void*, void* data) {
  if (!env) return;
  Js js(env);
  napi_value id = js.number(static_cast<double>(reinterpret_cast<uintptr_t>(data))), result;
  js.check(napi_call_function(env, js.undefined(), callback, 1, &id, &result));
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

// A successor's node table: the bytes the hand-over wrote (handover.cc's pack_table), or the flat array a nasd
// before them wrote (id, lookup count, name count, then parent and name per name; ids as decimal strings or numbers).
static bool nodes_arg(Js& js, napi_value v, std::vector<Exported>& out) {
  void* bytes = nullptr;
  size_t size = 0;
  if (js.bytes(v, &bytes, &size)) return unpack_table(static_cast<const char*>(bytes), size, out);
  if (!js.is_array(v)) return false;
  auto id = [&](napi_value x) {
    return js.type(x) == napi_number ? static_cast<uint64_t>(js.to_number(x)) : strtoull(js.text(x).c_str(), nullptr, 10);
  };
  uint32_t len = js.length(v);
  for (uint32_t i = 0; i + 3 <= len;) {
    Exported n;
    n.id = id(js.at(v, i));
    n.nlookup = static_cast<uint64_t>(js.to_number(js.at(v, i + 1)));
    uint32_t names = static_cast<uint32_t>(js.to_number(js.at(v, i + 2)));
    i += 3;
    for (uint32_t k = 0; k < names && i + 2 <= len; k++, i += 2) n.names.emplace_back(id(js.at(v, i)), js.text(js.at(v, i + 1)));
    out.push_back(std::move(n));
  }
  return !js.failed;
}

// The top-level names an array lists (`present`: false when the value is no array, as null is).
static std::set<std::string> name_set(Js& js, napi_value array, bool* present) {
  *present = js.is_array(array);
  std::vector<std::string> list = js.strings(array);
  return std::set<std::string>(list.begin(), list.end());
}

// mount({ mountpoint, options, ttl, threads, shared?, fd?, init?, nodes? }, dispatch, barrierDone) -> a mount. With `fd`
// (a kernel connection an earlier nasd handed on), `init` (the INIT it read) and `nodes` (its node table), the
// connection is taken over instead of mounted. The calling process must not touch the mount synchronously
// (its JS thread answers it).
static napi_value js_mount(napi_env env, napi_callback_info info) {
  Js js(env);
  napi_value argv[3];
  if (!js.args(info, 3, argv, "mount(options, dispatch, barrierDone)")) return nullptr;
  napi_value o = argv[0];
  auto m = std::make_unique<Mount>();
  m->mountpoint = js.text(js.get(o, "mountpoint"));
  std::string options = js.text(js.get(o, "options"));
  m->ttl = js.to_number(js.get(o, "ttl"), 3600);
  m->private_ids = js.to_bool(js.get(o, "privateIds"));
  // The views whose nodes have ACLs, known before the first request (share() changes them later).
  bool listed;
  m->shared = name_set(js, js.get(o, "shared"), &listed);
  unsigned threads = static_cast<unsigned>(js.to_number(js.get(o, "threads"), 8));
  int inherited = static_cast<int>(js.to_number(js.get(o, "fd"), -1));
  std::vector<char> init;
  std::vector<Exported> nodes;
  if (inherited >= 0) {
    void* bytes = nullptr;
    size_t len = 0;
    if (!js.bytes(js.get(o, "init"), &bytes, &len) || !nodes_arg(js, js.get(o, "nodes"), nodes))
      return js.fail("mount: a taken-over connection needs its init (a Buffer) and nodes (the table handed on)");
    init.assign(static_cast<char*>(bytes), static_cast<char*>(bytes) + len);
  }
  if (js.failed) return js.fail("mount: options are { mountpoint, options, ttl, threads, shared?, privateIds?, fd?, init?, nodes? }");

  napi_value name = js.string("nasfuse");
  js.check(napi_create_threadsafe_function(env, argv[1], nullptr, name, 0, 1, nullptr, nullptr, nullptr, deliver, &m->requests));
  js.check(napi_create_threadsafe_function(env, argv[2], nullptr, name, 0, 1, nullptr, nullptr, nullptr, barrier_done, &m->barriers));
  const char* args[] = {"nasd", "-o", options.c_str()};
  struct fuse_args fargs = FUSE_ARGS_INIT(options.empty() ? 1 : 3, const_cast<char**>(args));
  m->se = js.failed ? nullptr : fuse_session_new(&fargs, operations(), sizeof(struct fuse_lowlevel_ops), m.get());
  bool ready = m->se && (inherited >= 0 ? prepare_takeover(m.get(), init) && install_io(m.get(), inherited)
                                        : fuse_session_mount(m->se, m->mountpoint.c_str()) == 0 &&
                                              install_io(m.get(), fuse_session_fd(m->se)));
  if (!ready) {
    if (m->se) fuse_session_destroy(m->se);
    if (m->requests) js.check(napi_release_threadsafe_function(m->requests, napi_tsfn_abort));
    if (m->barriers) js.check(napi_release_threadsafe_function(m->barriers, napi_tsfn_abort));
    return js.fail(inherited >= 0 ? "cannot take over the kernel connection of " + m->mountpoint
                                  : "cannot mount " + m->mountpoint + " (libfuse said why above)", "EMOUNT");
  }
  m->fd = fuse_session_fd(m->se);
  if (inherited >= 0) {
    std::lock_guard<std::mutex> lock(m->mu);
    import_table(m.get(), nodes);
  }
  // The kernel connection is nasd's alone: git and every other child nasd starts must not inherit it.
  fcntl(m->fd, F_SETFD, fcntl(m->fd, F_GETFD) | FD_CLOEXEC);
  start_notifier(m.get());
  Mount* mount = m.release();  // lives as long as the process: a worker may still be in libfuse after an unmount
  mount->loop = std::thread(serve, mount, threads);
  napi_value out = nullptr;
  js.check(napi_create_external(env, mount, nullptr, nullptr, &out));
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
  Js js(env);
  napi_value argv[3];
  if (!js.args(info, 3, argv, "invalidate(mount, roles, barrier)")) return nullptr;
  Mount* m = mount_arg(js, argv[0]);
  if (!m) return js.fail("invalidate: not a mount");
  bool listed;
  auto names = name_set(js, argv[1], &listed);
  if (js.failed) return js.fail("invalidate: roles are an array of strings or null");
  invalidate_names(m, names, !listed, js.to_number(argv[2]));
  return nullptr;
}

// restrict(mount, pidNamespace, allowedTopLevelNames | null): null lifts it.
static napi_value js_restrict(napi_env env, napi_callback_info info) {
  Js js(env);
  napi_value argv[3];
  if (!js.args(info, 3, argv, "restrict(mount, pidNamespace, names)")) return nullptr;
  Mount* m = mount_arg(js, argv[0]);
  if (!m) return js.fail("restrict: not a mount");
  bool listed;
  auto names = name_set(js, argv[2], &listed);
  std::string ns = js.text(argv[1]);
  if (js.failed) return js.fail("restrict: a namespace and an array of strings or null");
  std::lock_guard<std::mutex> lock(m->mu);
  if (listed) m->restricted[ns] = names;
  else m->restricted.erase(ns);
  return nullptr;
}

// share(mount, names): the views whose nodes may have an access ACL (the others have none, answered natively).
static napi_value js_share(napi_env env, napi_callback_info info) {
  Js js(env);
  napi_value argv[2];
  if (!js.args(info, 2, argv, "share(mount, names)")) return nullptr;
  Mount* m = mount_arg(js, argv[0]);
  if (!m) return js.fail("share: not a mount");
  bool listed;
  auto names = name_set(js, argv[1], &listed);
  if (js.failed) return js.fail("share: names are an array of strings");
  std::lock_guard<std::mutex> lock(m->mu);
  m->shared = listed ? names : std::set<std::string>();
  return nullptr;
}

static napi_value js_stats(napi_env env, napi_callback_info info) {
  Js js(env);
  napi_value argv[1];
  if (!js.args(info, 1, argv, "stats(mount)")) return nullptr;
  Mount* m = mount_arg(js, argv[0]);
  if (!m) return js.fail("stats: not a mount");
  size_t nodes;
  {
    std::lock_guard<std::mutex> lock(m->mu);
    nodes = m->nodes.size();
  }
  napi_value out = js.object();
  js.set(out, "hits", js.number(static_cast<double>(m->hits.load())));
  js.set(out, "misses", js.number(static_cast<double>(m->misses.load())));
  js.set(out, "nodes", js.number(static_cast<double>(nodes)));
  js.set(out, "written", js.number(static_cast<double>(m->written.load())));
  return js.failed ? nullptr : out;
}

// grant(mount, fh, fd, { size, limit, floor, uid, append, appendOnly }) -> whether the binding answers fh's writes now.
static napi_value js_grant(napi_env env, napi_callback_info info) {
  Js js(env);
  napi_value argv[4];
  if (!js.args(info, 4, argv, "grant(mount, fh, fd, terms)")) return nullptr;
  Mount* m = mount_arg(js, argv[0]);
  if (!m) return js.fail("grant: not a mount");
  GrantTerms terms;
  terms.uid = static_cast<uint32_t>(js.to_number(js.get(argv[3], "uid")));
  terms.size = static_cast<uint64_t>(js.to_number(js.get(argv[3], "size")));
  terms.limit = static_cast<uint64_t>(js.to_number(js.get(argv[3], "limit")));
  terms.floor = static_cast<uint64_t>(js.to_number(js.get(argv[3], "floor")));
  terms.append = js.to_bool(js.get(argv[3], "append"));
  terms.append_only = js.to_bool(js.get(argv[3], "appendOnly"));
  uint64_t fh = static_cast<uint64_t>(js.to_number(argv[1], -1));
  int fd = static_cast<int>(js.to_number(argv[2], -1));
  if (js.failed) return js.fail("grant: terms are { size, limit, floor, uid, append, appendOnly }");
  return js.boolean(grant_writes(m, fh, fd, terms));
}

// settle(mount, fh, revoke) -> null (no grant) or { size, floor, wrote, failed } since the last settle.
static napi_value js_settle(napi_env env, napi_callback_info info) {
  Js js(env);
  napi_value argv[3];
  if (!js.args(info, 3, argv, "settle(mount, fh, revoke)")) return nullptr;
  Mount* m = mount_arg(js, argv[0]);
  if (!m) return js.fail("settle: not a mount");
  Settled s = settle_writes(m, static_cast<uint64_t>(js.to_number(argv[1], -1)), js.to_bool(argv[2]));
  if (!s.found) return js.null();
  napi_value out = js.object();
  js.set(out, "size", js.number(static_cast<double>(s.size)));
  js.set(out, "floor", js.number(static_cast<double>(s.floor)));
  js.set(out, "wrote", js.boolean(s.wrote));
  js.set(out, "failed", js.boolean(s.failed));
  return js.failed ? nullptr : out;
}

// Run `job` on libuv's thread pool and give JS a promise its completion settles (Job has m, work, deferred).
template <typename Job>
static napi_value on_thread_pool(Js& js, const char* name, std::unique_ptr<Job> job, napi_async_execute_callback execute,
                                 napi_async_complete_callback complete) {
  napi_value promise = nullptr;
  if (!js.check(napi_create_promise(js.env, &job->deferred, &promise))) return js.fail(std::string(name) + ": no promise");
  bool queued = js.check(napi_create_async_work(js.env, nullptr, js.string(name), execute, complete, job.get(), &job->work)) &&
                js.check(napi_queue_async_work(js.env, job->work));
  if (!queued) {
    // The promise is settled (rejected) and the work let go: nothing waits on a job that never runs.
    napi_value error = nullptr;
    js.check(napi_create_error(js.env, nullptr, js.string(std::string(name) + ": cannot start it on the thread pool"), &error));
    js.check(napi_reject_deferred(js.env, job->deferred, error));
    if (job->work) js.check(napi_delete_async_work(js.env, job->work));
    return promise;
  }
  job.release();  // the completion deletes it
  return promise;
}

// Settle a job's promise with `value` and free the job (a thread pool completion, on the JS thread).
template <typename Job>
static void settle(Js& js, Job* job, napi_value value) {
  js.check(napi_resolve_deferred(js.env, job->deferred, value ? value : js.undefined()));
  js.check(napi_delete_async_work(js.env, job->work));
  delete job;
}

struct Unmounting {
  Mount* m;
  napi_async_work work = nullptr;
  napi_deferred deferred = nullptr;
  bool ended = false;
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
  Js js(env);
  auto* u = static_cast<Unmounting*>(data);
  Mount* m = u->m;
  // The session is not destroyed: a worker still in libfuse (a mount detached but held open) would use it;
  // nasd exits after an unmount. Requests still queued for JS are answered EIO by deliver.
  if (u->ended) {
    m->loop.join();
    js.check(napi_release_threadsafe_function(m->requests, napi_tsfn_release));
    js.check(napi_release_threadsafe_function(m->barriers, napi_tsfn_release));
  } else {
    m->loop.detach();
  }
  settle(js, u, nullptr);
}

// unmount(mount) -> Promise<void>
static napi_value js_unmount(napi_env env, napi_callback_info info) {
  Js js(env);
  napi_value argv[1];
  if (!js.args(info, 1, argv, "unmount(mount)")) return nullptr;
  Mount* m = mount_arg(js, argv[0]);
  if (!m) return js.fail("unmount: not a mount");
  return on_thread_pool(js, "nasfuse-unmount", std::make_unique<Unmounting>(Unmounting{m}), unmount_execute, unmount_complete);
}

struct Suspending {
  Mount* m;
  napi_async_work work = nullptr;
  napi_deferred deferred = nullptr;
  bool drained = false;
};

static void suspend_execute(napi_env, void* data) {
  auto* s = static_cast<Suspending*>(data);
  s->m->paused = true;
  for (int i = 0; i < 6000 && !(s->drained = drained(s->m)); i++) usleep(5000);
}

static void suspend_complete(napi_env env, napi_status, void* data) {
  Js js(env);
  auto* s = static_cast<Suspending*>(data);
  Mount* m = s->m;
  std::string table;
  {
    std::lock_guard<std::mutex> lock(m->mu);
    table = pack_table(export_table(m));
  }
  napi_value out = js.object();
  js.set(out, "init", js.buffer_copy(m->init_request.data(), m->init_request.size()));
  js.set(out, "nodes", js.buffer_copy(table.data(), table.size()));
  js.set(out, "drained", js.boolean(s->drained));
  settle(js, s, out);
}

// suspend(mount) -> Promise<{ init, nodes, drained }>: stop reading requests, wait until every request read
// was answered (JS keeps answering meanwhile), and give what a successor needs to take the connection over.
static napi_value js_suspend(napi_env env, napi_callback_info info) {
  Js js(env);
  napi_value argv[1];
  if (!js.args(info, 1, argv, "suspend(mount)")) return nullptr;
  Mount* m = mount_arg(js, argv[0]);
  if (!m) return js.fail("suspend: not a mount");
  return on_thread_pool(js, "nasfuse-suspend", std::make_unique<Suspending>(Suspending{m}), suspend_execute, suspend_complete);
}

static napi_value js_fd(napi_env env, napi_callback_info info) {
  Js js(env);
  napi_value argv[1];
  if (!js.args(info, 1, argv, "fd(mount)")) return nullptr;
  Mount* m = mount_arg(js, argv[0]);
  return js.number(m ? m->fd : -1);
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
      {"grant", nullptr, js_grant, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"settle", nullptr, js_settle, nullptr, nullptr, nullptr, napi_default, nullptr},
  };
  Js(env).check(napi_define_properties(env, exports, sizeof props / sizeof props[0], props));
  define_system(env, exports);
  return exports;
}

}  // namespace nas

NAPI_MODULE(NODE_GYP_MODULE_NAME, nas::init)

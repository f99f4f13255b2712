// What JS calls that is not FUSE: system calls nasd makes for itself, synchronously and never on a path inside
// the mount it serves (notify, openBeneath, lutimens, exec, pidNamespaces, becomeSubreaper, reapChild).
#include "system.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/openat2.h>

#include <string>
#include <vector>

#include "handover.h"
#include "js.h"
#include "pidns.h"

namespace nas {

// notify(socket, state, fd) -> 0 or -errno: sd_notify, with a descriptor for systemd's store when fd >= 0.
static napi_value js_notify(napi_env env, napi_callback_info info) {
  Js js(env);
  napi_value argv[3];
  if (!js.args(info, 3, argv, "notify(socket, state, fd)")) return nullptr;
  std::string socket = js.text(argv[0]), state = js.text(argv[1]);
  if (js.failed) return js.fail("notify(socket, state, fd): socket and state are strings");
  return js.number(notify(socket, state, static_cast<int>(js.to_number(argv[2], -1))));
}

// A time for lutimens: a bigint of nanoseconds since the epoch, 'now' or 'omit'.
static bool timespec_of(Js& js, napi_value v, struct timespec* ts) {
  napi_valuetype type = js.type(v);
  if (type == napi_string) {
    std::string s = js.text(v);
    if (s == "now") ts->tv_nsec = UTIME_NOW;
    else if (s == "omit") ts->tv_nsec = UTIME_OMIT;
    else return false;
    ts->tv_sec = 0;
    return true;
  }
  if (type != napi_bigint) return false;
  int64_t ns = 0;
  bool lossless = false;
  if (!js.check(napi_get_value_bigint_int64(js.env, v, &ns, &lossless)) || !lossless) return false;
  ts->tv_sec = ns / 1000000000;
  ts->tv_nsec = ns % 1000000000;
  if (ts->tv_nsec < 0) {
    ts->tv_nsec += 1000000000;
    ts->tv_sec -= 1;
  }
  return true;
}

// openBeneath(root, rel): directory rel below directory root, opened in one openat2(2) that follows no symbolic
// link and cannot leave root (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS): what util/beneath.ts did one component at a
// time, in two system calls. Synchronous: only for nasd's own directories (the state directory), never a path
// inside a mount it serves. Returns the descriptor (close-on-exec).
static napi_value js_open_beneath(napi_env env, napi_callback_info info) {
  Js js(env);
  napi_value argv[2];
  if (!js.args(info, 2, argv, "openBeneath(root, rel)")) return nullptr;
  std::string root = js.text(argv[0]), rel = js.text(argv[1]);
  if (js.failed) return js.fail("openBeneath(root, rel): two strings");
  int dir = open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return js.throw_errno(errno, "open '" + root + "'");
  int fd = dir;
  if (!rel.empty()) {
    struct open_how how {};
    how.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;  // no O_NOFOLLOW: a link at the end is ELOOP too, not ENOTDIR
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    do fd = static_cast<int>(syscall(SYS_openat2, dir, rel.c_str(), &how, sizeof how)); while (fd < 0 && errno == EAGAIN);
    int err = errno;
    close(dir);
    if (fd < 0) return js.throw_errno(err, "openat2 '" + rel + "' below '" + root + "'");
  }
  return js.number(fd);
}

// pidNamespaces(pid): the process's PID namespace and those above it, innermost first (pidns.h); [] when gone.
static napi_value js_pid_namespaces(napi_env env, napi_callback_info info) {
  Js js(env);
  napi_value argv[1];
  if (!js.args(info, 1, argv, "pidNamespaces(pid)")) return nullptr;
  std::vector<std::string> spaces = pid_namespaces(static_cast<pid_t>(js.to_number(argv[0], -1)));
  napi_value out = js.array();
  for (size_t i = 0; i < spaces.size(); i++) js.set_at(out, static_cast<uint32_t>(i), js.string(spaces[i]));
  return js.failed ? nullptr : out;
}

// lutimens(path, atime, mtime): exact times on a file of nasd's own (never a path inside a mount it serves),
// not following a symlink. Node's utimes keeps microseconds; tar, rsync and touch set nanoseconds.
static napi_value js_lutimens(napi_env env, napi_callback_info info) {
  Js js(env);
  napi_value argv[3];
  const char* usage = "lutimens(path, atime, mtime): each time a bigint of nanoseconds, 'now' or 'omit'";
  if (!js.args(info, 3, argv, usage)) return nullptr;
  std::string path = js.text(argv[0]);
  struct timespec ts[2];
  if (js.failed || !timespec_of(js, argv[1], &ts[0]) || !timespec_of(js, argv[2], &ts[1])) return js.fail(usage);
  if (utimensat(AT_FDCWD, path.c_str(), ts, AT_SYMLINK_NOFOLLOW) != 0) return js.throw_errno(errno, "lutimens '" + path + "'");
  return nullptr;
}

// exec(file, argv, env, fd): this process becomes `file` (the next nasd, in place: same pid, same namespaces and
// cgroup, nothing for systemd to set up), with the kernel connection `fd` as descriptor 3 (LISTEN_FDS). Every
// other descriptor is close-on-exec. Returns only if execve failed: -errno.
static napi_value js_exec(napi_env env, napi_callback_info info) {
  Js js(env);
  napi_value argv[4];
  if (!js.args(info, 4, argv, "exec(file, argv, env, fd)")) return nullptr;
  std::string file = js.text(argv[0]);
  std::vector<std::string> args = js.strings(argv[1]), vars = js.strings(argv[2]);
  int fd = static_cast<int>(js.to_number(argv[3], -1));
  if (js.failed) return js.fail("exec(file, argv, env, fd): a string, two arrays of strings and a descriptor");
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
  return js.number(rc);
}

// becomeSubreaper(): this process adopts its orphaned descendants, as init would (PR_SET_CHILD_SUBREAPER): a
// process that called setsid() or forked twice stays its child. The check runner (merge/check-runner.ts) is one.
static napi_value js_become_subreaper(napi_env env, napi_callback_info) {
  Js js(env);
  if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) return js.throw_errno(errno, "prctl(PR_SET_CHILD_SUBREAPER)");
  return nullptr;
}

// reapChild(block): wait for any child to end (waitpid(-1)): its pid, 0 when none has ended (block false), -1
// when there is no child left. Only for a process that no longer waits for a child through Node (libuv would
// miss the status this takes).
static napi_value js_reap_child(napi_env env, napi_callback_info info) {
  Js js(env);
  napi_value argv[1];
  if (!js.args(info, 1, argv, "reapChild(block)")) return nullptr;
  bool block = js.to_bool(argv[0]);
  int status = 0;
  pid_t pid;
  do pid = waitpid(-1, &status, block ? 0 : WNOHANG); while (pid < 0 && errno == EINTR);
  if (pid < 0 && errno != ECHILD) return js.throw_errno(errno, "waitpid");
  return js.number(pid < 0 ? -1 : pid);
}

void define_system(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"notify", nullptr, js_notify, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"lutimens", nullptr, js_lutimens, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"exec", nullptr, js_exec, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"openBeneath", nullptr, js_open_beneath, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"pidNamespaces", nullptr, js_pid_namespaces, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"becomeSubreaper", nullptr, js_become_subreaper, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"reapChild", nullptr, js_reap_child, nullptr, nullptr, nullptr, napi_default, nullptr},
  };
  Js(env).check(napi_define_properties(env, exports, sizeof props / sizeof props[0], props));
}

}  // namespace nas

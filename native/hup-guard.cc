// nas-hup-guard.node (a plain shared object, named as node-gyp names what it builds): preloaded (LD_PRELOAD) into the next nasd of a reload, so that a SIGHUP between its execve and
// the moment its JS takes SIGHUP over does not end it (SIGHUP's default action), which would close the kernel
// connection every shell and open file on the mount depends on. Node resets inherited dispositions at start,
// SIG_IGN and the signal mask included, but keeps a handler installed with SA_SIGINFO (an embedder's). The handler
// does nothing: a reload is in progress, and a HUP then asks for nothing more. nasd drops the preload from its
// environment at once, so nothing it starts inherits it.
#include <signal.h>
#include <string.h>

static void ignore_hup(int, siginfo_t*, void*) {}

__attribute__((constructor)) static void guard_hup() {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = ignore_hup;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGHUP, &sa, nullptr);
}

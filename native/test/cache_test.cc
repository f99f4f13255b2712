// What the cache may answer without JS (cache.cc): freshness, a run's views, and lookups from a listing.
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../cache.h"
#include "../pidns.h"
#include "check.h"
#include "fixtures.h"

using namespace nas;
using namespace fixture;

TEST("fresh: what JS gave is served until the ttl, unless it was not cacheable or the node is open for writing") {
  Mount m;
  Node* n = bind(&m, ROOT, "a", attrs(100));
  CHECK(!fresh(n));  // nothing known yet
  remember(&m, n, attrs(100), true);
  CHECK(fresh(n));
  n->writers = 1;
  CHECK(!fresh(n));
  n->writers = 0;
  drop(n);
  CHECK(!fresh(n));
  remember(&m, n, attrs(100), false);  // a fill a change overlapped
  CHECK(!fresh(n));
  m.ttl = 0;
  remember(&m, n, attrs(100), true);
  CHECK(!fresh(n));
}

TEST("attr_cached: a fresh node's attributes for the mount's ttl, the root's for years, an unlinked file's for none") {
  Mount m;
  double ttl = -1;
  Node* root = get(&m, FUSE_ROOT_ID);
  CHECK(!attr_cached(&m, getpid(), root, &ttl));
  remember(&m, root, dir(1), true);
  CHECK(attr_cached(&m, getpid(), root, &ttl));
  CHECK_EQ(ttl, ROOT_TTL);
  Node* a = look(m, ROOT, "a", attrs(100));
  CHECK(attr_cached(&m, getpid(), a, &ttl));
  CHECK_EQ(ttl, m.ttl);
  unbind(&m, ROOT, "a");
  CHECK(attr_cached(&m, getpid(), a, &ttl));
  CHECK_EQ(ttl, 0.0);
  a->writers = 1;
  CHECK(!attr_cached(&m, getpid(), a, &ttl));
}

// A process in a PID namespace made below this one (as `unshare -p` inside a run makes), stopped until killed.
static pid_t in_new_namespace() {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  pid_t helper = fork();
  if (helper == 0) {
    if (unshare(CLONE_NEWPID) != 0) _exit(1);
    pid_t inner = fork();  // the first child of the new namespace (its pid 1 there)
    if (inner == 0) {
      pause();
      _exit(0);
    }
    if (write(fds[1], &inner, sizeof inner) != sizeof inner) _exit(1);
    _exit(0);
  }
  close(fds[1]);
  pid_t inner = -1;
  if (read(fds[0], &inner, sizeof inner) != sizeof inner) inner = -1;
  close(fds[0]);
  waitpid(helper, nullptr, 0);
  return inner;
}

TEST("may_serve: a run's process is answered only inside the top-level names its run may reach") {
  Mount m;
  Node* alpha = look(m, ROOT, "alpha", dir(200));
  Node* file = look(m, 200, "f", attrs(201));
  Node* beta = look(m, ROOT, "beta", dir(300));
  Node* root = get(&m, FUSE_ROOT_ID);
  pid_t me = getpid();
  CHECK(may_serve(&m, me, beta));  // no run confined: everyone is answered
  std::vector<std::string> mine = pid_namespaces(me);
  CHECK(!mine.empty());
  if (mine.empty()) return;
  m.restricted[mine[0]] = {"alpha"};
  CHECK(may_serve(&m, me, alpha));
  CHECK(may_serve(&m, me, file));
  CHECK(!may_serve(&m, me, beta));
  CHECK(may_serve(&m, me, root, "alpha"));
  CHECK(!may_serve(&m, me, root, "beta"));
  CHECK(may_serve(&m, me, root));  // the root itself: its listing is JS's, its attributes anyone's
  // Whose it is not known (pid 0), or the process is gone: JS decides.
  CHECK(!may_serve(&m, 0, alpha));
  CHECK(!may_serve(&m, INT_MAX, alpha));
  // A namespace made inside the run is still the run's.
  pid_t inner = in_new_namespace();
  if (inner > 0) {
    CHECK(pid_namespaces(inner).size() == mine.size() + 1);
    CHECK(may_serve(&m, inner, alpha));
    CHECK(!may_serve(&m, inner, beta));
    kill(inner, SIGKILL);
  } else {
    std::printf("  (no PID namespace of our own: not root; the nested case is left out)\n");
  }
  // Restrictions of other namespaces only: this process is no run's.
  m.restricted.clear();
  m.restricted["pid:[1]"] = {"alpha"};
  CHECK(may_serve(&m, me, beta));
}

TEST("a directory's listing answers lookups: a listed name binds a node, a name it lacks is ENOENT") {
  Mount m;
  Node* d = look(m, ROOT, "d", dir(200));
  struct fuse_entry_param e {};
  CHECK(lookup_cached(&m, getpid(), d, "x", &e) == Cached::ASK_JS);  // no listing, no node
  d->listing = std::make_shared<Listing>();
  listing_add(d, "x", attrs(300, S_IFREG, 1, 42));
  listing_add(d, "y", attrs(301));
  CHECK(lookup_cached(&m, getpid(), d, "x", &e) == Cached::ENTRY);
  Node* x = child(&m, 200, "x");
  CHECK(x != nullptr);
  if (!x) return;
  CHECK_EQ(e.ino, x->id);
  CHECK_EQ(x->id, uint64_t{300});
  CHECK_EQ(e.attr.st_size, off_t{42});
  CHECK_EQ(e.entry_timeout, m.ttl);
  CHECK_EQ(e.attr_timeout, m.ttl);
  CHECK_EQ(x->nlookup, uint64_t{1});
  CHECK(lookup_cached(&m, getpid(), d, "x", &e) == Cached::ENTRY);
  CHECK_EQ(x->nlookup, uint64_t{2});
  CHECK(lookup_cached(&m, getpid(), d, "z", &e) == Cached::NO_ENTRY);
  CHECK_EQ(child(&m, 200, "z"), nullptr);
}

TEST("a listing's lookups: a bound node that is not fresh, or a caller outside its views, goes to JS") {
  Mount m;
  Node* d = look(m, ROOT, "d", dir(200));
  d->listing = std::make_shared<Listing>();
  listing_add(d, "x", attrs(300));
  struct fuse_entry_param e {};
  Node* x = look(m, 200, "x", attrs(300));
  x->writers = 1;  // open for writing: its size moves
  CHECK(lookup_cached(&m, getpid(), d, "x", &e) == Cached::ASK_JS);
  CHECK_EQ(x->nlookup, uint64_t{1});
  x->writers = 0;
  CHECK(lookup_cached(&m, getpid(), d, "x", &e) == Cached::ENTRY);
  std::vector<std::string> mine = pid_namespaces(getpid());
  if (mine.empty()) return;
  m.restricted[mine[0]] = {"other"};
  CHECK(lookup_cached(&m, getpid(), d, "x", &e) == Cached::ASK_JS);
  CHECK(lookup_cached(&m, getpid(), d, "missing", &e) == Cached::ASK_JS);  // not even ENOENT: JS says why
}

TEST("a lookup without a listing: a fresh node under the name is the answer") {
  Mount m;
  Node* d = look(m, ROOT, "d", dir(200));
  Node* f = look(m, 200, "f", attrs(201));
  struct fuse_entry_param e {};
  CHECK(lookup_cached(&m, getpid(), d, "f", &e) == Cached::ENTRY);
  CHECK_EQ(e.ino, f->id);
  drop(f);
  CHECK(lookup_cached(&m, getpid(), d, "f", &e) == Cached::ASK_JS);
}

// The invalidation queue and the thread that sends it to the kernel.
#include "invalidate.h"

#include <errno.h>

#include "table.h"

namespace nas {

static void push(Mount* m, Inval item) {
  {
    std::lock_guard<std::mutex> lock(m->qmu);
    m->queue.push_back(std::move(item));
  }
  m->qcv.notify_one();
}

void queue_attr(Mount* m, uint64_t ino) { push(m, Inval{Inval::INODE, ino, std::string(), -1, 0}); }

void queue_expire(Mount* m, uint64_t parent, const std::string& name) {
  push(m, Inval{Inval::EXPIRE, parent, name, 0, 0});
}

// The Home a top-level name belongs to: `<role>`, `<role>@<branch>`, `<role>:<checkpoint or commit>`.
static std::string role_of(const std::string& top) { return top.substr(0, top.find_first_of("@:")); }

void invalidate_names(Mount* m, const std::set<std::string>& names, bool all, double barrier) {
  std::lock_guard<std::mutex> lock(m->mu);
  m->invalidations++;
  m->mutations++;
  std::string path, top;
  for (auto& [id, node] : m->nodes) {
    Node* n = node.get();
    // The root's listing is asked every time (never cached) and its attributes never change: nothing to tell.
    if (id == FUSE_ROOT_ID) continue;
    if (!path_of(m, n, path, &top) || (!all && !names.count(role_of(top)))) continue;
    drop(n);
    if (n->nlookup == 0) continue;  // the kernel holds nothing of a node it forgot
    // Attributes, pages (and a directory's cached listing) go; names only expire, so a directory someone is
    // in, or one with a bind mounted on it, stays where it is until it is looked up again.
    push(m, Inval{Inval::INODE, id, std::string(), 0, 0});
    for (auto& [parent, name] : n->names) push(m, Inval{Inval::EXPIRE, parent, name, 0, 0});
  }
  push(m, Inval{Inval::BARRIER, 0, std::string(), 0, barrier});
}

static void run(Mount* m) {
  for (;;) {
    Inval item;
    bool stopping;
    {
      std::unique_lock<std::mutex> lock(m->qmu);
      m->qcv.wait(lock, [m] { return m->qstop || !m->queue.empty(); });
      if (m->queue.empty()) return;
      item = std::move(m->queue.front());
      m->queue.pop_front();
      stopping = m->qstop;
    }
    // Before INIT, or once the session is gone, there is nothing to tell (and nothing cached).
    // While paused for a hand-over, requests an invalidation could wait for are not read: the successor
    // invalidates everything once it has taken over.
    bool live = m->initialized.load() && !stopping && !m->paused.load();
    switch (item.kind) {
      case Inval::INODE:
        if (live) fuse_lowlevel_notify_inval_inode(m->se, item.ino, item.off, 0);
        break;
      case Inval::EXPIRE:
        if (live && fuse_lowlevel_notify_expire_entry(m->se, item.ino, item.name.c_str(), item.name.size(),
                                                      FUSE_LL_EXPIRE_ONLY) == -ENOSYS)
          fuse_lowlevel_notify_inval_entry(m->se, item.ino, item.name.c_str(), item.name.size());
        break;
      case Inval::BARRIER:
        // Fails only once JS let go of the mount: no one waits for the barrier then.
        if (napi_call_threadsafe_function(m->barriers, reinterpret_cast<void*>(static_cast<uintptr_t>(item.barrier)),
                                          napi_tsfn_nonblocking) != napi_ok)
          break;
        break;
    }
  }
}

void start_notifier(Mount* m) { m->notifier = std::thread(run, m); }

void stop_notifier(Mount* m) {
  {
    std::lock_guard<std::mutex> lock(m->qmu);
    m->qstop = true;
  }
  m->qcv.notify_all();
  if (m->notifier.joinable()) m->notifier.join();
}

}  // namespace nas

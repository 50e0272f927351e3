// An informer-style cache of one kind of Kubernetes object, kept current by LIST + WATCH.
//
// - LIST, paged (`pageSize`, WatchApi::ListPages): each page is projected into the new cache and
//   freed before the next one is fetched, so at most one page of whole objects is held (an
//   expired continue token starts the list over); the cache is swapped in once the last page is
//   in. Then WATCH from the list's resourceVersion; after a normal end of a watch it
//   resumes from the last resourceVersion seen (bookmarks move it); on 410 Gone (HTTP 410 or an
//   ERROR event with code 410) it lists again and reconciles the cache with the new list (adds,
//   updates for changed resourceVersions, deletes for objects that are gone); other errors back
//   off exponentially with jitter (800 ms .. 30 s, as client-go's reflector).
// - Each object is stored projected (only the fields a Projection keeps) in its own exactly sized
//   memory pool, immutable and shared: readers get shared_ptrs and never copy.
// - Handlers run on the informer's threads, never two at once, after the cache is updated, with
//   no lock of the cache held (they may read the informer, but must not destroy it). They should
//   be quick (enqueue a key): a slow handler delays the watch.
// - Runs on its own thread from construction; the destructor stops it (cancelling the watch at
//   once; an in-flight LIST stops after its current page, bounded by the client's timeouts) and
//   joins. No exception leaves the thread: a throwing handler is logged and ignored.
// - Thread safety: the readers (HasSynced, WaitForSync, Get, List, ListOwnedBy, Size,
//   ApproxBytes, ResourceVersion, GetStats) from any thread; only the informer's thread writes
//   the cache. `mu_` (shared) guards the objects and the resourceVersion, `syncMu_` the synced
//   flag, `statsMu_` the stats; `dispatchMu_` serializes the handlers of the informer's thread
//   and of the resync thread. An Object is immutable: read it from any thread, even after the
//   cache has dropped it. onResync works from a snapshot of the cache, so its object may be older
//   than one onUpdate has already delivered.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "lib/json.h"
#include "lib/label_selector.h"
#include "server/kube/cached_object.h"
#include "server/kube/kube_client.h"
#include "server/kube/projection.h"

namespace iw::kube {

struct InformerHandlers {
  std::function<void(const ObjectPtr&)> onAdd;
  std::function<void(const ObjectPtr& old, const ObjectPtr& now)> onUpdate;
  std::function<void(const ObjectPtr& last)> onDelete;
  std::function<void(const ObjectPtr&)> onResync;  // every object, every resyncPeriod
};

struct InformerOptions {
  std::string name;  // for logs ("pods")
  std::string path;  // collection path, e.g. PodsPath("") for all namespaces
  std::string labelSelector;
  std::string fieldSelector;
  int pageSize = 500;
  Projection projection;                      // empty: keep whole objects
  std::chrono::milliseconds resyncPeriod{0};  // 0: no resync
  std::chrono::seconds watchTimeout{300};     // each watch lasts [t, 2t)
  std::chrono::milliseconds backoffInitial{800};
  std::chrono::milliseconds backoffMax{30000};
  InformerHandlers handlers;
};

class Informer {
 public:
  struct Stats {
    uint64_t lists = 0;  // successful LISTs (the first one included)
    uint64_t listErrors = 0;
    uint64_t watches = 0;  // watch requests made
    uint64_t gone = 0;     // 410s that forced a relist
    uint64_t events = 0;   // ADDED/MODIFIED/DELETED applied
  };

  // Starts listing and watching at once. `api` must outlive the informer.
  Informer(WatchApi& api, InformerOptions options);
  ~Informer();
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  // Whether the first LIST has been applied.
  bool HasSynced() const;
  // Waits up to `timeout` for the first LIST; returns HasSynced().
  bool WaitForSync(std::chrono::milliseconds timeout) const;

  ObjectPtr Get(std::string_view ns, std::string_view name) const;
  std::vector<ObjectPtr> List() const;  // every object, ordered by namespace/name
  // Objects of namespace `ns` ("" = all) whose labels match `selector`.
  std::vector<ObjectPtr> List(std::string_view ns, const LabelSelector& selector) const;
  // Objects of namespace `ns` ("" = all) with an ownerReference of uid `ownerUid`.
  std::vector<ObjectPtr> ListOwnedBy(std::string_view ns, std::string_view ownerUid) const;
  size_t Size() const;
  // Bytes held by the cached objects and their index entries.
  size_t ApproxBytes() const;
  // The resourceVersion the cache reflects (last list, event or bookmark).
  std::string ResourceVersion() const;
  Stats GetStats() const;

 private:
  void Run(std::stop_token stop);
  void RunResync(std::stop_token stop);
  bool ListOnce(std::stop_token stop);  // false on failure or stop
  void Apply(WatchEvent& event);
  ObjectPtr Project(const json::Value& full) const;
  template <class Fn>
  void Dispatch(Fn&& fn);

  WatchApi& api_;
  const InformerOptions options_;

  mutable std::shared_mutex mu_;
  std::map<std::string, ObjectPtr, std::less<>> objects_;  // "namespace/name"
  std::string resourceVersion_;
  bool synced_ = false;
  mutable std::mutex syncMu_;
  mutable std::condition_variable syncCv_;

  std::mutex dispatchMu_;  // handlers never run concurrently

  mutable std::mutex statsMu_;
  Stats stats_;

  // Last: they start after everything above is constructed, and are stopped first.
  std::jthread resync_;
  std::jthread thread_;
};

}  // namespace iw::kube

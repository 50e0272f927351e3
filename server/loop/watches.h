// The loop's watches (controller-runtime's sources and event handlers): four informers
// (server/kube/informer) that cache every Deployment and ReplicaSet, the opted-in StatefulSets and
// the opted-in pods (label inplace-webhook.io/enabled=true), each trimmed to the fields the loop
// reads (server/loop/loop_projections), and the work each of their events asks of the loop
// (server/loop/loop), handed to the loop through a callback:
// - a Deployment with an in-place update (started, running, or just ended): that Deployment;
// - a ReplicaSet with our annotations (copies to clean) or of a Deployment with an update: that
//   Deployment;
// - a pod of a ReplicaSet (pod → ReplicaSet → Deployment through controller ownerReferences, in
//   the caches) of a Deployment with an update: that Deployment; a live Normal pod that declares
//   the readiness gate and has no gate condition yet: its gate; a pod that completed its update on
//   the kubelet's report (no write of ours marks it): `podDone`, for the completion metric;
// - a StatefulSet with an in-place update (started, running, or just ended), or a pod it controls
//   while it has one: that StatefulSet (planned from API reads, DESIGN.md §4.8).
// Any other event of a Deployment, of a ReplicaSet or pod it owns asks for that Deployment only if
// its pass waits for the caches to show the loop's own writes (kDeploymentIfWaiting): the event
// may be the one awaited, after the update ended too (its last writes, the copies' cleanup).
// Each after the batch delay, so a burst of events makes one unit of work.
//
// Construction starts the informers in that order (Deployments, ReplicaSets, StatefulSets, pods): a
// handler only reads the informers constructed before its own, and the uid indexes. Destruction
// stops them in the reverse order (joining their threads), before anything their handlers use.
// Synced() waits for the first three kinds only: a loop whose RBAC lacks StatefulSets (a chart
// older than the binary) still runs Deployments while that informer retries.
//
// Thread safety: the handlers run on the informers' threads; they read the caches, the uid index
// (`uidMu_`) and call `queue`, which must be thread-safe. The readers (Cache, the informers,
// ReplicaSetByUid, Lists, Synced) and Resync from any thread. Construction and destruction from
// one thread, while no other uses the object.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "server/kube/informer.h"
#include "server/loop/expectations.h"

namespace iw::loop {

// The loop's lanes (DESIGN.md §4.3.1): what a queued key asks for.
enum class WorkKind {
  kDeployment,  // "namespace/name" of a Deployment: a pass over it
  // A pass over that Deployment only if its last one waits for the caches (Loop::Queue decides).
  kDeploymentIfWaiting,
  kPodGate,      // "namespace/name" of a pod: set its readiness gate
  kStatefulSet,  // "namespace/name" of a StatefulSet: a pass over it
};

struct WatchesOptions {
  std::string namespaceName;                 // "" = every namespace
  std::chrono::milliseconds batchDelay{50};  // an event's work is due this long after it
  std::chrono::seconds watchTimeout{300};    // each informer watch lasts [t, 2t)
};

// Whether a cached Deployment carries an in-place update (the in-progress annotation); false for
// nullptr.
bool HasUpdateInProgress(const kube::ObjectPtr& deployment);

class Watches {
 public:
  // Queues `key` of `kind`, due at `due`. Called from the informers' threads and from Resync's
  // caller.
  using Queue = std::function<void(WorkKind kind, std::string key,
                                   std::chrono::steady_clock::time_point due)>;

  // A pod labelled Normal at its write completed on the kubelet's report
  // (pod_update::CompletedOnReport), `seconds` after the write. Called from the pod informer's
  // thread.
  using PodDone = std::function<void(double seconds)>;

  // Starts the three informers through `api`, which must outlive the object. `podDone` may be
  // empty.
  Watches(kube::WatchApi& api, WatchesOptions options, Queue queue, PodDone podDone = {});
  ~Watches();  // stops the informers, pods first
  Watches(const Watches&) = delete;
  Watches& operator=(const Watches&) = delete;

  const kube::Informer& deployments() const { return *deployments_; }
  const kube::Informer& replicaSets() const { return *replicaSets_; }
  const kube::Informer& pods() const { return *pods_; }
  const kube::Informer& statefulSets() const { return *statefulSets_; }
  const kube::Informer* Cache(CacheKind kind) const;

  // The cached ReplicaSet of uid `uid` (cached pods keep only their owner's uid); nullptr when
  // none.
  kube::ObjectPtr ReplicaSetByUid(std::string_view uid) const;
  // The LISTs made by the informers (a relist changes it).
  uint64_t Lists() const;
  // Deployments, ReplicaSets and pods listed (StatefulSets need not be).
  bool Synced() const;

  // The safety resync: queues every in-progress Deployment and StatefulSet at once, and what each
  // cached ReplicaSet and pod would queue on an event.
  void Resync() const;

 private:
  // Informer handlers: map a change to the work it asks for.
  void OnDeployment(const kube::ObjectPtr& old, const kube::ObjectPtr& now) const;
  void OnReplicaSet(const kube::ObjectPtr& rs) const;
  void OnStatefulSet(const kube::ObjectPtr& old, const kube::ObjectPtr& now) const;
  void OnPod(const kube::ObjectPtr& pod) const;
  // Keeps a uid index: `o` is in its cache (`present`) or has left it.
  using UidIndex = std::map<std::string, std::pair<std::string, std::string>, std::less<>>;
  void Index(UidIndex& index, const kube::ObjectPtr& o, bool present);
  // Informer handlers that keep `index` and then call `then(old, now)` (old nullptr on an add, now
  // nullptr on a delete).
  using Change = std::function<void(const kube::ObjectPtr& old, const kube::ObjectPtr& now)>;
  kube::InformerHandlers Indexed(UidIndex& index, const Change& then);
  // The cached object of uid `uid` in `cache` through `index`; nullptr when none.
  kube::ObjectPtr ByUid(const UidIndex& index, const kube::Informer& cache,
                        std::string_view uid) const;

  const WatchesOptions options_;
  const Queue queue_;
  const PodDone podDone_;

  // ReplicaSet and StatefulSet uid → {namespace, name}. Written by their informers' handlers, read
  // by the pod informer's and the loop's threads.
  mutable std::mutex uidMu_;
  UidIndex rsByUid_, stsByUid_;

  // Last: started after everything above, in this order; the destructor stops them in reverse.
  std::unique_ptr<kube::Informer> deployments_;
  std::unique_ptr<kube::Informer> replicaSets_;
  std::unique_ptr<kube::Informer> statefulSets_;
  std::unique_ptr<kube::Informer> pods_;
};

}  // namespace iw::loop

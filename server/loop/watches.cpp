#include "server/loop/watches.h"

#include <utility>

#include "hooks/keys.h"
#include "hooks/kube_api.h"
#include "hooks/pod_update.h"
#include "lib/kube_objects.h"
#include "server/loop/loop_projections.h"
#include "server/process/log.h"

namespace iw::loop {

namespace {

using Steady = std::chrono::steady_clock;
using json::Value;

bool HasAnnotation(const Value& o, std::string_view key) {
  return kube::AnnotationOf(o, key).has_value();
}

}  // namespace

bool HasUpdateInProgress(const kube::ObjectPtr& deployment) {
  return deployment && HasAnnotation(deployment->Value(), keys::kInProgressAnnotation);
}

Watches::Watches(kube::WatchApi& api, WatchesOptions options, Queue queue, PodDone podDone)
    : options_(std::move(options)), queue_(std::move(queue)), podDone_(std::move(podDone)) {
  const std::string& ns = options_.namespaceName;
  {
    kube::InformerOptions opts;
    opts.name = "deployments";
    opts.path = kube::DeploymentsPath(ns);
    opts.projection = DeploymentProjection();
    opts.watchTimeout = options_.watchTimeout;
    opts.handlers.onAdd = [this](const kube::ObjectPtr& o) { OnDeployment(nullptr, o); };
    opts.handlers.onUpdate = [this](const kube::ObjectPtr& old, const kube::ObjectPtr& now) {
      OnDeployment(old, now);
    };
    opts.handlers.onDelete = [this](const kube::ObjectPtr& o) { OnDeployment(o, nullptr); };
    deployments_ = std::make_unique<kube::Informer>(api, std::move(opts));
  }
  {
    kube::InformerOptions opts;
    opts.name = "replicasets";
    opts.path = kube::ReplicaSetsPath(ns);
    opts.projection = ReplicaSetProjection();
    opts.watchTimeout = options_.watchTimeout;
    opts.handlers =
        Indexed(rsByUid_, [this](const kube::ObjectPtr& old, const kube::ObjectPtr& now) {
          OnReplicaSet(now ? now : old);
        });
    replicaSets_ = std::make_unique<kube::Informer>(api, std::move(opts));
  }
  {
    kube::InformerOptions opts;
    opts.name = "statefulsets";
    opts.path = kube::StatefulSetsPath(ns);
    opts.labelSelector = std::string(keys::kEnabledLabel) + "=" + std::string(keys::kTrue);
    opts.projection = StatefulSetProjection();
    opts.watchTimeout = options_.watchTimeout;
    opts.handlers =
        Indexed(stsByUid_, [this](const kube::ObjectPtr& old, const kube::ObjectPtr& now) {
          OnStatefulSet(old, now);
        });
    statefulSets_ = std::make_unique<kube::Informer>(api, std::move(opts));
  }
  {
    kube::InformerOptions opts;
    opts.name = "pods";
    opts.path = kube::PodsPath(ns);
    opts.labelSelector = std::string(keys::kEnabledLabel) + "=" + std::string(keys::kTrue);
    opts.projection = PodProjection();
    opts.watchTimeout = options_.watchTimeout;
    auto on = [this](const kube::ObjectPtr& o) { OnPod(o); };
    opts.handlers.onAdd = on;
    opts.handlers.onUpdate = [this, on](const kube::ObjectPtr& old, const kube::ObjectPtr& now) {
      // Only a pod whose write left it Normal completes on the kubelet's report (one text search
      // before any view is made: every pod event passes here).
      const std::optional<std::string_view> record =
          kube::AnnotationOf(now->Value(), keys::kUpdateStateAnnotation);
      if (podDone_ && old != nullptr && record && pod_update::MayCompleteOnReport(*record)) {
        const StatusOr<kube::Pod> before = kube::Pod::From(old->Value(), "pod");
        const StatusOr<kube::Pod> after = kube::Pod::From(now->Value(), "pod");
        if (!before.ok() || !after.ok()) return on(now);
        if (std::optional<double> seconds =
                pod_update::CompletedOnReport(*before, *after, std::chrono::system_clock::now())) {
          podDone_(*seconds);
        }
      }
      on(now);
    };
    opts.handlers.onDelete = on;
    pods_ = std::make_unique<kube::Informer>(api, std::move(opts));
  }
}

Watches::~Watches() {
  pods_.reset();
  statefulSets_.reset();
  replicaSets_.reset();
  deployments_.reset();
}

const kube::Informer* Watches::Cache(CacheKind kind) const {
  switch (kind) {
    case CacheKind::kDeployments:
      return deployments_.get();
    case CacheKind::kReplicaSets:
      return replicaSets_.get();
    case CacheKind::kPods:
      return pods_.get();
  }
  return nullptr;
}

// --- the uid indexes --------------------------------------------------------------------------

kube::InformerHandlers Watches::Indexed(UidIndex& index, const Change& then) {
  kube::InformerHandlers h;
  h.onAdd = [this, &index, then](const kube::ObjectPtr& o) {
    Index(index, o, true);
    then(nullptr, o);
  };
  h.onUpdate = [this, &index, then](const kube::ObjectPtr& old, const kube::ObjectPtr& now) {
    if (old->Uid() != now->Uid()) Index(index, old, false);
    Index(index, now, true);
    then(old, now);
  };
  h.onDelete = [this, &index, then](const kube::ObjectPtr& o) {
    Index(index, o, false);
    then(o, nullptr);
  };
  return h;
}

void Watches::Index(UidIndex& index, const kube::ObjectPtr& o, bool present) {
  std::lock_guard lock(uidMu_);
  if (present) {
    index[std::string(o->Uid())] = {std::string(o->Namespace()), std::string(o->Name())};
  } else {
    index.erase(std::string(o->Uid()));
  }
}

kube::ObjectPtr Watches::ByUid(const UidIndex& index, const kube::Informer& cache,
                               std::string_view uid) const {
  std::pair<std::string, std::string> at;  // namespace, name
  {
    std::lock_guard lock(uidMu_);
    auto it = index.find(uid);
    if (it == index.end()) return nullptr;
    at = it->second;
  }
  kube::ObjectPtr o = cache.Get(at.first, at.second);
  return o && o->Uid() == uid ? o : nullptr;
}

kube::ObjectPtr Watches::ReplicaSetByUid(std::string_view uid) const {
  return ByUid(rsByUid_, *replicaSets_, uid);
}

uint64_t Watches::Lists() const {
  return deployments_->GetStats().lists + replicaSets_->GetStats().lists +
         statefulSets_->GetStats().lists + pods_->GetStats().lists;
}

bool Watches::Synced() const {
  return deployments_->HasSynced() && replicaSets_->HasSynced() && pods_->HasSynced();
}

// --- informer handlers ------------------------------------------------------------------------

void Watches::OnDeployment(const kube::ObjectPtr& old, const kube::ObjectPtr& now) const {
  // Started, running, or just ended (the ReplicaSet copies of our annotations are cleaned then).
  const bool update = HasUpdateInProgress(now) || HasUpdateInProgress(old);
  const kube::ObjectPtr& o = now ? now : old;
  queue_(update ? WorkKind::kDeployment : WorkKind::kDeploymentIfWaiting,
         kube::ObjectKey(o->Namespace(), o->Name()), Steady::now() + options_.batchDelay);
}

void Watches::OnReplicaSet(const kube::ObjectPtr& rs) const {
  std::string_view owner = kube::ControllerNameOf(rs->Value(), "Deployment");
  if (owner.empty()) return;
  const Value& v = rs->Value();
  bool wanted = HasAnnotation(v, keys::kInProgressAnnotation) ||
                HasAnnotation(v, keys::kAbortAnnotation);  // copies to clean, maybe
  if (!wanted) wanted = HasUpdateInProgress(deployments_->Get(rs->Namespace(), owner));
  queue_(wanted ? WorkKind::kDeployment : WorkKind::kDeploymentIfWaiting,
         kube::ObjectKey(rs->Namespace(), owner), Steady::now() + options_.batchDelay);
}

void Watches::OnStatefulSet(const kube::ObjectPtr& old, const kube::ObjectPtr& now) const {
  if (!HasUpdateInProgress(now) && !HasUpdateInProgress(old)) return;
  const kube::ObjectPtr& o = now ? now : old;
  queue_(WorkKind::kStatefulSet, kube::ObjectKey(o->Namespace(), o->Name()),
         Steady::now() + options_.batchDelay);
}

void Watches::OnPod(const kube::ObjectPtr& pod) const {
  const Value& v = pod->Value();
  StatusOr<kube::Pod> view = kube::Pod::From(v, "pod");
  if (!view.ok()) {
    log::Warn("in-place loop: pod ignored",
              {{"pod", kube::ObjectKey(pod->Namespace(), pod->Name())},
               {"error", view.status().message()}});
    return;
  }
  const std::string_view ownerUid = view->controllerUid();
  if (kube::ObjectPtr rs = ownerUid.empty() ? nullptr : ReplicaSetByUid(ownerUid)) {
    std::string_view owner = kube::ControllerNameOf(rs->Value(), "Deployment");
    if (!owner.empty()) {
      queue_(HasUpdateInProgress(deployments_->Get(rs->Namespace(), owner))
                 ? WorkKind::kDeployment
                 : WorkKind::kDeploymentIfWaiting,
             kube::ObjectKey(rs->Namespace(), owner), Steady::now() + options_.batchDelay);
    }
  } else if (kube::ObjectPtr set =
                 ownerUid.empty() ? nullptr : ByUid(stsByUid_, *statefulSets_, ownerUid)) {
    if (HasUpdateInProgress(set)) {
      queue_(WorkKind::kStatefulSet, kube::ObjectKey(set->Namespace(), set->Name()),
             Steady::now() + options_.batchDelay);
    }
  }
  if (view->live() && pod_update::HasGate(*view) && !pod_update::GateStatus(*view).has_value() &&
      pod_update::StateOf(*view) == pod_update::PodState::kNormal) {
    queue_(WorkKind::kPodGate, kube::ObjectKey(pod->Namespace(), pod->Name()),
           Steady::now() + options_.batchDelay);
  }
}

void Watches::Resync() const {
  const auto now = Steady::now();
  for (const kube::ObjectPtr& d : deployments_->List()) {
    if (HasUpdateInProgress(d))
      queue_(WorkKind::kDeployment, kube::ObjectKey(d->Namespace(), d->Name()), now);
  }
  for (const kube::ObjectPtr& s : statefulSets_->List()) {
    if (HasUpdateInProgress(s))
      queue_(WorkKind::kStatefulSet, kube::ObjectKey(s->Namespace(), s->Name()), now);
  }
  for (const kube::ObjectPtr& rs : replicaSets_->List()) OnReplicaSet(rs);
  for (const kube::ObjectPtr& pod : pods_->List()) OnPod(pod);
}

}  // namespace iw::loop

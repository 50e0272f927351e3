// An in-memory kube::Api for unit tests, with the API server semantics the loop relies on:
// resourceVersion preconditions (409 Conflict), JSON merge / strategic merge / JSON patches, the
// status subresource (pods/status writes only status, the main resource ignores status), pod
// update validation (only container images may change in spec), Deployment generation bumps,
// AlreadyExists on Create, label selectors on List. Plus a fake kubelet and a fake Deployment
// controller reduced to what the loop observes. Thread-safe.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "hooks/kube_api.h"
#include "lib/json.h"

namespace iw::fake {

class FakeApi : public kube::Api {
 public:
  kube::Result Get(std::string_view path) override;
  kube::Result List(std::string_view path, const kube::ListOptions& options) override;
  kube::Result Create(std::string_view path, const json::Value& object) override;
  kube::Result Update(std::string_view path, const json::Value& object) override;
  kube::Result Patch(std::string_view path, kube::PatchType type, std::string_view body) override;
  kube::Result Delete(std::string_view path) override;

  // Stores an object given as JSON text under `collection` (e.g. kube::PodsPath("ns")), filling
  // uid, resourceVersion, creationTimestamp and generation when absent. Returns its path.
  std::string Put(std::string_view collection, std::string_view objectJson);
  // A copy of the stored object (null when absent).
  json::Document Object(std::string_view path) const;
  // Paths of stored objects whose collection is `collection` (e.g. all pods of a namespace).
  std::vector<std::string> Paths(std::string_view collection) const;
  // The last resourceVersion given out: it changes with every change of any object (a deletion
  // too), so a watch double need not list while it stays the same.
  long long Revision() const;
  // Changes a stored object in place as another client would: bumps its resourceVersion, unless
  // nothing changed (the API server keeps the object and its version then; the fake kubelet and
  // Deployment controller, called in a test's every tick, rely on it as the real ones do).
  void Mutate(std::string_view path, const std::function<void(json::Document&)>& change);

  // The next `times` writes to exactly `path` answer `code` (e.g. 409) without effect, with
  // `message` as the API server's.
  void FailNext(std::string path, int code, int times = 1,
                std::string message = "injected failure");
  // "VERB path" of every successful write, in order.
  std::vector<std::string> Writes() const;
  size_t CountWrites(std::string_view verbAndPathPrefix) const;

 private:
  kube::Result Error(int code, std::string reason, std::string message) const;
  bool Injected(const std::string& path, kube::Result& out);
  // Create with mu_ held; `record` adds it to the writes.
  kube::Result CreateLocked(std::string_view path, const json::Value& object, bool record);
  // Validates and stores `next` as the new version of `path` (main resource or status).
  kube::Result Store(const std::string& path, json::Document next, bool statusOnly);

  mutable std::mutex mu_;
  std::map<std::string, json::Document, std::less<>> objects_;
  std::map<std::string, std::vector<std::pair<int, std::string>>, std::less<>> failures_;
  std::vector<std::string> writes_;
  long long nextVersion_ = 1000;
  long long nextUid_ = 1;
};

// RFC 7386 merge and a strategic merge (lists of containers/volumes/env merge by name, conditions
// by type, readinessGates by conditionType; other lists are replaced), in place.
void MergePatch(json::Value& target, const json::Value& patch, json::Allocator& alloc);
void StrategicMergePatch(json::Value& target, const json::Value& patch, json::Allocator& alloc);
// Whether `labels` (an object) matches a selector string `a=b,c!=d,e in (f,g),h notin (i),j,!k`.
bool MatchesSelector(const json::Value* labels, std::string_view selector);

// The image ID kubelet would report for `image`: a digest derived from the normalised reference,
// unless `digests` names one for it (a retag: two references, one digest).
std::string ImageIdFor(std::string_view image, const std::map<std::string, std::string>& digests);

// Kubelet for every pod in `ns`: creates container statuses for new pods, restarts containers
// whose spec image differs from the image they run (new containerID, imageID, restartCount+1),
// and recomputes ContainersReady and Ready (readiness gates included). `holdRestart` names
// containers (pod/container) kubelet does not restart yet.
void KubeletSync(FakeApi& api, std::string_view ns,
                 const std::map<std::string, std::string>& digests = {},
                 const std::vector<std::string>& holdRestart = {});

// The Deployment controller for one Deployment, as far as the loop can see it: the new
// ReplicaSet is the oldest one whose template equals the Deployment's ignoring pod-template-hash;
// status.observedGeneration/replicas/updatedReplicas; Deployment annotations copied onto the new
// ReplicaSet. Unpaused with no matching ReplicaSet, it would start a native rollout: it returns
// false then (a test failure for an in-place update) instead of creating one.
bool ControllerSync(FakeApi& api, std::string_view ns, std::string_view deployment);

// A pod of ReplicaSet `rs` made from its current template, as the ReplicaSet controller would.
std::string AddPodFromReplicaSet(FakeApi& api, std::string_view ns, std::string_view rs,
                                 std::string_view podName);

}  // namespace iw::fake

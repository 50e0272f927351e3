// The update-state annotation (DESIGN.md §2, §8.2): what the loop's pod write recorded of an
// in-place update, and whether the kubelet's report shows that update done. Pure.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "lib/json.h"
#include "lib/kube_objects.h"

namespace iw::pod_update {

// The `update-state` annotation, Kruise's inplace-update-state shape plus fields of our own:
// {"revision":"<to>","updateTimestamp":"<RFC3339>","lastContainerStatuses":{"c":{"imageID":"..",
//  "containerID":"..","restartCount":N}},"images":{"c":{"asked":"..","got":"..","before":".."}},
//  "changedLabels":["k"],"changedAnnotations":["a"],"resizedContainers":["c"]}
// The lists name every template key this update run wrote to the pod (and every container it
// resized), so that a re-targeted update can put back a key the newest target no longer changes.
struct ContainerRecord {
  std::string imageID;
  std::string containerID;
  long long restartCount = 0;
  bool operator==(const ContainerRecord&) const = default;
};
// Per container whose image the write set: the image the loop asked for (the target template's),
// the one the API server stored ("" until the loop has seen it; recorded only when it differs:
// another mutating webhook on pods rewrote it, a registry mirror or a digest pin), and the spec's
// image before the write. The stored reference is the target of that container (DESIGN.md §8.2).
struct ImageRecord {
  std::string asked;
  std::string got;
  std::string before;
  bool operator==(const ImageRecord&) const = default;
};
struct UpdateState {
  std::string revision;
  // The write that made this record left the state label Normal (no later write would return it:
  // no resize, no post-update hook, the gate not False): the pod reads as Updating until the
  // kubelet's report completes this record (StateOf, DESIGN.md §4.3). Serialized as
  // "completesOnReport":true; absent in records that a later write returns.
  bool completesOnReport = false;
  std::string updateTimestamp;
  std::map<std::string, ContainerRecord> lastContainerStatuses;
  std::map<std::string, ImageRecord> images;
  std::set<std::string> changedLabels;
  std::set<std::string> changedAnnotations;
  std::set<std::string> resizedContainers;
  bool operator==(const UpdateState&) const = default;
};
std::optional<UpdateState> ParseUpdateState(std::string_view text);
std::string SerializeUpdateState(const UpdateState& state);
// A cheap test, without parsing, that `text` may be a record with completesOnReport set: true for
// every such record SerializeUpdateState writes (it writes the flag as `"completesOnReport":true`),
// false for every record it writes without it. For hot paths that skip the records that cannot
// complete on the kubelet's report before any parse.
bool MayCompleteOnReport(std::string_view text);
// The pod's update-state annotation; nullopt when absent or not of that shape.
std::optional<UpdateState> ReadUpdateState(const kube::ObjectView& pod);

// Whether every container recorded in `state` runs its new spec (DESIGN.md §8.2), from the
// kubelet's report alone: no timestamp of the node is ever compared with the loop's clock (a node
// whose clock is behind would never complete). The status must be one the kubelet computed from
// the written spec where it says so (status.observedGeneration >= metadata.generation; kubelets
// report it from 1.34), and each recorded container must be a new container (containerID not the
// recorded one). Then it is done when the image it reports is the spec's once normalised, or the
// spec pins the digest it runs; or, for a container that ran at the write, when it runs other
// bits than then (imageID changed), or the same bits (a retag, `tag@sha256:` of the same image)
// in the container that replaced the recorded one (lastState.terminated.containerID is the
// recorded containerID, or restartCount above the recorded one): containerd reports the image
// record's first tag and digest, not the reference in the spec, and the kubelet restarts a
// container whose spec changed. A container that had not started at the write (no recorded
// imageID) is done only by the name or the pinned digest. A recorded container without a status
// is not done. Records written by earlier versions carry every field this reads. What no report
// tells apart from the restart for the write: a crash restart of the recorded container that the
// kubelet made before it saw the write and reported after it (DESIGN.md §8.2).
// A container whose image the API server stored as another reference than the one the loop asked
// for (ImageRecord) completes on that stored reference: by the rules above, except that a stored
// reference with a digest (`name@sha256:..`) needs the kubelet's imageID to carry that digest, and
// a container whose spec the write left as it was (the stored image is the one before) needs no
// restart.
bool UpdateCompleted(const kube::Pod& pod, const UpdateState& state);

}  // namespace iw::pod_update

// What the loop's caches keep of each object (kube::Projection, applied by the informers as
// objects arrive), and whether the pod cache can stand in for an API read of a Deployment's pods.
// Pure functions of their input.
#pragma once

#include <vector>

#include "lib/json.h"
#include "server/kube/informer.h"

namespace iw::loop {

// The projections of the loop's caches (what each keeps is what hooks/rollout_plan reads):
// Deployments without managedFields and the last-applied annotation; ReplicaSets likewise and
// without status, and without their template when they have no replicas and their template is
// not opted in (history that can never be the base or the target of an update); pods reduced to
// metadata (name, namespace, uid, resourceVersion, generation, deletionTimestamp, labels,
// annotations, finalizers, ownerReferences uid/controller), container names, images and
// resources, the node name, readiness gates, the phase only when Succeeded or Failed,
// status.observedGeneration, the deprecated status.resize, the conditions Ready, those of the
// readiness gates (type, status; lastTransitionTime of Ready's and our gate's) and the kubelet's
// resize conditions (type, status, reason, message), and container statuses (name, imageID,
// containerID, restartCount, resources, state.running; the image,
// lastState.terminated.containerID and state.waiting's reason and message (clipped) too while the
// pod is Updating, the only state whose decision reads them; the image and
// lastState.terminated.containerID of the containers a record completed on the kubelet's report
// names, once it is done, so that the cached pod reads as Normal as the stored one does).
kube::Projection DeploymentProjection();
kube::Projection ReplicaSetProjection();
kube::Projection PodProjection();
// StatefulSets: what says which to plan (name, namespace, uid, resourceVersion and the
// in-progress annotation); the loop reads the rest through the API when it plans one.
kube::Projection StatefulSetProjection();

// Whether the pod cache (opted-in pods only) holds every pod an update of `deployment` can
// touch: its template and the template of every ReplicaSet with replicas carry the opt-in label,
// and at least one ReplicaSet has replicas. `replicaSets` are those it controls.
bool PodsCacheable(const json::Value& deployment,
                   const std::vector<const json::Value*>& replicaSets);

}  // namespace iw::loop

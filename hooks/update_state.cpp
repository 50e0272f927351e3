#include "hooks/update_state.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "hooks/keys.h"
#include "lib/image_ref.h"
#include "lib/kube_objects.h"

namespace iw::pod_update {

namespace {

using json::Value;

// An imageID changed: compared by digest when both carry one (the runtime may report the same
// image as "docker-pullable://x@sha256:.." or "sha256:.."), else as text.
bool ImageIdChanged(std::string_view before, std::string_view now) {
  if (now.empty()) return false;
  std::string_view a = image_ref::DigestOf(before);
  std::string_view b = image_ref::DigestOf(now);
  if (!a.empty() && !b.empty()) return a != b;
  return before != now;
}

// The container in status `st` replaced the one recorded at the write, as the kubelet reports
// it: the container it replaced (lastState.terminated.containerID) is the recorded one, or the
// kubelet counted a restart since (restartCount counts every restart of the container).
bool ReplacedRecorded(const kube::ContainerStatus& st, const ContainerRecord& rec) {
  if (!rec.containerID.empty() && st.lastTerminatedContainerID() == rec.containerID) return true;
  return st.restartCount().value_or(-1) > rec.restartCount;
}

}  // namespace

std::optional<UpdateState> ParseUpdateState(std::string_view text) {
  json::Document doc;
  if (!json::ParseUntrusted(text, doc).ok() || !doc.IsObject()) return std::nullopt;
  const Value* revision = json::Find(&doc, "revision");
  if (revision == nullptr || !revision->IsString()) return std::nullopt;
  UpdateState s;
  s.revision = std::string(json::View(*revision));
  const Value* onReport = json::Find(&doc, "completesOnReport");
  s.completesOnReport = onReport != nullptr && onReport->IsBool() && onReport->GetBool();
  s.updateTimestamp = std::string(json::StringOr(&doc, "updateTimestamp"));
  const Value* last = json::Find(&doc, "lastContainerStatuses");
  if (last != nullptr && last->IsObject()) {  // Kruise may write null
    for (const auto& m : last->GetObject()) {
      ContainerRecord rec;
      rec.imageID = std::string(json::StringOr(&m.value, "imageID"));
      rec.containerID = std::string(json::StringOr(&m.value, "containerID"));
      const Value* rc = json::Find(&m.value, "restartCount");
      if (rc != nullptr && rc->IsInt64()) rec.restartCount = rc->GetInt64();
      s.lastContainerStatuses[std::string(json::View(m.name))] = rec;
    }
  }
  const Value* images = json::Find(&doc, "images");
  if (images != nullptr && images->IsObject()) {
    for (const auto& m : images->GetObject()) {
      ImageRecord rec;
      rec.asked = std::string(json::StringOr(&m.value, "asked"));
      rec.got = std::string(json::StringOr(&m.value, "got"));
      rec.before = std::string(json::StringOr(&m.value, "before"));
      if (!rec.asked.empty()) s.images[std::string(json::View(m.name))] = rec;
    }
  }
  for (auto [field, out] : {std::pair{"changedLabels", &s.changedLabels},
                            std::pair{"changedAnnotations", &s.changedAnnotations},
                            std::pair{"resizedContainers", &s.resizedContainers}}) {
    const Value* list = json::Find(&doc, field);
    if (list == nullptr || !list->IsArray()) continue;
    for (const auto& e : list->GetArray()) {
      if (e.IsString()) out->insert(std::string(json::View(e)));
    }
  }
  return s;
}

std::string SerializeUpdateState(const UpdateState& state) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  auto str = [&w](const std::string& s) {
    w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
  };
  w.StartObject();
  w.Key("revision");
  str(state.revision);
  w.Key("updateTimestamp");
  str(state.updateTimestamp);
  w.Key("lastContainerStatuses");
  w.StartObject();
  for (const auto& [name, rec] : state.lastContainerStatuses) {
    str(name);
    w.StartObject();
    w.Key("imageID");
    str(rec.imageID);
    w.Key("containerID");
    str(rec.containerID);
    w.Key("restartCount");
    w.Int64(rec.restartCount);
    w.EndObject();
  }
  w.EndObject();
  if (!state.images.empty()) {
    w.Key("images");
    w.StartObject();
    for (const auto& [name, rec] : state.images) {
      str(name);
      w.StartObject();
      w.Key("asked");
      str(rec.asked);
      if (!rec.got.empty()) {
        w.Key("got");
        str(rec.got);
      }
      w.Key("before");
      str(rec.before);
      w.EndObject();
    }
    w.EndObject();
  }
  for (auto [field, set] : {std::pair{"changedLabels", &state.changedLabels},
                            std::pair{"changedAnnotations", &state.changedAnnotations},
                            std::pair{"resizedContainers", &state.resizedContainers}}) {
    if (set->empty()) continue;
    w.Key(field);
    w.StartArray();
    for (const auto& k : *set) str(k);
    w.EndArray();
  }
  if (state.completesOnReport) {
    w.Key("completesOnReport");
    w.Bool(true);
  }
  w.EndObject();
  return {buf.GetString(), buf.GetSize()};
}

bool MayCompleteOnReport(std::string_view text) {
  return text.find(R"("completesOnReport":true)") != std::string_view::npos;
}

std::optional<UpdateState> ReadUpdateState(const kube::ObjectView& pod) {
  std::optional<std::string_view> text = pod.annotation(keys::kUpdateStateAnnotation);
  if (!text) return std::nullopt;
  return ParseUpdateState(*text);
}

bool UpdateCompleted(const kube::Pod& pod, const UpdateState& state) {
  // A status the kubelet computed before it saw the write proves nothing (KEP-5067: kubelets
  // report observedGeneration from 1.34).
  if (pod.observedGeneration().value_or(pod.generation()) < pod.generation()) return false;
  // Only the kubelet's own report is compared, never its node's clock with ours.
  for (const auto& [name, rec] : state.lastContainerStatuses) {
    const std::optional<kube::ContainerStatus> st = pod.containerStatus(name);
    const std::optional<kube::Container> spec = pod.container(name);
    if (!st || !spec) return false;
    std::string_view image = spec->image();
    std::string_view imageID = st->imageID();
    std::string_view pinned = image_ref::DigestOf(image);
    // Admission stored another reference than the one asked for: that one is the target.
    auto asked = state.images.find(name);
    const bool rewritten = asked != state.images.end() && !asked->second.asked.empty() &&
                           !image_ref::SameImage(asked->second.asked, image);
    if (rewritten && !asked->second.before.empty() &&
        image_ref::SameImage(asked->second.before, image)) {
      // Rewritten to the image the spec had: the write changed nothing the kubelet restarts for.
      if (st->running()) continue;
      return false;
    }
    std::string_view containerID = st->containerID();
    if (containerID.empty() || containerID == rec.containerID) return false;  // not restarted yet
    if (rewritten && !pinned.empty()) {
      // A digest pin we did not ask for: only those bits will do.
      if (pinned == image_ref::DigestOf(imageID)) continue;
      return false;
    }
    if (image_ref::SameImage(st->image(), image)) continue;
    if (!pinned.empty() && pinned == image_ref::DigestOf(imageID)) continue;
    if (rec.imageID.empty()) return false;  // had not started: only the name or digest prove it
    // Other bits than the container seen at the write ran: a restart of that container (a crash)
    // would run the recorded bits.
    if (ImageIdChanged(rec.imageID, imageID)) continue;
    // The same bits (a retag, the same digest under another name): the restart that replaced the
    // container seen at the write is the evidence.
    if (ReplacedRecorded(*st, rec)) continue;
    return false;
  }
  return true;
}

}  // namespace iw::pod_update

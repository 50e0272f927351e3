#include "hooks/lifecycle.h"

#include "hooks/keys.h"
#include "lib/list_text.h"

namespace iw::lifecycle {

namespace {

constexpr std::string_view kLifecycleShape =
    R"({"inPlaceUpdate":{"labelsHandler":{"k":"v"},"finalizersHandler":["f"],)"
    R"("markPodNotReady":true,"timeoutSeconds":600}} (optional "preUpdate"/"postUpdate" with the same hook shape))";
constexpr std::string_view kPolicyShape =
    R"({"annotations":["prefix/*","exact-key"],"gracePeriodSeconds":0})";

// InvalidArgument "<annotation key>: <message>".
Status Fail(std::string_view annotation, std::string_view message) {
  return Status::InvalidArgument(std::string(annotation) + ": " + std::string(message));
}

// A whole number within `long long`, written as a JSON integer (or a float with no fraction).
std::optional<long long> WholeNumber(const json::Value& v) {
  if (v.IsInt64()) return v.GetInt64();
  if (v.IsUint64()) return std::nullopt;  // beyond long long
  if (v.IsDouble()) {
    double d = v.GetDouble();
    if (d >= -9.0e15 && d <= 9.0e15 && static_cast<double>(static_cast<long long>(d)) == d) {
      return static_cast<long long>(d);
    }
  }
  return std::nullopt;
}

Status ParseHook(const json::Value& v, std::string_view field, Hook& out) {
  const std::string_view a = keys::kLifecycleAnnotation;
  const std::string f(field);
  if (!v.IsObject())
    return Fail(a, f + " must be an object; expected " + std::string(kLifecycleShape));
  for (const auto& m : v.GetObject()) {
    const std::string_view name = json::View(m.name);
    const json::Value& value = m.value;
    if (name == "labelsHandler") {
      if (value.IsNull()) continue;
      if (!value.IsObject())
        return Fail(a, f + ".labelsHandler must be an object of string values");
      for (const auto& l : value.GetObject()) {
        if (!l.value.IsString()) {
          return Fail(a, f + ".labelsHandler must be an object of string values");
        }
        out.labelsHandler[std::string(json::View(l.name))] = std::string(json::View(l.value));
      }
    } else if (name == "finalizersHandler") {
      if (value.IsNull()) continue;
      if (!value.IsArray()) return Fail(a, f + ".finalizersHandler must be an array of strings");
      for (const auto& e : value.GetArray()) {
        if (!e.IsString() || e.GetStringLength() == 0) {
          return Fail(a, f + ".finalizersHandler must be an array of non-empty strings");
        }
        out.finalizersHandler.emplace_back(json::View(e));
      }
    } else if (name == "markPodNotReady") {
      if (value.IsNull()) continue;
      if (!value.IsBool()) return Fail(a, f + ".markPodNotReady must be true or false");
      out.markPodNotReady = value.GetBool();
    } else if (name == "timeoutSeconds") {
      if (value.IsNull()) continue;
      std::optional<long long> n = WholeNumber(value);
      if (!n || *n <= 0) return Fail(a, f + ".timeoutSeconds must be a positive integer");
      if (*n > kMaxDurationSeconds) {
        return Fail(a, f + ".timeoutSeconds must be at most " +
                           std::to_string(kMaxDurationSeconds) +
                           " (one day); leave it unset to wait for ever");
      }
      out.timeoutSeconds = *n;
    } else {
      return Fail(
          a, "unknown field " + f + "." + std::string(name) +
                 "; a hook has labelsHandler, finalizersHandler, markPodNotReady, timeoutSeconds");
    }
  }
  return Status::Ok();
}

bool HasLabel(const kube::ObjectView& pod, const std::string& key, const std::string& value) {
  return pod.label(key) == value;
}

bool HasFinalizer(const kube::ObjectView& pod, const std::string& finalizer) {
  return pod.hasFinalizer(finalizer);
}

}  // namespace

const Hook* Lifecycle::PreHook() const {
  if (preUpdate) return &*preUpdate;
  return inPlaceUpdate ? &*inPlaceUpdate : nullptr;
}

const Hook* Lifecycle::PostHook() const {
  if (postUpdate) return &*postUpdate;
  return inPlaceUpdate ? &*inPlaceUpdate : nullptr;
}

bool Policy::AllowsAnnotation(std::string_view key) const {
  if (key == keys::kRestartedAtAnnotation) return false;  // means "restart my pods"
  for (const std::string& pattern : annotations) {
    if (!pattern.empty() && pattern.back() == '*') {
      if (key.starts_with(std::string_view(pattern).substr(0, pattern.size() - 1))) return true;
    } else if (key == pattern) {
      return true;
    }
  }
  return false;
}

StatusOr<Lifecycle> ParseLifecycle(std::string_view text) {
  const std::string_view a = keys::kLifecycleAnnotation;
  json::Document doc;
  if (Status err = json::ParseUntrusted(text, doc); !err.ok()) {
    return Fail(a,
                "not valid JSON (" + err.message() + "); expected " + std::string(kLifecycleShape));
  }
  if (!doc.IsObject()) {
    return Fail(a, "must be a JSON object; expected " + std::string(kLifecycleShape));
  }
  Lifecycle out;
  for (const auto& m : doc.GetObject()) {
    const std::string_view name = json::View(m.name);
    std::optional<Hook>* slot = nullptr;
    if (name == "inPlaceUpdate") {
      slot = &out.inPlaceUpdate;
    } else if (name == "preUpdate") {
      slot = &out.preUpdate;
    } else if (name == "postUpdate") {
      slot = &out.postUpdate;
    } else {
      return Fail(
          a, "unknown field " + std::string(name) + "; expected " + std::string(kLifecycleShape));
    }
    if (m.value.IsNull()) continue;
    Hook hook;
    if (Status st = ParseHook(m.value, name, hook); !st.ok()) return st;
    *slot = std::move(hook);
  }
  return out;
}

StatusOr<Policy> ParsePolicy(std::string_view text) {
  const std::string_view a = keys::kPolicyAnnotation;
  const std::string shape(kPolicyShape);
  json::Document doc;
  if (Status err = json::ParseUntrusted(text, doc); !err.ok()) {
    return Fail(a, "not valid JSON (" + err.message() + "); expected " + shape);
  }
  if (!doc.IsObject()) {
    return Fail(a, "must be a JSON object; expected " + shape);
  }
  Policy out;
  for (const auto& m : doc.GetObject()) {
    const std::string_view name = json::View(m.name);
    const json::Value& value = m.value;
    if (name == "annotations") {
      if (value.IsNull()) continue;
      if (!value.IsArray()) {
        return Fail(a, "annotations must be an array of annotation keys or prefix/* patterns");
      }
      for (const auto& e : value.GetArray()) {
        if (!e.IsString() || e.GetStringLength() == 0) {
          return Fail(a, "annotations must be an array of non-empty strings");
        }
        std::string pattern(json::View(e));
        if (pattern.find('*') < pattern.size() - 1) {
          return Fail(a, "annotations pattern \"" + pattern + "\": only a trailing * is supported");
        }
        out.annotations.push_back(std::move(pattern));
      }
    } else if (name == "gracePeriodSeconds") {
      if (value.IsNull()) continue;
      std::optional<long long> n = WholeNumber(value);
      if (!n || *n < 0) {
        return Fail(a, "gracePeriodSeconds must be an integer >= 0");
      }
      if (*n > kMaxDurationSeconds) {
        return Fail(a, "gracePeriodSeconds must be at most " + std::to_string(kMaxDurationSeconds) +
                           " (one day)");
      }
      out.gracePeriodSeconds = *n;
    } else {
      return Fail(a, "unknown field " + std::string(name) + "; expected " + shape);
    }
  }
  return out;
}

StatusOr<Settings> ReadSettings(const kube::ObjectView& deployment) {
  Settings out;
  if (std::optional<std::string_view> v = deployment.annotation(keys::kLifecycleAnnotation)) {
    StatusOr<Lifecycle> parsed = ParseLifecycle(*v);
    if (!parsed.ok()) return parsed.status();
    out.lifecycle = std::move(*parsed);
  }
  if (std::optional<std::string_view> v = deployment.annotation(keys::kPolicyAnnotation)) {
    StatusOr<Policy> parsed = ParsePolicy(*v);
    if (!parsed.ok()) return parsed.status();
    out.policy = std::move(*parsed);
  }
  return out;
}

bool IsPodHooked(const Hook& hook, const kube::Pod& pod) {
  for (const auto& [k, v] : hook.labelsHandler) {
    if (HasLabel(pod, k, v)) return true;
  }
  for (const auto& f : hook.finalizersHandler) {
    if (HasFinalizer(pod, f)) return true;
  }
  return false;
}

bool IsPodAllHooked(const Hook& hook, const kube::Pod& pod) {
  for (const auto& [k, v] : hook.labelsHandler) {
    if (!HasLabel(pod, k, v)) return false;
  }
  for (const auto& f : hook.finalizersHandler) {
    if (!HasFinalizer(pod, f)) return false;
  }
  return true;
}

std::string DescribeHandlers(const Hook& hook, const kube::Pod& pod, bool present) {
  std::string out;
  for (const auto& [k, v] : hook.labelsHandler) {
    if (HasLabel(pod, k, v) == present) AppendItem(out, "label " + k + "=" + v);
  }
  for (const auto& f : hook.finalizersHandler) {
    if (HasFinalizer(pod, f) == present) AppendItem(out, "finalizer " + f);
  }
  return out;
}

}  // namespace iw::lifecycle

#include "server/kube/informer.h"

#include <algorithm>
#include <cctype>

#include "lib/kube_objects.h"
#include "lib/stop_sleep.h"
#include "server/process/log.h"

namespace iw::kube {

namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

// ---------------------------------------------------------------------------------------------
// Informer

Informer::Informer(WatchApi& api, InformerOptions options)
    : api_(api),
      options_(std::move(options)),
      resync_(options_.resyncPeriod.count() > 0
                  ? std::jthread([this](std::stop_token st) { RunResync(st); })
                  : std::jthread()),
      thread_([this](std::stop_token st) { Run(st); }) {}

Informer::~Informer() {
  thread_.request_stop();
  resync_.request_stop();
  // The jthreads join as they are destroyed (first, being the last members).
}

bool Informer::HasSynced() const {
  std::lock_guard lock(syncMu_);
  return synced_;
}

bool Informer::WaitForSync(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(syncMu_);
  return syncCv_.wait_for(lock, timeout, [this] { return synced_; });
}

ObjectPtr Informer::Get(std::string_view ns, std::string_view name) const {
  std::string key = ObjectKey(ns, name);
  std::shared_lock lock(mu_);
  auto it = objects_.find(key);
  return it == objects_.end() ? nullptr : it->second;
}

std::vector<ObjectPtr> Informer::List() const {
  std::shared_lock lock(mu_);
  std::vector<ObjectPtr> out;
  out.reserve(objects_.size());
  for (const auto& [key, obj] : objects_) out.push_back(obj);
  return out;
}

namespace {
template <class Map, class Fn>
void ForNamespace(const Map& objects, std::string_view ns, Fn&& fn) {
  if (ns.empty()) {
    for (const auto& [key, obj] : objects) fn(obj);
    return;
  }
  std::string prefix = ObjectKey(ns, "");
  for (auto it = objects.lower_bound(prefix);
       it != objects.end() && std::string_view(it->first).starts_with(prefix); ++it) {
    fn(it->second);
  }
}
}  // namespace

std::vector<ObjectPtr> Informer::List(std::string_view ns, const LabelSelector& selector) const {
  std::vector<ObjectPtr> out;
  std::shared_lock lock(mu_);
  ForNamespace(objects_, ns, [&](const ObjectPtr& o) {
    if (selector.Matches(o->Labels())) out.push_back(o);
  });
  return out;
}

std::vector<ObjectPtr> Informer::ListOwnedBy(std::string_view ns, std::string_view ownerUid) const {
  std::vector<ObjectPtr> out;
  std::shared_lock lock(mu_);
  ForNamespace(objects_, ns, [&](const ObjectPtr& o) {
    const json::Value* refs = json::Path(&o->Value(), {"metadata", "ownerReferences"});
    if (refs == nullptr || !refs->IsArray()) return;
    for (const auto& r : refs->GetArray()) {
      if (json::StringOr(&r, "uid") == ownerUid) {
        out.push_back(o);
        return;
      }
    }
  });
  return out;
}

size_t Informer::Size() const {
  std::shared_lock lock(mu_);
  return objects_.size();
}

size_t Informer::ApproxBytes() const {
  constexpr size_t kMapNode = 32 + sizeof(std::string) + sizeof(ObjectPtr) + 16;
  std::shared_lock lock(mu_);
  size_t total = 0;
  for (const auto& [key, obj] : objects_) {
    total += kMapNode + obj->ApproxBytes();
    if (key.capacity() > 15) total += key.capacity() + 1 + 16;
  }
  return total;
}

std::string Informer::ResourceVersion() const {
  std::shared_lock lock(mu_);
  return resourceVersion_;
}

Informer::Stats Informer::GetStats() const {
  std::lock_guard lock(statsMu_);
  return stats_;
}

ObjectPtr Informer::Project(const json::Value& full) const {
  if (!options_.projection) return Object::Make(full);
  json::Document scratch;
  json::Value out;
  options_.projection(full, out, scratch.GetAllocator());
  return Object::Make(out);
}

template <class Fn>
void Informer::Dispatch(Fn&& fn) {
  std::lock_guard lock(dispatchMu_);
  try {
    fn();
  } catch (const std::exception& e) {
    log::Error("informer handler threw", {{"informer", options_.name}, {"error", e.what()}});
  } catch (...) {
    log::Error("informer handler threw", {{"informer", options_.name}});
  }
}

bool Informer::ListOnce(std::stop_token stop) {
  // Page by page: each page is parsed, projected into `fresh` and freed before the next one is
  // fetched, so whole objects of one page at most are held at once.
  std::map<std::string, ObjectPtr, std::less<>> fresh;
  std::string rv;
  Result r = api_.ListPages(
      options_.path, ListOptions{options_.labelSelector, options_.fieldSelector, options_.pageSize},
      [&](json::Document& page, bool restart) {
        if (stop.stop_requested()) return false;
        if (restart) fresh.clear();
        if (const json::Value* items = json::Find(&page, "items"); items && items->IsArray()) {
          for (const auto& item : items->GetArray()) {
            ObjectPtr p = Project(item);
            fresh[ObjectKey(p->Namespace(), p->Name())] = std::move(p);
          }
        }
        rv = std::string(MetaOf(page, "resourceVersion"));
        return true;
      });
  if (!r.Ok()) {
    if (stop.stop_requested()) return false;
    std::lock_guard lock(statsMu_);
    ++stats_.listErrors;
    log::Warn("informer list failed", {{"informer", options_.name},
                                       {"path", options_.path},
                                       {"code", std::to_string(r.code)},
                                       {"reason", r.reason},
                                       {"message", r.message}});
    return false;
  }

  std::map<std::string, ObjectPtr, std::less<>> old;
  {
    std::unique_lock lock(mu_);
    old.swap(objects_);
    objects_ = std::move(fresh);
    resourceVersion_ = rv;
  }
  {
    std::lock_guard lock(statsMu_);
    ++stats_.lists;
  }
  // This thread is the only writer: reading objects_ without the lock is safe here.
  // (Plain variables, not structured bindings: clang 14 cannot capture those in lambdas.)
  for (const auto& entry : objects_) {
    const auto& now = entry.second;
    auto it = old.find(entry.first);
    if (it == old.end()) {
      if (options_.handlers.onAdd) Dispatch([&] { options_.handlers.onAdd(now); });
    } else if (it->second->ResourceVersion() != now->ResourceVersion() ||
               it->second->Uid() != now->Uid()) {
      if (options_.handlers.onUpdate) {
        Dispatch([&] { options_.handlers.onUpdate(it->second, now); });
      }
    }
  }
  for (const auto& entry : old) {
    const auto& last = entry.second;
    if (objects_.find(entry.first) == objects_.end() && options_.handlers.onDelete) {
      Dispatch([&] { options_.handlers.onDelete(last); });
    }
  }
  {
    std::lock_guard lock(syncMu_);
    synced_ = true;
  }
  syncCv_.notify_all();
  log::Info("informer listed", {{"informer", options_.name},
                                {"objects", std::to_string(objects_.size())},
                                {"resourceVersion", rv}});
  return true;
}

void Informer::Apply(WatchEvent& event) {
  const std::string& type = event.type;
  std::string_view rv = MetaOf(event.object, "resourceVersion");
  if (type == "BOOKMARK") {
    if (!rv.empty()) {
      std::unique_lock lock(mu_);
      resourceVersion_ = std::string(rv);
    }
    return;
  }
  if (type != "ADDED" && type != "MODIFIED" && type != "DELETED") {
    log::Warn("informer ignores an unknown watch event",
              {{"informer", options_.name}, {"type", type}});
    return;
  }
  ObjectPtr now = Project(event.object);
  std::string key = ObjectKey(now->Namespace(), now->Name());
  ObjectPtr old;
  {
    std::unique_lock lock(mu_);
    auto it = objects_.find(key);
    if (it != objects_.end()) old = it->second;
    if (type == "DELETED") {
      if (it != objects_.end()) objects_.erase(it);
    } else if (it != objects_.end()) {
      it->second = now;
    } else {
      objects_.emplace(key, now);
    }
    if (!rv.empty()) resourceVersion_ = std::string(rv);
  }
  {
    std::lock_guard lock(statsMu_);
    ++stats_.events;
  }
  const auto& h = options_.handlers;
  if (type == "DELETED") {
    if (h.onDelete) Dispatch([&] { h.onDelete(now); });
  } else if (old) {
    if (h.onUpdate) Dispatch([&] { h.onUpdate(old, now); });
  } else {
    if (h.onAdd) Dispatch([&] { h.onAdd(now); });
  }
}

void Informer::Run(std::stop_token stop) {
  int failures = 0;
  bool needList = true;
  auto sleep = [&stop](std::chrono::milliseconds d) { SleepUnlessStopped(d, stop); };
  while (!stop.stop_requested()) {
    try {
      if (needList) {
        if (!ListOnce(stop)) {
          sleep(Backoff(failures++, options_.backoffInitial, options_.backoffMax));
          continue;
        }
        needList = false;
      }
      WatchOptions wo;
      wo.labelSelector = options_.labelSelector;
      wo.fieldSelector = options_.fieldSelector;
      wo.timeoutSeconds = static_cast<int>(options_.watchTimeout.count());
      wo.allowBookmarks = true;
      std::string rv = ResourceVersion();
      auto began = Clock::now();
      WatchResult r = WatchFrom(
          api_, options_.path, wo, rv,
          [this](WatchEvent& e) {
            Apply(e);
            return true;
          },
          stop, options_.backoffInitial, options_.backoffMax);
      if (r.stopped) break;
      if (r.Gone()) {
        {
          std::lock_guard lock(statsMu_);
          ++stats_.gone;
        }
        log::Info("informer resourceVersion expired, relisting",
                  {{"informer", options_.name}, {"resourceVersion", rv}, {"message", r.message}});
        needList = true;
        // The first 410 relists at once; 410s that keep coming right after a relist back off.
        bool quick = Clock::now() - began < std::chrono::seconds(10);
        failures = quick ? failures + 1 : 0;
        if (failures > 1)
          sleep(Backoff(failures - 2, options_.backoffInitial, options_.backoffMax));
      }
    } catch (const std::exception& e) {
      log::Error("informer error", {{"informer", options_.name}, {"error", e.what()}});
      needList = true;
      sleep(Backoff(failures++, options_.backoffInitial, options_.backoffMax));
    } catch (...) {
      log::Error("informer error", {{"informer", options_.name}});
      needList = true;
      sleep(Backoff(failures++, options_.backoffInitial, options_.backoffMax));
    }
  }
}

void Informer::RunResync(std::stop_token stop) {
  while (SleepUnlessStopped(options_.resyncPeriod, stop)) {
    if (!HasSynced() || !options_.handlers.onResync) continue;
    try {
      for (const auto& o : List()) {
        if (stop.stop_requested()) break;
        Dispatch([&] { options_.handlers.onResync(o); });
      }
    } catch (...) {
      log::Error("informer resync failed", {{"informer", options_.name}});
    }
  }
}

}  // namespace iw::kube

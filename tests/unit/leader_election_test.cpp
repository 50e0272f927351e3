#include <doctest/doctest.h>

#include <atomic>
#include <optional>
#include <string>
#include <thread>

#include "server/loop/leader_election.h"
#include "tests/unit/fake_api.h"

using namespace iw;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Steady = std::chrono::steady_clock;

namespace {

constexpr std::string_view kNs = "inplace-webhook";

leader::Options Named(std::string identity) {
  leader::Options o;
  o.namespaceName = std::string(kNs);
  o.identity = std::move(identity);
  return o;
}

json::Document Lease(fake::FakeApi& api) {
  return api.Object(kube::LeasePath(kNs, leader::kLeaseName));
}
std::string Holder(fake::FakeApi& api) {
  json::Document l = Lease(api);
  return std::string(json::StringOr(json::Find(&l, "spec"), "holderIdentity"));
}
long long Transitions(fake::FakeApi& api) {
  json::Document l = Lease(api);
  return l["spec"]["leaseTransitions"].GetInt64();
}

}  // namespace

TEST_CASE("leader election: the first candidate creates the Lease with client-go's record") {
  fake::FakeApi api;
  leader::LeaderElector a(api, Named("a"));
  CHECK(a.TryAcquireOrRenew(Steady::now()));
  json::Document l = Lease(api);
  CHECK(json::StringOr(&l, "apiVersion") == "coordination.k8s.io/v1");
  CHECK(json::StringOr(json::Find(&l, "metadata"), "name") == "inplace-webhook");
  CHECK(Holder(api) == "a");
  CHECK(l["spec"]["leaseDurationSeconds"].GetInt() == 15);
  CHECK(Transitions(api) == 0);
  std::string renew(json::StringOr(json::Find(&l, "spec"), "renewTime"));
  CHECK(renew.size() == std::string("2026-01-01T00:00:00.000000Z").size());  // MicroTime
  CHECK(renew.back() == 'Z');
}

TEST_CASE("leader election: a valid lease is respected; an expired one is taken over") {
  fake::FakeApi api;
  leader::LeaderElector a(api, Named("a"));
  leader::LeaderElector b(api, Named("b"));
  const Steady::time_point t0 = Steady::now();
  REQUIRE(a.TryAcquireOrRenew(t0));
  CHECK_FALSE(b.TryAcquireOrRenew(t0));  // b observes a's record now
  CHECK_FALSE(b.TryAcquireOrRenew(t0 + seconds(14)));

  SUBCASE("renewals keep it valid for the others, and keep acquireTime") {
    json::Document before = Lease(api);
    CHECK(a.TryAcquireOrRenew(t0 + seconds(10)));
    json::Document after = Lease(api);
    CHECK(json::StringOr(json::Find(&after, "spec"), "acquireTime") ==
          json::StringOr(json::Find(&before, "spec"), "acquireTime"));
    CHECK_FALSE(b.TryAcquireOrRenew(t0 + seconds(20)));  // changed record: b's clock restarts
    CHECK_FALSE(b.TryAcquireOrRenew(t0 + seconds(34)));
    CHECK(b.TryAcquireOrRenew(t0 + seconds(36)));
  }
  SUBCASE("no renewal for a lease duration: taken over, transitions counted") {
    CHECK(b.TryAcquireOrRenew(t0 + seconds(16)));
    CHECK(Holder(api) == "b");
    CHECK(Transitions(api) == 1);
    CHECK_FALSE(a.TryAcquireOrRenew(t0 + seconds(17)));  // a sees b's fresh record
  }
}

TEST_CASE("leader election: release clears the holder so a successor need not wait") {
  fake::FakeApi api;
  leader::LeaderElector a(api, Named("a"));
  leader::LeaderElector b(api, Named("b"));
  const Steady::time_point t0 = Steady::now();
  REQUIRE(a.TryAcquireOrRenew(t0));
  CHECK_FALSE(b.TryAcquireOrRenew(t0));
  CHECK(a.Release());
  CHECK(Holder(api).empty());
  CHECK(b.TryAcquireOrRenew(t0 + seconds(1)));
  CHECK(Holder(api) == "b");
  CHECK(a.Release());  // not ours any more: nothing to do
  CHECK(Holder(api) == "b");
}

TEST_CASE("leader election: writes are pinned to the resourceVersion read") {
  fake::FakeApi api;
  leader::LeaderElector a(api, Named("a"));
  REQUIRE(a.TryAcquireOrRenew(Steady::now()));
  api.FailNext(kube::LeasePath(kNs, leader::kLeaseName), 409);
  CHECK_FALSE(a.TryAcquireOrRenew(Steady::now()));
  CHECK(a.TryAcquireOrRenew(Steady::now()));

  // Another writer changes the Lease between our read and write: our stale write is refused.
  struct Racing : fake::FakeApi {
    int n = 0;
    kube::Result Update(std::string_view path, const json::Value& object) override {
      Mutate(path, [this](json::Document& lease) {  // another holder's renewal: a new version
        auto& a = lease.GetAllocator();
        json::SetString(json::EnsureObject(lease, "spec", a), "renewTime", std::to_string(++n), a);
      });
      return fake::FakeApi::Update(path, object);
    }
  } racing;
  leader::LeaderElector c(racing, Named("c"));
  CHECK(c.TryAcquireOrRenew(Steady::now()));  // create: no race
  CHECK_FALSE(c.TryAcquireOrRenew(Steady::now()));
}

TEST_CASE("leader election: identities are unique per process") {
  std::string a = leader::DefaultIdentity(), b = leader::DefaultIdentity();
  CHECK(a != b);
  CHECK(a.find('_') != std::string::npos);
}

TEST_CASE("leader election: the thread leads, calls back, and releases on Stop") {
  fake::FakeApi api;
  std::atomic<int> started{0}, stopped{0};
  leader::Options o = Named("a");
  o.timing.retryPeriod = milliseconds(10);
  o.onStartedLeading = [&] { ++started; };
  o.onStoppedLeading = [&] { ++stopped; };
  {
    leader::LeaderElector a(api, o);
    a.Start();
    const auto deadline = Steady::now() + seconds(60);
    while (!a.IsLeader() && Steady::now() < deadline) std::this_thread::sleep_for(milliseconds(5));
    CHECK(a.IsLeader());
    CHECK(started.load() == 1);
    std::string metrics;
    a.RenderMetrics(metrics);
    CHECK(metrics.find("inplace_webhook_leader{identity=\"a\"} 1") != std::string::npos);
    a.Stop();
    CHECK_FALSE(a.IsLeader());
  }
  CHECK(stopped.load() == 1);
  CHECK(Holder(api).empty());
}

TEST_CASE("leader election: a leader that loses the Lease to another holder steps down") {
  fake::FakeApi api;
  std::atomic<int> stopped{0};
  leader::Options o = Named("a");
  o.timing.retryPeriod = milliseconds(10);
  o.onStoppedLeading = [&] { ++stopped; };
  leader::LeaderElector a(api, o);
  a.Start();
  const auto deadline = Steady::now() + seconds(60);
  while (!a.IsLeader() && Steady::now() < deadline) std::this_thread::sleep_for(milliseconds(5));
  REQUIRE(a.IsLeader());
  // Someone else writes the Lease (e.g. after a long pause of this process).
  api.Mutate(kube::LeasePath(kNs, leader::kLeaseName), [](json::Document& l) {
    json::SetString(l["spec"], "holderIdentity", "z", l.GetAllocator());
    json::SetString(l["spec"], "renewTime", "2099-01-01T00:00:00.000000Z", l.GetAllocator());
  });
  // IsLeader() turns false just before onStoppedLeading runs: wait for both.
  while ((a.IsLeader() || stopped.load() == 0) && Steady::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  CHECK_FALSE(a.IsLeader());
  CHECK(stopped.load() == 1);
  a.Stop();
  CHECK(Holder(api) == "z");  // never released what is not ours
}

TEST_CASE("leader election: a loop is known alive only while the holder's record keeps changing") {
  // The pod webhook injects the readiness gate only while this is true (DESIGN.md §8.6).
  fake::FakeApi api;
  leader::LeaderElector a(api, Named("a"));
  leader::LeaderElector b(api, Named("b"));
  const Steady::time_point t0 = Steady::now();
  CHECK_FALSE(b.LeaderKnownAlive(t0));  // nothing observed yet
  REQUIRE(a.TryAcquireOrRenew(t0));
  CHECK_FALSE(b.TryAcquireOrRenew(t0));  // b observes a's record at t0
  CHECK(b.LeaderKnownAlive(t0 + seconds(9)));
  // Not renewed for the renew deadline (10 s): a holder in that state has stopped leading.
  CHECK_FALSE(b.LeaderKnownAlive(t0 + seconds(10)));
  CHECK(a.TryAcquireOrRenew(t0 + seconds(11)));
  CHECK_FALSE(b.TryAcquireOrRenew(t0 + seconds(12)));  // a changed record, seen at 12 s
  CHECK(b.LeaderKnownAlive(t0 + seconds(21)));
  // Released: whoever polls next takes the free Lease, and counts as alive only once its thread
  // leads (then the loop runs).
  CHECK(a.Release());
  CHECK(b.TryAcquireOrRenew(t0 + seconds(13)));
  CHECK_FALSE(b.LeaderKnownAlive(t0 + seconds(13)));
  // a, the former holder, now observes b's record: alive as far as a can tell.
  CHECK_FALSE(a.TryAcquireOrRenew(t0 + seconds(14)));
  CHECK(a.LeaderKnownAlive(t0 + seconds(14)));
}

TEST_CASE("leader election: the leading thread counts as alive until it stops") {
  fake::FakeApi api;
  leader::Options o = Named("a");
  o.timing.retryPeriod = milliseconds(20);
  leader::LeaderElector a(api, o);
  a.Start();
  for (int i = 0; i < 200 && !a.IsLeader(); ++i) std::this_thread::sleep_for(milliseconds(10));
  REQUIRE(a.IsLeader());
  CHECK(a.LeaderKnownAlive(Steady::now()));
  a.Stop();
  CHECK_FALSE(a.LeaderKnownAlive(Steady::now()));
}

// --- One loop at a time (DESIGN.md §9.3) ------------------------------------------------------

TEST_CASE("leader timing: the durations must leave the leader time to stop before a takeover") {
  struct Case {
    const char* name;
    long lease, renew, retry, margin;
    bool ok;
  } cases[] = {
      {"client-go's defaults", 15000, 10000, 2000, 1000, true},
      {"renew deadline reaching into the margin", 15000, 14000, 2000, 1000, false},
      {"renew deadline equal to the lease", 15000, 15000, 2000, 0, false},
      {"one try per deadline", 15000, 10000, 10000, 1000, false},
      {"no retry period", 15000, 10000, 0, 1000, false},
      {"short but consistent", 3000, 1500, 300, 500, true},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    leader::Timing t{milliseconds(c.lease), milliseconds(c.renew), milliseconds(c.retry),
                     milliseconds(c.margin)};
    Status s = leader::CheckTiming(t);
    CHECK(s.ok() == c.ok);
    if (!c.ok) CHECK(s.code() == Status::Code::kInvalidArgument);
  }
  leader::Timing oneTry{milliseconds(15000), milliseconds(10000), milliseconds(10000),
                        milliseconds(1000)};
  CHECK(leader::CheckTiming(oneTry).message() ==
        "the retry period (10000 ms) must be shorter than the renew deadline (10000 ms)");
}

TEST_CASE(
    "leader timing: a write starts only before the renew deadline and ends before a takeover") {
  const leader::Timing t;  // 15 s lease, 10 s renew deadline, 1 s margin
  const Steady::time_point r = Steady::now();
  const milliseconds call{30000};
  struct Case {
    const char* name;
    bool leading;
    milliseconds at;                  // now - r
    std::optional<milliseconds> end;  // deadline - r; nullopt: refused
  } cases[] = {
      {"not leading", false, milliseconds(0), std::nullopt},
      {"right after the renewal", true, milliseconds(0), milliseconds(14000)},
      {"just before the renew deadline", true, milliseconds(9999), milliseconds(14000)},
      {"at the renew deadline", true, milliseconds(10000), std::nullopt},
      {"past the lease", true, milliseconds(20000), std::nullopt},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    auto d = leader::WriteDeadline(c.leading ? std::optional(r) : std::nullopt, r + c.at, t, call);
    REQUIRE(d.has_value() == c.end.has_value());
    if (c.end) CHECK(*d == r + *c.end);
  }
  // A short call timeout wins over the fence.
  CHECK(*leader::WriteDeadline(r, r, t, milliseconds(500)) == r + milliseconds(500));
  // The renewal of a leader is cut at its term's renew deadline; a candidate's runs as long.
  CHECK(leader::RenewAttemptDeadline(true, r, r + milliseconds(9000), t) == r + seconds(10));
  CHECK(leader::RenewAttemptDeadline(false, r, r + milliseconds(9000), t) ==
        r + milliseconds(19000));
  // Every write ends before any other replica can take over: lease - margin > renew deadline.
  CHECK(r + t.leaseDuration - t.writeMargin > r + t.renewDeadline);
}

namespace {

// Passes calls to a FakeApi; while `hang` is set, every call blocks until the deadline of the
// calling thread (as kube::Client cuts a hung request) and fails with code 0. Records the
// deadline each write carried.
class HangingApi : public kube::WatchApi {
 public:
  explicit HangingApi(fake::FakeApi& api) : api_(api) {}
  std::atomic<bool> hang{false};
  std::atomic<int> writesWithoutDeadline{0};
  std::atomic<int> writesLanded{0};
  // The deadline of the last hung request made on thread `watched` (0: none yet).
  std::atomic<std::thread::id> watched{};
  std::atomic<Steady::time_point::rep> watchedDeadline{0};

  kube::Result Get(std::string_view path) override {
    if (auto r = Hung()) return std::move(*r);
    return api_.Get(path);
  }
  kube::Result List(std::string_view path, const kube::ListOptions& o) override {
    return api_.List(path, o);
  }
  kube::Result Create(std::string_view path, const json::Value& object) override {
    if (auto r = Write()) return std::move(*r);
    return api_.Create(path, object);
  }
  kube::Result Update(std::string_view path, const json::Value& object) override {
    if (auto r = Write()) return std::move(*r);
    return api_.Update(path, object);
  }
  kube::Result Patch(std::string_view path, kube::PatchType t, std::string_view body) override {
    if (auto r = Write()) return std::move(*r);
    ++writesLanded;
    return api_.Patch(path, t, body);
  }
  kube::Result Delete(std::string_view path) override {
    if (auto r = Write()) return std::move(*r);
    return api_.Delete(path);
  }
  kube::WatchResult Watch(std::string_view, const kube::WatchOptions&, const kube::WatchHandler&,
                          std::stop_token) override {
    return {};
  }

 private:
  std::optional<kube::Result> Write() {
    if (!kube::DeadlineScope::Current()) ++writesWithoutDeadline;
    return Hung();
  }
  std::optional<kube::Result> Hung() {
    if (!hang.load()) return std::nullopt;
    auto d = kube::DeadlineScope::Current();
    if (d && std::this_thread::get_id() == watched.load())
      watchedDeadline = d->time_since_epoch().count();
    // Without a deadline a hung request would hang "forever" (here: 60 s).
    std::this_thread::sleep_until(d ? *d : Steady::now() + seconds(60));
    kube::Result r;
    r.reason = "Timeout";
    return r;
  }
  fake::FakeApi& api_;
};

}  // namespace

TEST_CASE("leader election: a leader whose API hangs stops writing before its lease can be taken") {
  fake::FakeApi api;
  api.Put("/api/v1/namespaces/ns/configmaps", R"({"metadata":{"name":"p","namespace":"ns"}})");
  HangingApi hanging(api);
  leader::Options o = Named("a");
  o.timing = {milliseconds(1500), milliseconds(1000), milliseconds(100), milliseconds(200)};
  REQUIRE(leader::CheckTiming(o.timing).ok());
  std::atomic<bool> loopRunning{false};
  std::atomic<Steady::time_point::rep> stoppedAt{0};
  o.onStartedLeading = [&] { loopRunning = true; };
  o.onStoppedLeading = [&] {
    loopRunning = false;
    stoppedAt = Steady::now().time_since_epoch().count();
  };
  leader::LeaderElector a(hanging, o);
  leader::FencedApi loopApi(hanging, &a.WriteFence(), seconds(30));
  a.Start();
  const auto deadline = Steady::now() + seconds(30);
  while (!a.IsLeader() && Steady::now() < deadline) std::this_thread::sleep_for(milliseconds(5));
  REQUIRE(a.IsLeader());
  const std::string pod = "/api/v1/namespaces/ns/configmaps/p";
  CHECK(loopApi.Patch(pod, kube::PatchType::kMerge, "{}").Ok());
  CHECK(hanging.writesWithoutDeadline.load() == 0);

  // The API server hangs. The last renewal started at most a retry period ago: `hungAt` - 100 ms.
  const Steady::time_point hungAt = Steady::now();
  hanging.hang = true;
  // A write the loop issues now hangs, and is cut at lease - margin after the last renewal (r +
  // 1500 - 200, r <= hungAt): the deadline it carries says so exactly; when it ends, the wake-up's
  // latency added, the lease (r + 1500) cannot have been taken yet.
  std::thread writer([&] {
    hanging.watched = std::this_thread::get_id();
    CHECK(loopApi.Patch(pod, kube::PatchType::kMerge, "{}").code == 0);
  });
  writer.join();
  const Steady::time_point writeEnded = Steady::now();
  REQUIRE(hanging.watchedDeadline.load() != 0);
  CHECK(Steady::time_point(Steady::duration(hanging.watchedDeadline.load())) <=
        hungAt + milliseconds(1300));
  CHECK(writeEnded < hungAt + milliseconds(1500));
  // The renewal is cut at its deadline too, and the loop stops by r + renewDeadline, before the
  // lease is free.
  while (loopRunning.load() && Steady::now() < deadline)
    std::this_thread::sleep_for(milliseconds(5));
  CHECK_FALSE(loopRunning.load());
  CHECK(Steady::time_point(Steady::duration(stoppedAt.load())) < hungAt + milliseconds(1500));
  // Once the fence is closed nothing is sent at all.
  CHECK(loopApi.Patch(pod, kube::PatchType::kMerge, "{}").reason == "NotLeading");
  CHECK(loopApi.Refused() >= 1);
  CHECK(hanging.writesLanded.load() == 1);  // only the write before the hang
  hanging.hang = false;
  a.Stop();
}

TEST_CASE("leader election: the Lease is released only after the loop has stopped") {
  fake::FakeApi api;
  leader::Options o = Named("a");
  o.timing.retryPeriod = milliseconds(10);
  std::string holderWhileStopping = "unset";
  o.onStoppedLeading = [&] { holderWhileStopping = Holder(api); };
  leader::LeaderElector a(api, o);
  a.Start();
  const auto deadline = Steady::now() + seconds(30);
  while (!a.IsLeader() && Steady::now() < deadline) std::this_thread::sleep_for(milliseconds(5));
  REQUIRE(a.IsLeader());
  a.Stop();
  CHECK(holderWhileStopping == "a");  // the loop stopped while we still held the Lease
  CHECK(Holder(api).empty());         // released afterwards
}

TEST_CASE("leader election: without a fence every write still carries a deadline") {
  fake::FakeApi api;
  api.Put("/api/v1/namespaces/ns/configmaps", R"({"metadata":{"name":"p","namespace":"ns"}})");
  HangingApi hanging(api);
  leader::FencedApi loopApi(hanging, nullptr, milliseconds(200));
  CHECK(loopApi.Patch("/api/v1/namespaces/ns/configmaps/p", kube::PatchType::kMerge, "{}").Ok());
  hanging.hang = true;
  const auto began = Steady::now();
  CHECK(loopApi.Delete("/api/v1/namespaces/ns/configmaps/p").code == 0);
  CHECK(Steady::now() - began < milliseconds(1000));
  CHECK(hanging.writesWithoutDeadline.load() == 0);
}

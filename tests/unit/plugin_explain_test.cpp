// kubectl-inplace explain: the webhook's own decision on the Deployment's last template change
// (plugin/explain.h).
#include <doctest/doctest.h>

#include <string>

#include "hooks/in_progress.h"
#include "plugin/explain.h"
#include "tests/unit/test_json.h"

using namespace iw;
using namespace iw::plugin;

namespace {

using test::Parse;

std::string Template(const std::string& image, const std::string& env, bool hashLabel) {
  return std::string(R"({"metadata":{"labels":{"app":"web","inplace-webhook.io/enabled":"true")") +
         (hashLabel ? R"(,"pod-template-hash":"abc")" : "") + R"(}},
             "spec":{"containers":[{"name":"app","image":")" +
         image + R"(","env":[{"name":"E","value":")" + env + R"("}]}]}})";
}

std::string Deployment(const std::string& image, const std::string& env, bool optedIn = true) {
  return R"({"metadata":{"name":"web","namespace":"shop","generation":5,
             "annotations":{"deployment.kubernetes.io/revision":"3"},
             "labels":{"inplace-webhook.io/enabled":")" +
         std::string(optedIn ? "true" : "false") + R"("}},
          "spec":{"replicas":3,"selector":{"matchLabels":{"app":"web"}},"template":)" +
         Template(image, env, false) + R"(},"status":{"observedGeneration":5,"replicas":3,
          "updatedReplicas":3}})";
}

std::string Rs(const std::string& name, int revision, const std::string& image,
               const std::string& env) {
  return R"({"metadata":{"name":")" + name +
         R"(","annotations":{"deployment.kubernetes.io/revision":")" + std::to_string(revision) +
         R"("},"ownerReferences":[{"kind":"Deployment","name":"web","controller":true,"uid":"u"}]},
          "spec":{"replicas":0,"template":)" +
         Template(image, env, true) + "}}";
}

}  // namespace

TEST_CASE("plugin explain: an image change is made in place, with the plan") {
  json::Document d = Parse(Deployment("v2", "1"));
  json::Document rss = Parse("{\"items\":[" + Rs("web-1", 1, "v0", "0") + "," +
                             Rs("web-2", 2, "v1", "1") + "," + Rs("web-3", 3, "v2", "1") + "]}");
  StatusOr<Explanation> e = Explain(d, rss);
  REQUIRE_MESSAGE(e.ok(), e.status().message());
  CHECK(e->kind == Explanation::Kind::kInPlace);
  CHECK(e->from.find("revision 2") == 0);
  CHECK(e->plan.images == std::map<std::string, std::string>{{"app", "v2"}});
  const std::string text = RenderExplanation(*e);
  CHECK(text.find("is made IN PLACE") != std::string::npos);
  CHECK(text.find("image of app -> v2") != std::string::npos);
  CHECK(text.find("webhook: in-place update started") != std::string::npos);
}

TEST_CASE("plugin explain: an env change names the blocking path") {
  json::Document d = Parse(Deployment("v1", "2"));
  json::Document rss =
      Parse("{\"items\":[" + Rs("web-2", 2, "v1", "1") + "," + Rs("web-3", 3, "v1", "2") + "]}");
  StatusOr<Explanation> e = Explain(d, rss);
  REQUIRE_MESSAGE(e.ok(), e.status().message());
  CHECK(e->kind == Explanation::Kind::kNative);
  CHECK(e->blockingPath == "spec.template.spec.containers[0].env");
  CHECK(!e->reason.empty());
  CHECK(e->decisionReason == "no in-place update: spec.template.spec.containers[0].env changed");
  CHECK(RenderExplanation(*e).find("blocking path: spec.template.spec.containers[0].env") !=
        std::string::npos);
}

TEST_CASE("plugin explain: not opted in, no history, no change") {
  json::Document rss = Parse("{\"items\":[" + Rs("web-3", 3, "v1", "1") + "]}");
  json::Document out = Parse(Deployment("v1", "1", false));
  CHECK(Explain(out, rss).value().kind == Explanation::Kind::kNotOptedIn);
  json::Document d = Parse(Deployment("v1", "1"));
  CHECK(Explain(d, rss).value().kind == Explanation::Kind::kNoHistory);
  json::Document same =
      Parse("{\"items\":[" + Rs("web-2", 2, "v1", "1") + "," + Rs("web-3", 3, "v1", "1") + "]}");
  CHECK(Explain(d, same).value().kind == Explanation::Kind::kNoChange);
}

TEST_CASE("plugin explain: while an update runs, the change is from where it started") {
  json::Document rs1 = Parse(Rs("web-1", 1, "v1", "1"));
  const std::string from = TemplateHash(test::AsTemplate(rs1["spec"]["template"]));
  json::Document d = Parse(Deployment("v2", "1"));
  json::Value record;
  const std::string text =
      R"({"from":")" + from + R"(","to":"x","pausedByUs":true,"startedAt":"2026-12-02T10:00:00Z"})";
  record.SetString(json::Ref(text), d.GetAllocator());
  d["metadata"]["annotations"].AddMember("inplace-webhook.io/in-progress", record,
                                         d.GetAllocator());
  // Revision 2 (v0) is newer than the run's start but is not where the pods came from.
  json::Document rss =
      Parse("{\"items\":[" + Rs("web-1", 1, "v1", "1") + "," + Rs("web-2", 2, "v0", "1") + "]}");
  StatusOr<Explanation> e = Explain(d, rss);
  REQUIRE_MESSAGE(e.ok(), e.status().message());
  CHECK(e->kind == Explanation::Kind::kInPlace);
  CHECK(e->from == "template " + from + " (where the running update started)");
  CHECK(e->plan.images == std::map<std::string, std::string>{{"app", "v2"}});
}

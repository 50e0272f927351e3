// The patch builder: what each setter writes, lists merged by their key, a body resumed.
#include <doctest/doctest.h>

#include "lib/json.h"
#include "lib/kube_patch.h"

using namespace iw;

TEST_CASE("PatchBuilder: labels, annotations (null removes), spec.paused, in the order first set") {
  kube::PatchBuilder p;
  CHECK(p.empty());
  p.Label("a", "1").Annotation("x", std::nullopt).Label("b", std::nullopt).Paused(false);
  p.Label("a", "2");  // set again: replaced, not repeated
  CHECK_FALSE(p.empty());
  CHECK(json::Serialize(p.Take()) ==
        R"({"metadata":{"labels":{"a":"2","b":null},"annotations":{"x":null}},)"
        R"("spec":{"paused":false}})");
  CHECK(p.empty());  // taken
}

TEST_CASE("PatchBuilder: containers and conditions merge by their key") {
  kube::PatchBuilder p;
  p.ContainerImage("app", "img:2")
      .ContainerResource("app", "requests", "cpu", "500m")
      .ContainerResource("side", "limits", "memory", "64Mi")
      .ContainerResource("app", "requests", "memory", "1Gi");
  p.SetCondition({"c", "False", "R", "m", "u0", "t0"})
      .SetCondition({"c", "True", "R2", "m2", "", "t1"});
  CHECK(json::Serialize(p.Take()) ==
        R"({"spec":{"containers":[{"name":"app","image":"img:2","resources":{"requests":)"
        R"({"cpu":"500m","memory":"1Gi"}}},{"name":"side","resources":{"limits":)"
        R"({"memory":"64Mi"}}}]},"status":{"conditions":[{"type":"c","status":"True",)"
        R"("reason":"R2","message":"m2","lastUpdateTime":"u0","lastTransitionTime":"t1"}]}})");
}

TEST_CASE("PatchBuilder: a body resumed, another's metadata merged in (its value wins)") {
  kube::PatchBuilder gate;
  gate.SetCondition({"g", "True", "r", "m", "", "t"});
  kube::PatchBuilder state;
  state.Label("s", "Normal").Annotation("ts", "t").Annotation("marker", std::nullopt);
  kube::PatchBuilder both(gate.Take());
  both.Annotation("ts", "old").MergeMetadata(state);
  CHECK(json::Serialize(both.Take()) ==
        R"({"status":{"conditions":[{"type":"g","status":"True","reason":"r","message":"m",)"
        R"("lastTransitionTime":"t"}]},"metadata":{"annotations":{"ts":"t","marker":null},)"
        R"("labels":{"s":"Normal"}}})");
  json::Document d;
  d.SetArray();
  kube::PatchBuilder fromArray(std::move(d));  // not an object: starts empty
  CHECK(fromArray.empty());
}

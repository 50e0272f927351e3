// lib/label_selector.h: the one selector type of the loop's list calls and the informer's cache.
// What the loop relies on: a Deployment's spec.selector becomes the `?labelSelector=` string the
// API server selects the same pods with, and the string form reads back to the same selector.
#include <doctest/doctest.h>

#include <string>

#include "lib/label_selector.h"
#include "test_json.h"

using namespace iw;
using iw::kube::LabelSelector;
using test::Parse;

TEST_CASE("LabelSelector::ToString gives the ?labelSelector= form of spec.selector") {
  struct Row {
    const char* selector;
    const char* query;
  };
  for (const Row& r : {
           Row{R"({"matchLabels":{"app":"web","tier":"fe"}})", "app=web,tier=fe"},
           Row{R"({"matchLabels":{"app":"web"},"matchExpressions":[
                 {"key":"env","operator":"In","values":["a","b"]},
                 {"key":"x","operator":"NotIn","values":["c"]},{"key":"y","operator":"Exists"},
                 {"key":"z","operator":"DoesNotExist"}]})",
               "app=web,env in (a,b),x notin (c),y,!z"},
           Row{"{}", ""},
       }) {
    CAPTURE(r.selector);
    json::Document d = Parse(r.selector);
    StatusOr<LabelSelector> s = LabelSelector::FromJson(d);
    REQUIRE_MESSAGE(s.ok(), s.status().message());
    CHECK(s->ToString() == r.query);
    // The string reads back to a selector that selects the same labels.
    StatusOr<LabelSelector> back = LabelSelector::Parse(s->ToString());
    REQUIRE_MESSAGE(back.ok(), back.status().message());
    CHECK(back->ToString() == r.query);
    for (const char* labels : {R"({"app":"web","tier":"fe"})", R"({"app":"web","env":"a","y":"1"})",
                               R"({"app":"web","env":"b","y":"","x":"c"})", "{}"}) {
      CAPTURE(labels);
      json::Document l = Parse(labels);
      CHECK(back->Matches(&l) == s->Matches(&l));
    }
  }
}

TEST_CASE("LabelSelector::FromJson refuses what it cannot read whole, naming why") {
  for (const char* bad : {R"({"matchExpressions":[{"key":"x","operator":"Gt","values":["1"]}]})",
                          R"({"matchLabels":{"app":1}})", "[]"}) {
    CAPTURE(bad);
    json::Document d = Parse(bad);
    const Status s = LabelSelector::FromJson(d).status();
    CHECK(s.code() == Status::Code::kInvalidArgument);
    CHECK_FALSE(s.message().empty());
  }
}

// lib/status.h: the one failure type. What callers rely on: OK is the default and has no message,
// the named constructors keep code and message, Prefixed adds context to failures only, and a
// StatusOr holds either a value or a failure, never both.
#include <doctest/doctest.h>

#include <memory>
#include <string>

#include "lib/status.h"

using iw::Status;
using iw::StatusOr;

TEST_CASE("Status: OK by default, named failures keep code and message") {
  CHECK(Status().ok());
  CHECK(Status::Ok().message().empty());
  CHECK(Status() == Status::Ok());
  struct Row {
    Status status;
    Status::Code code;
  };
  for (const Row& r : {Row{Status::InvalidArgument("m"), Status::Code::kInvalidArgument},
                       Row{Status::TooLarge("m"), Status::Code::kTooLarge},
                       Row{Status::NotFound("m"), Status::Code::kNotFound},
                       Row{Status::IOError("m"), Status::Code::kIOError},
                       Row{Status::Internal("m"), Status::Code::kInternal}}) {
    CHECK_FALSE(r.status.ok());
    CHECK(r.status.code() == r.code);
    CHECK(r.status.message() == "m");
  }
  CHECK(Status::TooLarge("x").IsTooLarge());
  CHECK_FALSE(Status::InvalidArgument("x").IsTooLarge());
  CHECK(Status::NotFound("x").IsNotFound());
  CHECK(Status::InvalidArgument("a") != Status::InvalidArgument("b"));
  CHECK(Status::InvalidArgument("a") != Status::Internal("a"));
}

TEST_CASE("Status::Prefixed adds context to a failure and leaves OK alone") {
  CHECK(Status::Ok().Prefixed("reading x").ok());
  CHECK(Status::Ok().Prefixed("reading x").message().empty());
  Status s = Status::IOError("no such file").Prefixed("reading ca.crt");
  CHECK(s.code() == Status::Code::kIOError);
  CHECK(s.message() == "reading ca.crt: no such file");
}

TEST_CASE("StatusOr holds a value or a failure") {
  StatusOr<std::string> v = std::string("value");
  REQUIRE(v.ok());
  CHECK(v.status().ok());
  CHECK(*v == "value");
  CHECK(v->size() == 5);
  std::string moved = *std::move(v);
  CHECK(moved == "value");

  StatusOr<std::string> f = Status::NotFound("gone");
  CHECK_FALSE(f.ok());
  CHECK(f.status().IsNotFound());
  CHECK(f.status().message() == "gone");

  // A move-only value works too.
  StatusOr<std::unique_ptr<int>> p = std::make_unique<int>(7);
  REQUIRE(p.ok());
  CHECK(**p == 7);
}

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "server/process/log.h"

using namespace iw;
using std::chrono::milliseconds;
using std::chrono::seconds;

TEST_CASE("log rate limiter: a burst per kind per interval, then counted and reported") {
  log::RateLimiter limiter(3, seconds(10));
  const auto t0 = log::RateLimiter::Clock::time_point{} + seconds(1000);
  struct Step {
    const char* kind;
    milliseconds at;
    bool written;
    uint64_t suppressed;  // reported on a written line
  };
  const std::vector<Step> steps = {
      {"bad_http_request", milliseconds(0), true, 0},
      {"bad_http_request", milliseconds(1), true, 0},
      {"bad_http_request", milliseconds(2), true, 0},
      {"bad_http_request", milliseconds(3), false, 0},     // burst spent
      {"request_timeout", milliseconds(4), true, 0},       // another kind has its own burst
      {"bad_http_request", milliseconds(9999), false, 0},  // same window
      {"bad_http_request", milliseconds(10000), true, 2},  // new window: says 2 were dropped
      {"bad_http_request", milliseconds(10001), true, 0},  // the count was reported once
      {"bad_http_request", milliseconds(10002), true, 0},
      {"bad_http_request", milliseconds(10003), false, 0},
      {"bad_http_request", milliseconds(60000), true, 1},
  };
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    CAPTURE(i);
    uint64_t suppressed = 99;
    bool written = limiter.Admit(s.kind, t0 + s.at, suppressed);
    CHECK(written == s.written);
    if (written) CHECK(suppressed == s.suppressed);
  }
  auto totals = limiter.SuppressedTotals();
  REQUIRE(totals.size() == 2);
  CHECK(totals[0] == std::pair<std::string, uint64_t>{"bad_http_request", 3});
  CHECK(totals[1] == std::pair<std::string, uint64_t>{"request_timeout", 0});
}

TEST_CASE("log rate limiter: threads logging one kind together write at most the burst") {
  log::RateLimiter limiter(5, seconds(10));
  const auto now = log::RateLimiter::Clock::now();
  std::atomic<int> written{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        uint64_t s = 0;
        if (limiter.Admit("connection_failed", now, s)) written.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(written.load() == 5);
  auto totals = limiter.SuppressedTotals();
  REQUIRE(totals.size() == 1);
  CHECK(totals[0].second == 4000 - 5);
}

TEST_CASE("log suppressed lines are exposed as a counter per kind") {
  for (int i = 0; i < log::RateLimiter::kBurst + 2; ++i) {
    log::Limited(log::Level::kError, "unit_test_kind", "unit test line",
                 {{"i", std::to_string(i)}});
  }
  std::string out;
  log::RenderSuppressedMetrics(out);
  CHECK(out.find("# TYPE inplace_webhook_log_suppressed_total counter\n") != std::string::npos);
  CHECK(out.find("inplace_webhook_log_suppressed_total{kind=\"unit_test_kind\"} 2\n") !=
        std::string::npos);
}

#include "hooks/loop_signal.h"

#include <doctest/doctest.h>

using namespace std::chrono_literals;
namespace ls = iw::loop_signal;

TEST_CASE("loop_signal: /loopz answers") {
  struct Row {
    int status;
    const char* body;
    std::optional<bool> want;
  };
  const Row rows[] = {
      {200, "alive", true},
      {200, "alive\n", true},
      {503, "no loop\n", false},
      {503, "no loop", false},
      {200, "ok", {}},
      {503, "shutting down", {}},
      {500, "alive", {}},
      {404, "not found\n", {}},
      {200, "", {}},
      {0, "", {}},
  };
  for (const Row& r : rows) {
    CAPTURE(r.status);
    CAPTURE(r.body);
    CHECK(ls::ParseAnswer(r.status, r.body) == r.want);
  }
}

TEST_CASE("loop_signal: alive only while the last alive answer is fresh") {
  const ls::Clock::time_point t0{1000s};
  struct Row {
    std::optional<ls::Clock::time_point> last;
    ls::Clock::time_point now;
    bool want;
  };
  const Row rows[] = {
      {std::nullopt, t0, false},   // never answered alive
      {t0, t0, true},              // just now
      {t0, t0 + 3s, true},         // at the bound
      {t0, t0 + 3s + 1ms, false},  // past it: no answer since
      {t0, t0 + 60s, false},       // the controller gone for a minute
      {t0 + 1s, t0, true},         // a future time (never on a steady clock)
  };
  for (const Row& r : rows) {
    CHECK(ls::Alive(r.last, r.now, 3s) == r.want);
  }
}

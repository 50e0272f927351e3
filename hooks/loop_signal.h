// The loop-liveness signal of a webhook that holds no credentials (--role=webhook, DESIGN.md §9.4):
// it cannot read the leader Lease, so it asks the controller Service's /loopz (plain HTTP on the
// probe port) and keeps the answer for a short time. Pure decisions; the poller is server/.
#pragma once

#include <chrono>
#include <optional>
#include <string_view>

namespace iw::loop_signal {

using Clock = std::chrono::steady_clock;

// /loopz answers 200 "alive" when the answering process leads (or saw the Lease renewed within
// the renew deadline), 503 "no loop" otherwise. Anything else (another status, another body, no
// answer) says nothing: nullopt.
std::optional<bool> ParseAnswer(int httpStatus, std::string_view body);

// Whether a loop is known to run, from the time of the last poll that answered "alive" (nullopt:
// none, or the latest answer said "no loop" or could not be read): true iff it is at most
// `staleAfter` old. A poller that stops getting answers thus reports false after `staleAfter`.
bool Alive(std::optional<Clock::time_point> lastAlive, Clock::time_point now,
           Clock::duration staleAfter);

}  // namespace iw::loop_signal

// How long the API client waits before trying again: exponential backoff with jitter (the
// retries of a call, the reconnects of WatchFrom, and other callers' own loops) and the server's
// Retry-After. The sleep itself is lib/stop_sleep.h's (WatchFrom) or the Client's own (Shutdown
// ends it).
//
// Thread safety: all of it from any thread; the jitter comes from a generator per thread
// (JitterRng).
#pragma once

#include <chrono>
#include <optional>
#include <random>
#include <string_view>

namespace iw::kube {

// A duration to wait before retry `attempt` (0-based): base * 2^attempt capped at `max`, then
// jittered into [d/2, d].
std::chrono::milliseconds Backoff(int attempt, std::chrono::milliseconds base,
                                  std::chrono::milliseconds max);

// The calling thread's random generator for jitter (seeded from std::random_device).
std::mt19937_64& JitterRng();

// The seconds of a Retry-After header value (integer form only, as client-go; surrounding
// whitespace allowed), or nullopt (also for "", an absent header).
std::optional<int> RetryAfterSeconds(std::string_view value);

}  // namespace iw::kube

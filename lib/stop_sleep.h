// Sleeping that a std::stop_token cuts short, for the threads that wait between attempts (the
// informers, the access monitor, the start-up checks, the API client's retries).
// Thread safety: a free function; any thread may call it with its own stop token.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stop_token>

namespace iw {

// Sleeps `delay`, or less when `stop` is requested meanwhile (or already was). Returns true when
// the whole delay passed without a stop request.
template <class Rep, class Period>
bool SleepUnlessStopped(std::chrono::duration<Rep, Period> delay, std::stop_token stop) {
  std::mutex m;
  std::condition_variable_any cv;
  std::unique_lock lock(m);
  cv.wait_for(lock, stop, delay, [] { return false; });
  return !stop.stop_requested();
}

}  // namespace iw

#include "hooks/loop_signal.h"

namespace iw::loop_signal {

std::optional<bool> ParseAnswer(int httpStatus, std::string_view body) {
  while (!body.empty() && (body.back() == '\n' || body.back() == '\r' || body.back() == ' ')) {
    body.remove_suffix(1);
  }
  if (httpStatus == 200 && body == "alive") return true;
  if (httpStatus == 503 && body == "no loop") return false;
  return std::nullopt;
}

bool Alive(std::optional<Clock::time_point> lastAlive, Clock::time_point now,
           Clock::duration staleAfter) {
  if (!lastAlive) return false;
  if (*lastAlive > now) return true;  // a steady clock does not go back; be safe anyway
  return now - *lastAlive <= staleAfter;
}

}  // namespace iw::loop_signal

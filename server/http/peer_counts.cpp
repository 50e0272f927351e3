#include "server/http/peer_counts.h"

#include <algorithm>

namespace iw::http {

std::string_view PeerCounts::Host(std::string_view address) {
  if (!address.empty() && address.front() == '[') {
    size_t end = address.find(']');
    return end == std::string_view::npos ? address : address.substr(1, end - 1);
  }
  size_t colon = address.rfind(':');
  return colon == std::string_view::npos ? address : address.substr(0, colon);
}

PeerCounts::Hold PeerCounts::Join(std::string_view address) {
  std::lock_guard lock(mu_);
  if (table_.size() >= nextSweep_) {  // amortised: the table stays within twice the live peers
    std::erase_if(table_, [](const auto& entry) { return entry.second.use_count() == 1; });
    nextSweep_ = std::max<size_t>(64, table_.size() * 2);
  }
  auto& count = table_[std::string(Host(address))];
  if (!count) count = std::make_shared<std::atomic<size_t>>(0);
  count->fetch_add(1, std::memory_order_relaxed);
  return Hold(count);
}

size_t PeerCounts::Peers() const {
  std::lock_guard lock(mu_);
  return table_.size();
}

}  // namespace iw::http

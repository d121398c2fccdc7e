// See refusal_sampler.h.
#include "refusal_sampler.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace sluice::dataplane {

RefusalSampler::RefusalSampler(size_t capacity, time::Nanos interval) : ring_(capacity) {
  if (capacity == 0) return;
  interval_ = interval;
  next_ = 0;
}

time::Nanos RefusalSampler::interval_for(unsigned per_second, unsigned workers) noexcept {
  if (per_second == 0) return 0;
  return time::kNanosPerSecond * std::max(workers, 1u) / per_second;
}

size_t RefusalSampler::capacity_for(unsigned per_second, unsigned workers) noexcept {
  if (per_second == 0) return 0;
  const size_t share = (per_second + std::max(workers, 1u) - 1) / std::max(workers, 1u);
  return std::bit_ceil(std::clamp<size_t>(share, 64, 4096));
}

void RefusalSampler::take(time::Nanos now, const limiter::Decision& d, const net::IpAddress& client) noexcept {
  next_ = now + interval_;
  RefusalRecord* slot = ring_.slot();
  if (slot == nullptr) return;
  RefusalRecord& r = *slot;
  r.at = now;
  r.status = d.status;
  r.has_rule = d.rule >= 0;
  r.rule_slot = d.rule_counter;
  r.label = d.label;
  if (r.label.kind == limiter::KeyLabel::Kind::kNone) {
    r.label.kind = limiter::KeyLabel::Kind::kClientIp;
    r.label.len = static_cast<uint8_t>(client.bytes.size());
    std::memcpy(r.label.bytes.data(), client.bytes.data(), client.bytes.size());
  }
  ring_.publish();
}

}  // namespace sluice::dataplane

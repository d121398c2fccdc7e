// See refusal_sampler.h. The ring is Lamport's single-producer,
// single-consumer queue: each side writes only its own position, the
// record is published by the release store of `written_`, freed by the
// release store of `read_`.
#include "refusal_sampler.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace sluice::dataplane {

RefusalSampler::RefusalSampler(size_t capacity, time::Nanos interval) {
  if (capacity == 0) return;
  const size_t rounded = std::bit_ceil(capacity);
  ring_ = std::make_unique<RefusalRecord[]>(rounded);
  mask_ = rounded - 1;
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
  const uint64_t w = written_.load(std::memory_order_relaxed);
  if (w - read_.load(std::memory_order_acquire) > mask_) {
    dropped_.store(dropped_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return;
  }
  RefusalRecord& r = ring_[w & mask_];
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
  written_.store(w + 1, std::memory_order_release);
}

size_t RefusalSampler::drain(std::span<RefusalRecord> out) noexcept {
  const uint64_t r = read_.load(std::memory_order_relaxed);
  const uint64_t available = written_.load(std::memory_order_acquire) - r;
  const size_t n = static_cast<size_t>(std::min<uint64_t>(available, out.size()));
  for (size_t i = 0; i < n; ++i) out[i] = ring_[(r + i) & mask_];
  read_.store(r + n, std::memory_order_release);
  return n;
}

}  // namespace sluice::dataplane

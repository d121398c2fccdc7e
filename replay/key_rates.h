// Each key's busiest stretch of its bucket's period, against the bucket's
// limit: the most requests a key sent in any window as long as the period
// (a sliding window over its request times), binned by peak / limit into
// RateDistribution. Tells an operator how near the limit the clients run,
// not only who went over it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "limiter/compiled_policy.h"
#include "replay/replay_result.h"

namespace sluice::replay {

// The limit a bucket's period allows: continuous buckets count per period
// (the policy's `rate`), calendar buckets their requests per minute (0: no
// request quota, nothing to compare with).
struct PeriodLimit {
  uint64_t limit = 0;
  time::Nanos period = 0;
};
[[nodiscard]] PeriodLimit period_limit(const policy::BucketSpec& bucket) noexcept;

// The most of a key's request times (given in order) that fall in any
// window [t, t + period), worked out as the times come: the times of the last period are kept in a ring, at most `cap` of them, so a
// key costs memory for its busiest period, not for every request it sent.
// A key that sends more than `cap` in one period has its peak cut at `cap`
// (cut() says so): the cap is set above the last bin of the distribution,
// where the exact figure no longer moves the key.
class WindowPeak {
 public:
  WindowPeak() = default;
  WindowPeak(time::Nanos period, size_t cap) : period_(period), cap_(cap) {}

  void add(time::Nanos at);
  [[nodiscard]] uint64_t peak() const noexcept { return peak_; }
  [[nodiscard]] bool cut() const noexcept { return cut_; }
  [[nodiscard]] time::Nanos period() const noexcept { return period_; }

 private:
  [[nodiscard]] time::Nanos& slot(size_t i) noexcept { return ring_[(head_ + i) & (ring_.size() - 1)]; }
  void grow();

  time::Nanos period_ = 0;
  size_t cap_ = 0;
  std::vector<time::Nanos> ring_;  // a power of two long
  size_t head_ = 0, size_ = 0;
  uint64_t peak_ = 0;
  bool cut_ = false;
};

// The ring's cap for a limit: past kMaxRatio times the limit (the
// distribution's last bin), at least 64, at most 65 536.
[[nodiscard]] size_t peak_cap(uint64_t limit) noexcept;

// Adds a key's peak to `d` (its limit and period set).
void add_key_peak(RateDistribution& d, uint64_t peak, uint64_t limit) noexcept;

}  // namespace sluice::replay

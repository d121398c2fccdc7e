// Each key's busiest stretch of its bucket's period, against the bucket's
// limit: the most requests a key sent in any window as long as the period
// (a sliding window over its request times), binned by peak / limit into
// RateDistribution. Tells an operator how near the limit the clients run,
// not only who went over it.
#pragma once

#include <cstdint>
#include <span>

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

// The most of `times` (sorted) that fall in any window [t, t + period).
[[nodiscard]] uint64_t busiest_window(std::span<const time::Nanos> times, time::Nanos period) noexcept;

// Adds a key's peak to `d` (its limit and period set).
void add_key_peak(RateDistribution& d, uint64_t peak, uint64_t limit) noexcept;

}  // namespace sluice::replay

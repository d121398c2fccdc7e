// A worker's allowance for something an outsider can make it do: a token
// bucket of `per_second` refilled continuously up to `burst`. The adopter's
// probes, challenge ACKs and the resets sent to the origin for segments of
// unknown connections each have one, so that a flood of forged segments
// costs the appliance, the origin and the clients named in them a bounded
// number of segments a second, whatever the flood's rate.
#pragma once

#include <algorithm>
#include <cstdint>

#include "time/clock.h"

namespace sluice::dataplane {

class Allowance {
 public:
  constexpr Allowance(uint32_t per_second, uint32_t burst) noexcept
      : per_second_(per_second), burst_(burst), left_(burst) {}

  // Whether one more may go at `now` (one taken if so).
  [[nodiscard]] bool take(time::Nanos now) noexcept {
    const time::Nanos elapsed = now - refilled_;
    const time::Nanos step = time::kNanosPerSecond / per_second_;
    // Past the time a whole burst takes to refill, the allowance is full:
    // the product below would overflow for a long idle (or the first call,
    // whose `refilled_` is 0 on a clock of ns since 1970).
    if (elapsed >= step * burst_) {
      left_ = burst_;
      refilled_ = now;
    } else if (elapsed >= step) {
      const uint64_t add = static_cast<uint64_t>(elapsed) * per_second_ / time::kNanosPerSecond;
      left_ = static_cast<uint32_t>(std::min<uint64_t>(burst_, left_ + add));
      refilled_ = now;
    }
    if (left_ == 0) return false;
    --left_;
    return true;
  }

 private:
  uint32_t per_second_;
  uint32_t burst_;
  uint32_t left_;
  time::Nanos refilled_ = 0;
};

}  // namespace sluice::dataplane

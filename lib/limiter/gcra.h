// The generic cell rate algorithm: a token bucket kept as one number, the
// theoretical arrival time (TAT) of the next request at the steady rate. It
// covers both of the seeds' continuous budgets: "N per minute, refilled
// continuously" (TB17: rate N/60 s, burst N) and "rate per second with a
// burst" (RF07). One 64-bit word per bucket, updated by compare-and-swap; a
// refusal leaves it untouched.
#pragma once

#include <cstdint>

#include "time/clock.h"

namespace sluice::limiter {

using time::Nanos;

struct GcraLimit {
  Nanos interval = 0;   // emission interval: one request per `interval` at the steady rate
  uint32_t burst = 0;   // requests a full bucket allows back to back
  Nanos capacity = 0;   // burst * interval: how far TAT may run ahead of now

  // `count` requests per `period`, with `burst` back to back from full. The
  // interval is rounded up to whole nanoseconds, so rounding can only make a
  // budget stricter, never looser. Returns false for numbers that make no
  // sense or would overflow (zero count, burst or period; capacity past 2^62 ns).
  [[nodiscard]] static bool make(uint64_t count, Nanos period, uint32_t burst, GcraLimit& out) noexcept;
};

struct GcraDecision {
  bool admit;
  uint64_t new_tat;        // the word to store if admitted
  uint32_t remaining;      // whole requests still available after this one (0 when refused)
  uint32_t reset_s;        // seconds until the bucket is full again, rounded up
  uint32_t retry_after_s;  // when refused: seconds until one request is available, rounded up, >= 1
  // Admitted late (a rule's delay): how long until it conforms, 0: now.
  Nanos wait = 0;
};

// One request at `now` against a bucket whose TAT is `tat` (0: never used).
// With `max_wait`, a request that would conform within it is admitted
// late instead of refused (nginx's burst with delay): the TAT moves on as
// for any admission, and `wait` says when it conforms. A key's late
// admissions are spaced one interval apart and none waits longer than
// max_wait, so at most ceil(max_wait / interval) of them wait at once.
[[nodiscard]] GcraDecision gcra_decide(uint64_t tat, Nanos now, const GcraLimit& limit, Nanos max_wait = 0) noexcept;

// A bucket as it stands at `now`, nothing charged: the requests it would
// admit back to back, and the seconds until it is full, rounded up.
struct GcraStanding {
  uint32_t available;
  uint32_t reset_s;
};
[[nodiscard]] GcraStanding gcra_standing(uint64_t tat, Nanos now, const GcraLimit& limit) noexcept;

// True if a bucket with this TAT is full at `now`: dropping it changes no
// answer, since a missing bucket is a full one.
[[nodiscard]] inline bool gcra_full(uint64_t tat, Nanos now) noexcept { return tat <= now; }

// Seconds, rounded up, that `d` nanoseconds span.
[[nodiscard]] inline uint32_t ceil_seconds(Nanos d) noexcept {
  return static_cast<uint32_t>((d + time::kNanosPerSecond - 1) / time::kNanosPerSecond);
}

}  // namespace sluice::limiter

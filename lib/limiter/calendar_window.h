// Calendar-minute windows (DQ02-DQ05): requests per minute, counted on
// admission including refused requests, and tokens per minute, charged after a
// request ends; both reset at every full UTC minute, not sliding. Each counter
// is one 64-bit word, the minute it belongs to in the high half and the count
// in the low half, so a word from an earlier minute reads as zero and nothing
// has to reset it.
#pragma once

#include <cstdint>

#include "time/clock.h"

namespace sluice::limiter {

using time::Nanos;

struct WindowLimit {
  uint32_t requests_per_minute = 0;  // 0: no RPM quota
  uint64_t tokens_per_minute = 0;    // 0: no TPM quota
};

struct WindowDecision {
  bool admit;
  bool write;              // whether new_requests differs from the word read
  uint64_t new_requests;   // the RPM word to store
  uint32_t remaining;      // requests left this minute after this one
  uint32_t reset_s;        // seconds until the next full minute, 1..60
  uint32_t retry_after_s;  // when refused: the same, 1..60 (DQ07)
};

[[nodiscard]] inline uint64_t minute_of(Nanos now) noexcept { return now / time::kNanosPerMinute; }
[[nodiscard]] inline uint64_t pack(uint64_t minute, uint64_t count) noexcept {
  return (minute << 32) | (count & 0xffffffffull);
}
// The count a word holds for `minute`: zero if it belongs to another minute.
[[nodiscard]] inline uint32_t count_in(uint64_t word, uint64_t minute) noexcept {
  return (word >> 32) == (minute & 0xffffffffull) ? static_cast<uint32_t>(word) : 0;
}

// One request at `now`. The request is counted whether admitted or not (DQ04);
// the count stops at the quota, past which counting changes no answer, so a
// saturated minute's refusals write nothing. Refused when this minute's
// requests or tokens have reached their quota (DQ05: the token total may
// exceed it, by the last request's tokens).
[[nodiscard]] WindowDecision window_decide(uint64_t requests_word, uint64_t tokens_word, Nanos now,
                                           const WindowLimit& limit) noexcept;

// The token word after charging `tokens` at `now`, saturating at 2^32 - 1.
[[nodiscard]] uint64_t window_charge(uint64_t tokens_word, uint64_t tokens, Nanos now) noexcept;

// Seconds until the next full minute, 1..60.
[[nodiscard]] uint32_t seconds_to_next_minute(Nanos now) noexcept;

// True if both words belong to minutes before `now`'s: dropping the bucket
// changes no answer.
[[nodiscard]] inline bool window_idle(uint64_t requests_word, uint64_t tokens_word, Nanos now) noexcept {
  const uint64_t m = minute_of(now);
  return count_in(requests_word, m) == 0 && count_in(tokens_word, m) == 0;
}

}  // namespace sluice::limiter

// Calendar windows (DQ02-DQ05, and hour and day quotas beside them):
// requests per window, counted on admission including refused requests,
// and tokens per window, charged after a request ends; both reset when the
// window ends (a full UTC minute, hour or day, or an hour or day begun at a
// configured UTC offset), not sliding. Each counter is one 64-bit word: the
// window's first minute (minutes since the epoch) in the high half, the
// count in the low half. A word from an earlier window reads as zero, so
// nothing has to reset it; and since every span names its windows by their
// first minute, words compare in time order whatever the span, so a bucket
// whose span changed on a reload reads its old words as an earlier window's
// (or as another window's: zero) and never as the current one's.
#pragma once

#include <cstdint>

#include "time/clock.h"

namespace sluice::limiter {

using time::Nanos;

// Where a bucket's windows begin and how long they last.
struct Calendar {
  static constexpr uint32_t kMinute = 1, kHour = 60, kDay = 1440;  // spans, in minutes
  static constexpr int32_t kMaxOffsetMinutes = 14 * 60;            // UTC-14:00 .. UTC+14:00
  uint32_t span_minutes = kMinute;
  int32_t offset_minutes = 0;  // the windows begin at local midnight (and local hours) of UTC+offset

  // The first minute (since the epoch, UTC) of the window holding `now`.
  [[nodiscard]] uint64_t window_of(Nanos now) const noexcept {
    const int64_t local = static_cast<int64_t>(now / time::kNanosPerMinute) + offset_minutes;
    return static_cast<uint64_t>(local - local % static_cast<int64_t>(span_minutes) - offset_minutes);
  }
  // Seconds until the window holding `now` ends, 1..span.
  [[nodiscard]] uint32_t seconds_left(Nanos now) const noexcept;
  [[nodiscard]] uint32_t span_seconds() const noexcept { return span_minutes * 60; }
  [[nodiscard]] Nanos span() const noexcept { return Nanos{span_minutes} * time::kNanosPerMinute; }
  // A span and offset this code writes: bytes read back from a file are
  // checked with it before they are used.
  [[nodiscard]] bool valid() const noexcept {
    return (span_minutes == kMinute || span_minutes == kHour || span_minutes == kDay) &&
           offset_minutes >= -kMaxOffsetMinutes && offset_minutes <= kMaxOffsetMinutes;
  }
  bool operator==(const Calendar&) const = default;
};

// A key's quotas in its window (0: none of that kind).
struct WindowLimit {
  uint32_t requests = 0;
  uint64_t tokens = 0;
  Calendar calendar{};
};

struct WindowDecision {
  bool admit;
  bool write;              // whether new_requests differs from the word read
  uint64_t new_requests;   // the request word to store
  uint32_t remaining;      // requests left this window after this one
  uint32_t reset_s;        // seconds until the window ends, 1..span
  uint32_t retry_after_s;  // when refused: the same (DQ07)
};

[[nodiscard]] inline uint64_t pack(uint64_t window, uint64_t count) noexcept {
  return (window << 32) | (count & 0xffffffffull);
}
// The count a word holds for `window` (its first minute): zero if it
// belongs to another window.
[[nodiscard]] inline uint32_t count_in(uint64_t word, uint64_t window) noexcept {
  return (word >> 32) == (window & 0xffffffffull) ? static_cast<uint32_t>(word) : 0;
}
// The window a word was counted in (its first minute).
[[nodiscard]] inline uint32_t window_in(uint64_t word) noexcept { return static_cast<uint32_t>(word >> 32); }

// One request at `now`. The request is counted whether admitted or not (DQ04);
// the count stops at the quota, past which counting changes no answer, so a
// saturated window's refusals write nothing. Refused when this window's
// requests or tokens have reached their quota (DQ05: the token total may
// exceed it, by the last request's tokens).
[[nodiscard]] WindowDecision window_decide(uint64_t requests_word, uint64_t tokens_word, Nanos now,
                                           const WindowLimit& limit) noexcept;

// The token word after charging `tokens` at `now`, saturating at 2^32 - 1.
[[nodiscard]] uint64_t window_charge(uint64_t tokens_word, uint64_t tokens, Nanos now,
                                     const Calendar& calendar) noexcept;

// True if both words belong to windows before `now`'s: dropping the bucket
// changes no answer.
[[nodiscard]] inline bool window_idle(uint64_t requests_word, uint64_t tokens_word, Nanos now,
                                      const Calendar& calendar) noexcept {
  const uint64_t w = calendar.window_of(now);
  return count_in(requests_word, w) == 0 && count_in(tokens_word, w) == 0;
}

}  // namespace sluice::limiter

// See calendar_window.h.
#include "limiter/calendar_window.h"

namespace sluice::limiter {

uint32_t seconds_to_next_minute(Nanos now) noexcept {
  const Nanos into = now % time::kNanosPerMinute;
  const Nanos left = time::kNanosPerMinute - into;  // 1 ns .. 60 s
  return static_cast<uint32_t>((left + time::kNanosPerSecond - 1) / time::kNanosPerSecond);
}

WindowDecision window_decide(uint64_t requests_word, uint64_t tokens_word, Nanos now,
                             const WindowLimit& limit) noexcept {
  const uint64_t minute = minute_of(now);
  const uint32_t requests = count_in(requests_word, minute);
  const uint32_t tokens = count_in(tokens_word, minute);
  const uint32_t rpm = limit.requests_per_minute ? limit.requests_per_minute : UINT32_MAX;
  const bool over_requests = requests >= rpm;
  const bool over_tokens = limit.tokens_per_minute != 0 && tokens >= limit.tokens_per_minute;
  const uint32_t counted = over_requests ? requests : requests + 1;
  const uint64_t word = pack(minute, counted);
  const uint32_t reset = seconds_to_next_minute(now);
  const bool admit = !over_requests && !over_tokens;
  return {admit, word != requests_word, word, admit ? rpm - counted : 0, reset, admit ? 0 : reset};
}

uint64_t window_charge(uint64_t tokens_word, uint64_t tokens, Nanos now) noexcept {
  const uint64_t minute = minute_of(now);
  const uint64_t total = uint64_t{count_in(tokens_word, minute)} + tokens;
  return pack(minute, total > 0xffffffffull ? 0xffffffffull : total);
}

}  // namespace sluice::limiter

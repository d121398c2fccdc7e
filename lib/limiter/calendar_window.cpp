// See calendar_window.h.
#include "limiter/calendar_window.h"

namespace sluice::limiter {

uint32_t Calendar::seconds_left(Nanos now) const noexcept {
  const Nanos end = (window_of(now) + span_minutes) * time::kNanosPerMinute;
  const Nanos left = end - now;  // 1 ns .. span
  return static_cast<uint32_t>((left + time::kNanosPerSecond - 1) / time::kNanosPerSecond);
}

WindowDecision window_decide(uint64_t requests_word, uint64_t tokens_word, Nanos now,
                             const WindowLimit& limit) noexcept {
  const uint64_t window = limit.calendar.window_of(now);
  const uint32_t requests = count_in(requests_word, window);
  const uint32_t tokens = count_in(tokens_word, window);
  const uint32_t quota = limit.requests ? limit.requests : UINT32_MAX;
  const bool over_requests = requests >= quota;
  const bool over_tokens = limit.tokens != 0 && tokens >= limit.tokens;
  const uint32_t counted = over_requests ? requests : requests + 1;
  const uint64_t word = pack(window, counted);
  const uint32_t reset = limit.calendar.seconds_left(now);
  const bool admit = !over_requests && !over_tokens;
  return {admit, word != requests_word, word, admit ? quota - counted : 0, reset, admit ? 0 : reset};
}

uint64_t window_charge(uint64_t tokens_word, uint64_t tokens, Nanos now, const Calendar& calendar) noexcept {
  const uint64_t window = calendar.window_of(now);
  const uint64_t total = uint64_t{count_in(tokens_word, window)} + tokens;
  return pack(window, total > 0xffffffffull ? 0xffffffffull : total);
}

}  // namespace sluice::limiter

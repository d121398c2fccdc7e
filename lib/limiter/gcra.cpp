// See gcra.h.
#include "limiter/gcra.h"

namespace sluice::limiter {

bool GcraLimit::make(uint64_t count, Nanos period, uint32_t burst, GcraLimit& out) noexcept {
  if (count == 0 || period == 0 || burst == 0) return false;
  const Nanos interval = (period + count - 1) / count;
  if (interval == 0 || interval > (uint64_t{1} << 62) / burst) return false;
  out.interval = interval;
  out.burst = burst;
  out.capacity = interval * burst;
  return true;
}

GcraDecision gcra_decide(uint64_t tat, Nanos now, const GcraLimit& limit, Nanos max_wait) noexcept {
  const Nanos start = tat > now ? tat : now;
  const Nanos next = start + limit.interval;
  const Nanos ahead = next - now;  // how far TAT would run ahead of now
  if (ahead > limit.capacity) [[unlikely]] {
    if (ahead - limit.capacity <= max_wait) return {true, next, 0, ceil_seconds(ahead), 0, ahead - limit.capacity};
    // The earliest time t with next - t <= capacity is next - capacity.
    const uint32_t wait = ceil_seconds(ahead - limit.capacity);
    return {false, tat, 0, ceil_seconds(start - now), wait == 0 ? 1u : wait};
  }
  const auto remaining = static_cast<uint32_t>((limit.capacity - ahead) / limit.interval);
  return {true, next, remaining, ceil_seconds(ahead), 0};
}

GcraStanding gcra_standing(uint64_t tat, Nanos now, const GcraLimit& limit) noexcept {
  const Nanos ahead = tat > now ? tat - now : 0;
  const Nanos room = ahead < limit.capacity ? limit.capacity - ahead : 0;
  return {static_cast<uint32_t>(room / limit.interval), ceil_seconds(ahead)};
}

}  // namespace sluice::limiter

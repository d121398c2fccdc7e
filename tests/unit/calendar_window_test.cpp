// Calendar-minute windows: counting on admission, refused requests counted,
// reset exactly at the minute, Retry-After counting down to it, tokens
// charged afterwards with one request allowed to overshoot.
#include <gtest/gtest.h>

#include "limiter/calendar_window.h"

namespace sluice::limiter {
namespace {

constexpr Nanos kSec = time::kNanosPerSecond;
constexpr Nanos kMinute = time::kNanosPerMinute;
constexpr Nanos kMinuteStart = 30'000'000 * kMinute;  // a whole UTC minute

TEST(CalendarWindow, CountsToTheQuotaThenRefusesUntilTheNextMinute) {
  const WindowLimit l{3, 0};
  uint64_t requests = 0;
  for (uint32_t i = 0; i < 3; ++i) {
    const WindowDecision d = window_decide(requests, 0, kMinuteStart + 10 * kSec, l);
    ASSERT_TRUE(d.admit);
    EXPECT_EQ(d.remaining, 2 - i);
    requests = d.new_requests;
  }
  const WindowDecision refused = window_decide(requests, 0, kMinuteStart + 10 * kSec, l);
  EXPECT_FALSE(refused.admit);
  EXPECT_FALSE(refused.write);  // a saturated minute's refusal writes nothing
  EXPECT_EQ(refused.retry_after_s, 50u);
  EXPECT_FALSE(window_decide(requests, 0, kMinuteStart + kMinute - 1, l).admit);
  EXPECT_EQ(window_decide(requests, 0, kMinuteStart + kMinute - 1, l).retry_after_s, 1u);
  EXPECT_TRUE(window_decide(requests, 0, kMinuteStart + kMinute, l).admit);  // the next minute
}

TEST(CalendarWindow, RetryAfterCountsDownFrom60To1) {
  EXPECT_EQ(seconds_to_next_minute(kMinuteStart), 60u);
  EXPECT_EQ(seconds_to_next_minute(kMinuteStart + 1), 60u);
  EXPECT_EQ(seconds_to_next_minute(kMinuteStart + kSec), 59u);
  EXPECT_EQ(seconds_to_next_minute(kMinuteStart + 59 * kSec), 1u);
  EXPECT_EQ(seconds_to_next_minute(kMinuteStart + kMinute - 1), 1u);
}

TEST(CalendarWindow, RefusedRequestsCountTowardTheMinute) {
  const WindowLimit l{5, 100};
  const uint64_t tokens = window_charge(0, 100, kMinuteStart);  // the token quota is used up
  uint64_t requests = 0;
  const WindowDecision d = window_decide(requests, tokens, kMinuteStart + kSec, l);
  EXPECT_FALSE(d.admit);
  EXPECT_TRUE(d.write);
  EXPECT_EQ(count_in(d.new_requests, minute_of(kMinuteStart)), 1u);
}

TEST(CalendarWindow, OneLargeRequestMayOvershootTheTokenQuota) {
  const WindowLimit l{100, 1000};
  uint64_t tokens = window_charge(0, 900, kMinuteStart);
  EXPECT_TRUE(window_decide(0, tokens, kMinuteStart + kSec, l).admit);  // 900 < 1000
  tokens = window_charge(tokens, 5000, kMinuteStart + 2 * kSec);       // overshoot
  EXPECT_EQ(count_in(tokens, minute_of(kMinuteStart)), 5900u);
  EXPECT_FALSE(window_decide(0, tokens, kMinuteStart + 3 * kSec, l).admit);
  EXPECT_TRUE(window_decide(0, tokens, kMinuteStart + kMinute, l).admit);
  EXPECT_TRUE(window_idle(0, tokens, kMinuteStart + kMinute));
  EXPECT_FALSE(window_idle(0, tokens, kMinuteStart + kMinute - 1));
}

TEST(CalendarWindow, TokenCountsSaturate) {
  const uint64_t w = window_charge(window_charge(0, 0xffffffffull, kMinuteStart), 10, kMinuteStart);
  EXPECT_EQ(count_in(w, minute_of(kMinuteStart)), 0xffffffffu);
}

}  // namespace
}  // namespace sluice::limiter

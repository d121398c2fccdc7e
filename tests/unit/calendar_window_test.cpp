// Calendar windows: counting on admission, refused requests counted,
// reset exactly at the minute (hour, day, at a UTC offset), Retry-After
// counting down to it, tokens charged afterwards with one request allowed to
// overshoot, and words of one span never read as another's current window.
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
  EXPECT_EQ(Calendar{}.seconds_left(kMinuteStart), 60u);
  EXPECT_EQ(Calendar{}.seconds_left(kMinuteStart + 1), 60u);
  EXPECT_EQ(Calendar{}.seconds_left(kMinuteStart + kSec), 59u);
  EXPECT_EQ(Calendar{}.seconds_left(kMinuteStart + 59 * kSec), 1u);
  EXPECT_EQ(Calendar{}.seconds_left(kMinuteStart + kMinute - 1), 1u);
}

TEST(CalendarWindow, RefusedRequestsCountTowardTheMinute) {
  const WindowLimit l{5, 100};
  const uint64_t tokens = window_charge(0, 100, kMinuteStart, {});  // the token quota is used up
  uint64_t requests = 0;
  const WindowDecision d = window_decide(requests, tokens, kMinuteStart + kSec, l);
  EXPECT_FALSE(d.admit);
  EXPECT_TRUE(d.write);
  EXPECT_EQ(count_in(d.new_requests, Calendar{}.window_of(kMinuteStart)), 1u);
}

TEST(CalendarWindow, OneLargeRequestMayOvershootTheTokenQuota) {
  const WindowLimit l{100, 1000};
  uint64_t tokens = window_charge(0, 900, kMinuteStart, {});
  EXPECT_TRUE(window_decide(0, tokens, kMinuteStart + kSec, l).admit);  // 900 < 1000
  tokens = window_charge(tokens, 5000, kMinuteStart + 2 * kSec, {});       // overshoot
  EXPECT_EQ(count_in(tokens, Calendar{}.window_of(kMinuteStart)), 5900u);
  EXPECT_FALSE(window_decide(0, tokens, kMinuteStart + 3 * kSec, l).admit);
  EXPECT_TRUE(window_decide(0, tokens, kMinuteStart + kMinute, l).admit);
  EXPECT_TRUE(window_idle(0, tokens, kMinuteStart + kMinute, {}));
  EXPECT_FALSE(window_idle(0, tokens, kMinuteStart + kMinute - 1, {}));
}

TEST(CalendarWindow, TokenCountsSaturate) {
  const uint64_t w = window_charge(window_charge(0, 0xffffffffull, kMinuteStart, {}), 10, kMinuteStart, {});
  EXPECT_EQ(count_in(w, Calendar{}.window_of(kMinuteStart)), 0xffffffffu);
}

// 2026-12-07 00:00:00 UTC: a whole UTC day (and hour, and minute).
constexpr Nanos kHour = 60 * kMinute;
constexpr Nanos kDay = 24 * kHour;
constexpr Nanos kDayStart = 20'794 * kDay;
constexpr Calendar kUtcDay{Calendar::kDay, 0};
constexpr Calendar kUtcHour{Calendar::kHour, 0};

TEST(CalendarWindow, ADayWindowCountsUntilMidnightUtc) {
  const WindowLimit l{2, 0, kUtcDay};
  uint64_t w = 0;
  for (int i = 0; i < 2; ++i) {
    const WindowDecision d = window_decide(w, 0, kDayStart + 9 * kHour, l);
    ASSERT_TRUE(d.admit);
    w = d.new_requests;
  }
  const WindowDecision refused = window_decide(w, 0, kDayStart + 23 * kHour + 59 * kMinute + 30 * kSec, l);
  EXPECT_FALSE(refused.admit);
  EXPECT_EQ(refused.retry_after_s, 30u);  // until midnight, not the next minute
  EXPECT_FALSE(window_decide(w, 0, kDayStart + kDay - 1, l).admit);
  EXPECT_TRUE(window_decide(w, 0, kDayStart + kDay, l).admit);
  EXPECT_EQ(window_decide(w, 0, kDayStart + 9 * kHour, l).reset_s, 15u * 3600);
  EXPECT_EQ(kUtcDay.span_seconds(), 86400u);
}

TEST(CalendarWindow, AnHourWindowCountsUntilTheFullHour) {
  const WindowLimit l{1, 0, kUtcHour};
  const uint64_t w = window_decide(0, 0, kDayStart + 5 * kHour + 10 * kMinute, l).new_requests;
  const WindowDecision refused = window_decide(w, 0, kDayStart + 5 * kHour + 59 * kMinute, l);
  EXPECT_FALSE(refused.admit);
  EXPECT_EQ(refused.retry_after_s, 60u);
  EXPECT_TRUE(window_decide(w, 0, kDayStart + 6 * kHour, l).admit);
}

TEST(CalendarWindow, ADayAtAUtcOffsetBeginsAtLocalMidnight) {
  // UTC+05:30: the day begins at 18:30 UTC the day before.
  const Calendar india{Calendar::kDay, 5 * 60 + 30};
  const WindowLimit l{1, 0, india};
  const Nanos local_midnight = kDayStart + 18 * kHour + 30 * kMinute;
  const uint64_t w = window_decide(0, 0, local_midnight - kSec, l).new_requests;  // 23:59:59 local
  EXPECT_EQ(window_decide(w, 0, local_midnight - kSec, l).retry_after_s, 1u);
  EXPECT_FALSE(window_decide(w, 0, local_midnight - 1, l).admit);
  EXPECT_TRUE(window_decide(w, 0, local_midnight, l).admit);
  EXPECT_EQ(india.window_of(local_midnight) * kMinute, local_midnight);
  // UTC-08:00: the day begins at 08:00 UTC.
  const Calendar pacific{Calendar::kDay, -8 * 60};
  EXPECT_EQ(pacific.window_of(kDayStart + 8 * kHour) * kMinute, kDayStart + 8 * kHour);
  EXPECT_EQ(pacific.window_of(kDayStart + 8 * kHour - 1) * kMinute, kDayStart + 8 * kHour - kDay);
  EXPECT_EQ(pacific.seconds_left(kDayStart), 8u * 3600);
  // An hour at +05:30 begins at half past.
  const Calendar half{Calendar::kHour, 5 * 60 + 30};
  EXPECT_EQ(half.window_of(kDayStart + 10 * kHour + 45 * kMinute) * kMinute, kDayStart + 10 * kHour + 30 * kMinute);
}

TEST(CalendarWindow, EverySpanAndOffsetNamesItsWindowByItsFirstMinute) {
  for (const uint32_t span : {Calendar::kMinute, Calendar::kHour, Calendar::kDay}) {
    for (int32_t offset = -Calendar::kMaxOffsetMinutes; offset <= Calendar::kMaxOffsetMinutes; offset += 45) {
      const Calendar c{span, offset};
      ASSERT_TRUE(c.valid());
      for (Nanos t = kDayStart - kDay; t < kDayStart + kDay; t += 7 * kMinute + 13 * kSec) {
        const uint64_t w = c.window_of(t);
        ASSERT_LE(w * kMinute, t);
        ASSERT_GT((w + span) * kMinute, t);
        ASSERT_EQ((static_cast<int64_t>(w) + offset) % static_cast<int64_t>(span), 0) << span << " " << offset;
        ASSERT_EQ(c.seconds_left(t), ((w + span) * kMinute - t + kSec - 1) / kSec);
      }
    }
  }
}

TEST(CalendarWindow, AWordOfAnotherSpanIsNeverTheCurrentWindow) {
  // A bucket whose span changed on a reload: a minute window's word, read as
  // a day window's, counts as zero unless it was written in the day's first
  // minute (the same minute: the same window start, the count carries).
  const uint64_t minute_word = pack(Calendar{}.window_of(kDayStart + 9 * kHour), 50);
  EXPECT_EQ(count_in(minute_word, kUtcDay.window_of(kDayStart + 9 * kHour)), 0u);
  const uint64_t day_word = pack(kUtcDay.window_of(kDayStart + 9 * kHour), 50);
  EXPECT_EQ(count_in(day_word, Calendar{}.window_of(kDayStart + 9 * kHour)), 0u);
  EXPECT_LT(window_in(day_word), window_in(minute_word));  // words compare in time order across spans
}

TEST(CalendarWindow, OnlySpansAndOffsetsThisCodeWritesAreValid) {
  EXPECT_TRUE((Calendar{Calendar::kDay, -14 * 60}.valid()));
  EXPECT_FALSE((Calendar{Calendar::kDay, 14 * 60 + 1}.valid()));
  EXPECT_FALSE((Calendar{0, 0}.valid()));
  EXPECT_FALSE((Calendar{30, 0}.valid()));
  EXPECT_FALSE((Calendar{2 * Calendar::kDay, 0}.valid()));
}

TEST(CalendarWindow, TokensGoToTheWindowOfTheirOwnSpan) {
  uint64_t t = window_charge(0, 700, kDayStart + 3 * kHour, kUtcDay);
  t = window_charge(t, 400, kDayStart + 20 * kHour, kUtcDay);  // same day: adds up
  EXPECT_EQ(count_in(t, kUtcDay.window_of(kDayStart + 20 * kHour)), 1100u);
  EXPECT_FALSE(window_decide(0, t, kDayStart + 21 * kHour, {10, 1000, kUtcDay}).admit);
  EXPECT_TRUE(window_decide(0, t, kDayStart + kDay, {10, 1000, kUtcDay}).admit);
  EXPECT_FALSE(window_idle(0, t, kDayStart + kDay - 1, kUtcDay));
  EXPECT_TRUE(window_idle(0, t, kDayStart + kDay, kUtcDay));
}

}  // namespace
}  // namespace sluice::limiter

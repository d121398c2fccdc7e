// The limiter's clock: monotonic underneath, anchored to UTC, so
// a step of the system clock moves no bucket; UTC's corrections are slewed
// in at a bounded rate. The kernel's clocks are replaced by ones the test
// steps (the machine's own clock is not touched).
#include <gtest/gtest.h>

#include <time.h>

#include <atomic>
#include <cstdlib>
#include <cstdint>

#include "time/clock.h"

namespace sluice::time {
namespace {

constexpr Nanos kHour = 3600 * kNanosPerSecond;
constexpr Nanos kEpoch = 1'800'000'000ull * kNanosPerSecond;  // a UTC of 2027

std::atomic<int64_t> g_step{0};  // what the test has stepped UTC by

Nanos real_monotonic() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<Nanos>(ts.tv_sec) * kNanosPerSecond + static_cast<Nanos>(ts.tv_nsec);
}
Nanos stepped_realtime() noexcept { return real_monotonic() + kEpoch + static_cast<Nanos>(g_step.load()); }

int64_t distance(Nanos a, Nanos b) { return static_cast<int64_t>(a - b); }

class ClockTest : public ::testing::Test {
 protected:
  void SetUp() override { g_step = 0; }
  void TearDown() override { g_step = 0; }
  TscClock clock_{ClockSources{stepped_realtime, real_monotonic}};
};

TEST_F(ClockTest, ReadsUtc) {
  EXPECT_LT(std::abs(distance(clock_.now(), stepped_realtime())), 1'000'000) << "within a millisecond";
}

TEST_F(ClockTest, AStepForwardMovesNothingAtOnceAndIsSlewedIn) {
  const Nanos before = clock_.now();
  g_step = static_cast<int64_t>(kHour);
  clock_.reanchor();
  const Nanos after = clock_.now();
  EXPECT_LT(distance(after, before), 10'000'000) << "an hour's step is not a jump";
  EXPECT_GT(clock_.behind_utc(), static_cast<int64_t>(kHour) - 2'000'000);
  const int64_t behind = clock_.behind_utc();
  clock_.reanchor();
  // (Within 50 us: the two kernel clocks are read a moment apart.)
  EXPECT_NEAR(behind - clock_.behind_utc(), static_cast<int64_t>(TscClock::kMaxSlewPerReanchor), 50'000);
}

TEST_F(ClockTest, AStepBackNeverTakesTheClockBackMoreThanTheSlew) {
  const Nanos before = clock_.now();
  g_step = -static_cast<int64_t>(kHour);
  clock_.reanchor();
  EXPECT_GT(distance(clock_.now(), before), -static_cast<int64_t>(TscClock::kMaxSlewPerReanchor) - 1'000'000);
  EXPECT_LT(clock_.behind_utc(), -static_cast<int64_t>(kHour) + 2'000'000);
}

TEST_F(ClockTest, ASmallCorrectionIsAbsorbedWithinAFewReanchors) {
  g_step = 1'200'000;  // 1.2 ms
  for (int i = 0; i < 3; ++i) clock_.reanchor();
  EXPECT_NEAR(clock_.behind_utc(), 0, 50'000);
  EXPECT_LT(std::abs(distance(clock_.now(), stepped_realtime())), 1'000'000);
}

}  // namespace
}  // namespace sluice::time

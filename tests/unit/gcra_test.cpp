// GCRA: burst, refill, the header figures, and the properties the seeds
// promise: never more than burst + rate * t in any interval, and a client
// that waits Retry-After seconds is admitted.
#include <gtest/gtest.h>

#include <random>

#include "limiter/gcra.h"

namespace sluice::limiter {
namespace {

constexpr Nanos kSec = time::kNanosPerSecond;
constexpr Nanos kMs = kSec / 1000;
constexpr Nanos kT0 = 1'800'000'000 * kSec;  // some time in 2027

GcraLimit per_minute(uint64_t n) {
  GcraLimit l;
  EXPECT_TRUE(GcraLimit::make(n, 60 * kSec, static_cast<uint32_t>(n), l));
  return l;
}

TEST(Gcra, AFullBucketAllowsItsBurstThenRefusesWithTheDeficit) {
  const GcraLimit l = per_minute(600);  // interval 100 ms
  uint64_t tat = 0;
  for (int i = 0; i < 600; ++i) {
    const GcraDecision d = gcra_decide(tat, kT0, l);
    ASSERT_TRUE(d.admit) << i;
    EXPECT_EQ(d.remaining, 599u - i);
    tat = d.new_tat;
  }
  const GcraDecision refused = gcra_decide(tat, kT0, l);
  EXPECT_FALSE(refused.admit);
  EXPECT_EQ(refused.new_tat, tat);  // nothing to write
  EXPECT_EQ(refused.retry_after_s, 1u);  // 100 ms, rounded up
  EXPECT_EQ(refused.reset_s, 60u);
  EXPECT_TRUE(gcra_decide(tat, kT0 + 100 * kMs, l).admit);
  EXPECT_FALSE(gcra_decide(tat, kT0 + 99 * kMs, l).admit);
}

TEST(Gcra, ResetIsTimeUntilFullAndRetryAfterIsTimeUntilOne) {
  GcraLimit l;
  ASSERT_TRUE(GcraLimit::make(1, 10 * kSec, 3, l));  // one per 10 s, burst 3
  uint64_t tat = 0;
  for (int i = 0; i < 3; ++i) tat = gcra_decide(tat, kT0, l).new_tat;
  const GcraDecision r = gcra_decide(tat, kT0 + 2500 * kMs, l);
  EXPECT_FALSE(r.admit);
  EXPECT_EQ(r.retry_after_s, 8u);  // 7.5 s until one is free, rounded up
  EXPECT_EQ(r.reset_s, 28u);       // 27.5 s until all three are back
}

TEST(Gcra, RefillsContinuously) {
  GcraLimit l;
  ASSERT_TRUE(GcraLimit::make(10, kSec, 150, l));  // 10/s, burst 150
  uint64_t tat = 0;
  for (int i = 0; i < 150; ++i) tat = gcra_decide(tat, kT0, l).new_tat;
  EXPECT_FALSE(gcra_decide(tat, kT0, l).admit);
  // 15 s later the bucket is full again.
  const GcraDecision d = gcra_decide(tat, kT0 + 15 * kSec, l);
  EXPECT_TRUE(d.admit);
  EXPECT_EQ(d.remaining, 149u);
  EXPECT_TRUE(gcra_full(tat, kT0 + 15 * kSec));
  EXPECT_FALSE(gcra_full(tat, kT0 + 15 * kSec - 1));
}

TEST(Gcra, RejectsNumbersThatMakeNoSense) {
  GcraLimit l;
  EXPECT_FALSE(GcraLimit::make(0, kSec, 1, l));
  EXPECT_FALSE(GcraLimit::make(1, 0, 1, l));
  EXPECT_FALSE(GcraLimit::make(1, kSec, 0, l));
  EXPECT_FALSE(GcraLimit::make(1, 1'000'000 * kSec, 1'000'000, l));  // capacity past 2^62 ns
  EXPECT_TRUE(GcraLimit::make(7, 60 * kSec, 7, l));
  EXPECT_EQ(l.interval, 8'571'428'572u);  // rounded up: stricter, never looser
}

// In every window of length w, at most burst + w / interval requests are
// admitted, whatever the arrival pattern; and a client that waits exactly
// Retry-After seconds after a refusal is admitted (nothing else arriving).
TEST(Gcra, NeverAdmitsMoreThanBurstPlusRateAndRetryAfterIsNeverEarly) {
  std::mt19937_64 rng(42);
  for (int trial = 0; trial < 200; ++trial) {
    const uint64_t count = 1 + rng() % 50;
    const uint32_t burst = static_cast<uint32_t>(1 + rng() % 40);
    GcraLimit l;
    ASSERT_TRUE(GcraLimit::make(count, (1 + rng() % 60) * kSec, burst, l));
    uint64_t tat = 0;
    Nanos now = kT0;
    std::vector<Nanos> admitted;
    for (int i = 0; i < 400; ++i) {
      now += rng() % (2 * l.interval + 1) / (1 + rng() % 4);
      const GcraDecision d = gcra_decide(tat, now, l);
      if (d.admit) {
        tat = d.new_tat;
        admitted.push_back(now);
      } else {
        ASSERT_GE(d.retry_after_s, 1u);
        EXPECT_TRUE(gcra_decide(tat, now + d.retry_after_s * kSec, l).admit);
        if (d.retry_after_s > 1) {
          EXPECT_FALSE(gcra_decide(tat, now + (d.retry_after_s - 1) * kSec - 1, l).admit);
        }
      }
    }
    for (size_t i = 0; i < admitted.size(); ++i) {
      for (size_t j = i; j < admitted.size(); ++j) {
        const Nanos span = admitted[j] - admitted[i];
        ASSERT_LE(j - i + 1, burst + span / l.interval) << "trial " << trial;
      }
    }
  }
}

}  // namespace
}  // namespace sluice::limiter

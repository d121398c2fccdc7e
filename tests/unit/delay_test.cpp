// A rule's delay as decide() makes it: an over-budget request that its rate
// bucket admits within delay_max is admitted late (Decision::delay), the
// bucket charged as for any admission; at most delay_per_key of a key's
// requests wait at once; past either bound, or with no room to hold it,
// it is refused as if the rule had no delay. Layered budgets wait for the
// slowest; calendar windows never delay.
#include <gtest/gtest.h>

#include "limiter_harness.h"

namespace sluice::test {
namespace {

using limiter::Verdict;
using time::kNanosPerSecond;

constexpr const char* kGet = "GET /x HTTP/1.1\r\nHost: a";
constexpr time::Nanos kMs = 1'000'000;

// 2 a second, 1 back to back: one request every 500 ms.
Limiter delaying(const std::string& delay, const std::string& rate = "rate: 2/s, burst: 1") {
  return Limiter("default.yaml", [&](std::string t) {
    t = patched(std::move(t), "rate: 120/min, burst: 60", rate);
    return patched(std::move(t), "    bucket: per-client\n", "    bucket: per-client\n" + delay);
  });
}

TEST(Delay, AnOverBudgetRequestWaitsUntilItsBucketAdmitsIt) {
  Limiter l = delaying("    delay_max: 2s\n    delay_per_key: 3\n");
  const Result first = l.send(kGet);
  ASSERT_EQ(first.verdict(), Verdict::kAdmit);
  EXPECT_EQ(first.decision.delay, 0u);
  // Each next one waits one more interval: 500, 1000, 1500 ms.
  for (int i = 1; i <= 3; ++i) {
    const Result r = l.send(kGet);
    ASSERT_EQ(r.verdict(), Verdict::kAdmit) << i;
    EXPECT_EQ(r.decision.delay, static_cast<time::Nanos>(i) * 500 * kMs) << i;
    EXPECT_EQ(r.decision.fields.remaining, 0u);
  }
  // A fourth waiting would pass delay_per_key: refused as without delay.
  const Result over = l.send(kGet);
  ASSERT_EQ(over.verdict(), Verdict::kRefuse);
  EXPECT_EQ(over.decision.delay, 0u);
  EXPECT_EQ(over.header("Retry-After"), "2");
  // Once the first waiting one's time has come, there is room for one more.
  l.now += 500 * kMs;
  const Result next = l.send(kGet);
  ASSERT_EQ(next.verdict(), Verdict::kAdmit);
  EXPECT_EQ(next.decision.delay, 1500 * kMs);
  // Another key waits on its own.
  EXPECT_EQ(l.send(kGet, "198.18.0.11").decision.delay, 0u);
  EXPECT_EQ(l.send(kGet, "198.18.0.11").decision.delay, 500 * kMs);
}

// The request path looks for room to hold a head only where some rule delays.
TEST(Delay, APolicySaysWhetherAnyOfItsRulesDelays) {
  EXPECT_TRUE(delaying("    delay_max: 2s\n").policy().delays);
  EXPECT_FALSE(Limiter("default.yaml").policy().delays);
}

TEST(Delay, NoWaitIsLongerThanDelayMax) {
  Limiter l = delaying("    delay_max: 700ms\n    delay_per_key: 100\n");
  ASSERT_EQ(l.send(kGet).decision.delay, 0u);
  EXPECT_EQ(l.send(kGet).decision.delay, 500 * kMs);
  const Result r = l.send(kGet);  // would wait 1000 ms
  EXPECT_EQ(r.verdict(), Verdict::kRefuse);
  l.now += 300 * kMs;  // now it would wait 700
  EXPECT_EQ(l.send(kGet).decision.delay, 700 * kMs);
}

TEST(Delay, WithoutRoomToHoldItTheRequestIsRefusedAndNothingIsCharged) {
  Limiter l = delaying("    delay_max: 2s\n");
  ASSERT_EQ(l.send(kGet).verdict(), Verdict::kAdmit);
  l.scratch().may_delay = false;
  EXPECT_EQ(l.send(kGet).verdict(), Verdict::kRefuse);
  EXPECT_EQ(l.send(kGet).verdict(), Verdict::kRefuse);
  l.scratch().may_delay = true;
  // The refusals charged nothing: the next one waits one interval only.
  EXPECT_EQ(l.send(kGet).decision.delay, 500 * kMs);
}

TEST(Delay, WithoutDelayMaxNothingWaits) {
  Limiter l = delaying("");
  ASSERT_EQ(l.send(kGet).verdict(), Verdict::kAdmit);
  const Result r = l.send(kGet);
  EXPECT_EQ(r.verdict(), Verdict::kRefuse);
  EXPECT_EQ(r.decision.delay, 0u);
}

TEST(Delay, LayeredBudgetsWaitForTheSlowestAndAWindowNeverWaits) {
  Limiter l("default.yaml", [](std::string t) {
    t = patched(std::move(t), "  per-client: { rate: 120/min, burst: 60 }\n",
                "  per-client: { rate: 2/s, burst: 1 }\n  slow: { rate: 1/s, burst: 1 }\n"
                "  minute: { window: minute, requests: 3 }\n");
    return patched(std::move(t), "    bucket: per-client\n",
                   "    bucket: [per-client, slow, minute]\n    delay_max: 5s\n    delay_per_key: 10\n");
  });
  ASSERT_EQ(l.send(kGet).decision.delay, 0u);
  EXPECT_EQ(l.send(kGet).decision.delay, 1000 * kMs);  // per-client would take 500 ms, slow 1 s
  EXPECT_EQ(l.send(kGet).decision.delay, 2000 * kMs);
  // The minute's window counted three: the fourth is refused, and the rate
  // buckets it was charged to are given back.
  const Result r = l.send(kGet);
  ASSERT_EQ(r.verdict(), Verdict::kRefuse);
  EXPECT_EQ(r.decision.delay, 0u);
  l.now += time::kNanosPerMinute;
  EXPECT_EQ(l.send(kGet).decision.delay, 0u);
}

TEST(Delay, AShadowRuleChargesAsItWouldAndSaysSo) {
  Limiter l = delaying("    delay_max: 2s\n    shadow: true\n");
  ASSERT_EQ(l.send(kGet).decision.delay, 0u);
  const Result r = l.send(kGet);
  EXPECT_EQ(r.verdict(), Verdict::kAdmit);
  EXPECT_EQ(r.decision.delay, 500 * kMs);
  EXPECT_FALSE(r.decision.shadow_refusal);
}

TEST(Delay, TheLoaderChecksItsBounds) {
  auto first_error = [](const std::string& bucket, const std::string& rule) {
    const policy::LoadResult r = policy::load_policy_text(
        "sluice: 1\nbuckets:\n  b: " + bucket + "\nrules:\n  - name: r\n    key: client_ip\n    bucket: b\n" + rule,
        "p.yaml");
    return r.errors.empty() ? std::string() : r.errors[0].to_string();
  };
  EXPECT_EQ(first_error("{ rate: 1/s }", "    delay_max: 500ms\n"), "");
  EXPECT_EQ(first_error("{ rate: 1/s }", "    delay_max: 500ms\n    delay_per_key: 4\n"), "");
  EXPECT_EQ(first_error("{ rate: 1/s }", "    delay_max: 11s\n"),
            "p.yaml:8:16: rule r delay_max must be between 1ms and 10s");
  EXPECT_EQ(first_error("{ rate: 1/s }", "    delay_max: 0ms\n"),
            "p.yaml:8:16: rule r delay_max must be between 1ms and 10s");
  EXPECT_EQ(first_error("{ rate: 1/s }", "    delay_per_key: 4\n"), "p.yaml:8:20: rule r: delay_per_key needs delay_max");
  EXPECT_EQ(first_error("{ window: minute, requests: 5 }", "    delay_max: 1s\n"),
            "p.yaml:5:5: rule r: delay_max needs a rate bucket (calendar windows are never delayed)");
}

}  // namespace
}  // namespace sluice::test

// The penalty box (`penalty: { after: K, within: W, for: T }`): a key
// refused K times faster than K per W is refused for T without its bucket
// being consulted; other keys, and keys refused more slowly, are not.
#include <gtest/gtest.h>

#include "limiter_harness.h"

namespace sluice::test {
namespace {

using limiter::Decision;
using limiter::Verdict;

constexpr const char* kGet = "GET /x HTTP/1.1\r\nHost: a";

// default.yaml with 2 a minute per address, boxed for 5 minutes after 3
// refusals faster than 3 a minute.
Limiter boxed(const std::string& penalty = "{ after: 3, within: 1m, for: 5m }") {
  return Limiter("default.yaml", [&](std::string t) {
    t = patched(std::move(t), "rate: 120/min, burst: 60", "rate: 2/min, burst: 2");
    return patched(std::move(t), "    bucket: per-client\n", "    bucket: per-client\n    penalty: " + penalty + "\n");
  });
}

TEST(PenaltyBox, ThreeQuickRefusalsBoxTheKeyForItsTime) {
  Limiter l = boxed();
  EXPECT_EQ(l.count_admitted(2, kGet), 2);
  EXPECT_EQ(l.send(kGet).decision.penalty, Decision::Penalty::kNone);
  EXPECT_EQ(l.send(kGet).decision.penalty, Decision::Penalty::kNone);
  const Result third = l.send(kGet);
  ASSERT_EQ(third.verdict(), Verdict::kRefuse);
  EXPECT_EQ(third.decision.penalty, Decision::Penalty::kBoxedNow);
  EXPECT_EQ(third.decision.boxed_until, l.now + 5 * kMinute);
  // The bucket refills (a request every 30 s), but the box holds.
  l.now += 2 * kMinute;
  const Result held = l.send(kGet);
  ASSERT_EQ(held.verdict(), Verdict::kRefuse);
  EXPECT_EQ(held.decision.penalty, Decision::Penalty::kBoxed);
  EXPECT_EQ(held.header("Retry-After"), "180");
  // Another address was never boxed.
  EXPECT_EQ(l.send(kGet, "198.18.0.11").verdict(), Verdict::kAdmit);
  // Refusals while boxed do not lengthen the box.
  for (int i = 0; i < 10; ++i) EXPECT_EQ(l.send(kGet).decision.penalty, Decision::Penalty::kBoxed);
  l.now += 3 * kMinute;
  EXPECT_EQ(l.send(kGet).verdict(), Verdict::kAdmit);
}

TEST(PenaltyBox, RefusalsSlowerThanThePaceNeverBox) {
  Limiter l = boxed();
  EXPECT_EQ(l.count_admitted(2, kGet), 2);
  for (int i = 0; i < 20; ++i) {
    // A refusal every 25 s: the bucket refills one in 30 s, the pace one in 20 s.
    const Result r = l.send(kGet);
    EXPECT_NE(r.decision.penalty, Decision::Penalty::kBoxedNow) << i;
    EXPECT_NE(r.decision.penalty, Decision::Penalty::kBoxed) << i;
    l.now += 25 * kSecond;
    (void)l.count_admitted(1, kGet);
  }
}

TEST(PenaltyBox, ABoxedKeyIsBoxedAgainIfItKeepsOnAtOnce) {
  Limiter l = boxed("{ after: 2, within: 1h, for: 10s }");
  EXPECT_EQ(l.count_admitted(2, kGet), 2);
  EXPECT_EQ(l.send(kGet).decision.penalty, Decision::Penalty::kNone);
  EXPECT_EQ(l.send(kGet).decision.penalty, Decision::Penalty::kBoxedNow);
  l.now += 11 * kSecond;
  // Still refused by its bucket, and its pace (2 an hour) has not refilled.
  EXPECT_EQ(l.send(kGet).decision.penalty, Decision::Penalty::kBoxedNow);
}

TEST(PenaltyBox, TheLoaderNamesWhatIsMissingOrOutOfRange) {
  auto first_error = [](const std::string& penalty) {
    const policy::LoadResult r = policy::load_policy_text(
        "sluice: 1\nbuckets:\n  b: { rate: 1/s }\nrules:\n  - name: r\n    key: client_ip\n    bucket: b\n"
        "    penalty: " + penalty + "\n",
        "p.yaml");
    return r.errors.empty() ? std::string() : r.errors[0].message;
  };
  EXPECT_EQ(first_error("{ after: 3, within: 1m, for: 5m }"), "");
  EXPECT_EQ(first_error("{ within: 1m, for: 5m }"), "rule r penalty needs after (the refusals that box a key)");
  EXPECT_EQ(first_error("{ after: 3, within: 1m }"), "rule r penalty needs for");
  EXPECT_EQ(first_error("{ after: 3, within: 25h, for: 5m }"), "rule r penalty within must be between 1s and 24h");
  EXPECT_EQ(first_error("{ after: 0, within: 1m, for: 5m }"), "rule r penalty after must be between 1 and 1000000, not 0");
  EXPECT_NE(first_error("{ after: 3, within: 1m, for: 5m, forever: true }").find("unknown key 'forever'"),
            std::string::npos);
}

}  // namespace
}  // namespace sluice::test

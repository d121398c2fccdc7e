// A rule's `concurrency` as decide() keeps it: slots taken at admission,
// every one taken is a 429 with draft-11's concurrent-requests fields, a
// request its buckets refuse gives its slot back, and the counts a dead
// process left (another epoch) read as zero.
#include <gtest/gtest.h>

#include "limiter/in_flight.h"
#include "limiter_harness.h"

namespace sluice::test {
namespace {

using limiter::Verdict;

constexpr const char* kGet = "GET /x HTTP/1.1\r\nHost: a";

Limiter concurrent(const std::string& rate = "rate: 120/min, burst: 60", const std::string& extra = "") {
  return Limiter("default.yaml", [&](std::string t) {
    t = patched(std::move(t), "rate: 120/min, burst: 60", rate);
    return patched(std::move(t), "    bucket: per-client\n", "    bucket: per-client\n    concurrency: 2\n" + extra);
  });
}

TEST(Concurrency, EverySlotTakenIsA429WithConcurrentRequestFields) {
  Limiter l = concurrent();
  const Result a = l.send(kGet), b = l.send(kGet);
  ASSERT_EQ(a.verdict(), Verdict::kAdmit);
  ASSERT_EQ(b.verdict(), Verdict::kAdmit);
  EXPECT_TRUE(a.decision.holds_in_flight);
  const Result c = l.send(kGet);
  ASSERT_EQ(c.verdict(), Verdict::kRefuse);
  EXPECT_TRUE(c.decision.refused_in_flight);
  EXPECT_EQ(c.header("Retry-After"), "1");
  EXPECT_EQ(c.header("RateLimit-Policy"), "\"per-client/concurrency\";q=2;qu=\"concurrent-requests\"");
  EXPECT_EQ(c.header("RateLimit"), "\"per-client/concurrency\";r=0");
  EXPECT_EQ(c.written[0], c.written_general[0]);
  // Another address has slots of its own.
  EXPECT_EQ(l.send(kGet, "198.18.0.11").verdict(), Verdict::kAdmit);
  // A response's end gives a slot back (the data plane's part).
  limiter::release_in_flight(l.buckets(), a.decision.in_flight_key, l.state().in_flight_epoch);
  EXPECT_EQ(l.send(kGet).verdict(), Verdict::kAdmit);
  EXPECT_EQ(l.send(kGet).verdict(), Verdict::kRefuse);
}

TEST(Concurrency, ARequestItsBucketRefusesGivesItsSlotBack) {
  Limiter l = concurrent("rate: 1/min, burst: 1");
  EXPECT_EQ(l.send(kGet).verdict(), Verdict::kAdmit);  // holds one of 2 slots
  for (int i = 0; i < 5; ++i) {
    const Result r = l.send(kGet);
    ASSERT_EQ(r.verdict(), Verdict::kRefuse);  // by the bucket, not the count
    EXPECT_FALSE(r.decision.refused_in_flight) << i;
    EXPECT_FALSE(r.decision.holds_in_flight);
  }
}

TEST(Concurrency, ADeadProcessesCountsReadAsZero) {
  Limiter l = concurrent();
  const Result carried = l.send(kGet);
  ASSERT_TRUE(carried.decision.holds_in_flight);
  EXPECT_EQ(l.count_admitted(3, kGet), 1);  // both slots held, never given back
  l.state().in_flight_epoch += 1;           // a restart: only `carried` came across
  // The carried request takes its slot again under the new epoch (past the
  // limit if need be: it was admitted before the restart).
  limiter::retake_in_flight(l.buckets(), carried.decision.in_flight_key, l.state().in_flight_epoch);
  EXPECT_EQ(l.count_admitted(3, kGet), 1);
  EXPECT_TRUE(l.send(kGet).decision.refused_in_flight);
}

TEST(Concurrency, AnInFlightCountIsIdleOnlyAtZeroOfItsEpoch) {
  Limiter l = concurrent();
  const limiter::CompiledBucket& b = l.policy().buckets.back();
  ASSERT_TRUE(b.in_flight);
  const uint16_t epoch = 7;
  uint64_t words[2] = {(uint64_t{epoch} << 48) | 2, 0};
  EXPECT_FALSE(limiter::bucket_idle(l.policy(), b.index, words, l.now, epoch));
  EXPECT_TRUE(limiter::bucket_idle(l.policy(), b.index, words, l.now, epoch + 1));  // a dead process's
  words[0] = uint64_t{epoch} << 48;
  EXPECT_TRUE(limiter::bucket_idle(l.policy(), b.index, words, l.now, epoch));
}

TEST(Concurrency, AShadowRuleTakesItsSlotsButForwardsEverything) {
  Limiter l = concurrent("rate: 120/min, burst: 60", "    shadow: true\n");
  for (int i = 0; i < 4; ++i) {
    const Result r = l.send(kGet);
    EXPECT_EQ(r.verdict(), Verdict::kAdmit) << i;
    EXPECT_TRUE(r.decision.holds_in_flight) << i;
  }
}

TEST(Concurrency, TheLoaderTakesAWholeNumberOfSlots) {
  auto first_error = [](const std::string& value) {
    const policy::LoadResult r = policy::load_policy_text(
        "sluice: 1\nbuckets:\n  b: { rate: 1/s }\nrules:\n  - name: r\n    key: client_ip\n    bucket: b\n"
        "    concurrency: " + value + "\n",
        "p.yaml");
    return r.errors.empty() ? std::string() : r.errors[0].message;
  };
  EXPECT_EQ(first_error("10"), "");
  EXPECT_EQ(first_error("0"), "rule r concurrency must be between 1 and 1000000, not 0");
  EXPECT_NE(first_error("many").find("rule r concurrency must be a whole number"), std::string::npos);
}

}  // namespace
}  // namespace sluice::test

// Layered budgets: one rule charging several buckets (`bucket: [a, b]`),
// all or none. A request is admitted only if every bucket admits it; a
// refusal takes back what the others were charged, names the exhausted
// budget and waits for the longest; the fields list every budget.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "limiter/charge.h"
#include "limiter_harness.h"

namespace sluice::test {
namespace {

using limiter::Verdict;

constexpr const char* kGet = "GET /x HTTP/1.1\r\nHost: a";
constexpr time::Nanos kHour = 60 * kMinute;

// default.yaml's rule charging `buckets` (defined by `defs`), in `style`.
Limiter layered(const std::string& defs, const std::string& buckets, const std::string& style = "ietf",
                const std::string& refusal = "") {
  return Limiter("default.yaml", [&](std::string t) {
    t = patched(std::move(t), "  per-client: { rate: 120/min, burst: 60 }\n", defs);
    t = patched(std::move(t), "    bucket: per-client\n", "    bucket: " + buckets + "\n" + refusal);
    return patched(std::move(t), "header_style: ietf", "header_style: " + style);
  });
}

// 2 a second (2 back to back) and 5 a day (kStart is 08:00 UTC: 16 h left).
const std::string kSecondAndDay =
    "  per-second: { rate: 2/s, burst: 2 }\n  per-day: { window: day, requests: 5 }\n";

TEST(LayeredBudgets, AdmittedOnlyWhileEveryBucketAdmits) {
  Limiter l = layered(kSecondAndDay, "[per-second, per-day]");
  const Result first = l.send(kGet);
  ASSERT_EQ(first.verdict(), Verdict::kAdmit);
  // Both listed, the one with the fewest left first.
  EXPECT_EQ(first.header("RateLimit-Policy"), "\"per-second\";q=2;w=1, \"per-day\";q=5;w=86400");
  EXPECT_EQ(first.header("RateLimit"), "\"per-second\";r=1;t=1, \"per-day\";r=4;t=57600");
  EXPECT_EQ(l.send(kGet).verdict(), Verdict::kAdmit);
  const Result fast = l.send(kGet);  // the second's budget is spent
  ASSERT_EQ(fast.verdict(), Verdict::kRefuse);
  EXPECT_EQ(fast.header("Retry-After"), "1");
  EXPECT_EQ(fast.header("RateLimit-Policy"), "\"per-second\";q=2;w=1, \"per-day\";q=5;w=86400");
  int admitted = 2;
  for (int s = 0; s < 10; ++s) {
    l.now += kSecond;
    admitted += l.count_admitted(2, kGet);
  }
  EXPECT_EQ(admitted, 5);  // the refusals by the second took nothing from the day
  const Result daily = l.send(kGet);
  ASSERT_EQ(daily.verdict(), Verdict::kRefuse);
  EXPECT_EQ(daily.header("RateLimit-Policy"), "\"per-day\";q=5;w=86400, \"per-second\";q=2;w=1");
  const int retry = std::stoi(daily.header("Retry-After"));
  EXPECT_GE(retry, 57600 - 12);
  EXPECT_LE(retry, 57600);
}

TEST(LayeredBudgets, ARefusalTakesBackWhatTheOtherBucketsWereCharged) {
  // 3 an hour (a token every 20 minutes) charged first, then 1 a minute.
  Limiter l = layered("  per-hour: { rate: 3/hour, burst: 3 }\n  per-minute: { window: minute, requests: 1 }\n",
                      "[per-hour, per-minute]");
  EXPECT_EQ(l.count_admitted(1, kGet), 1);
  // Each refusal by the minute charged the hour and took it back.
  for (int i = 0; i < 20; ++i) ASSERT_EQ(l.send(kGet).verdict(), Verdict::kRefuse);
  l.now += kMinute;
  EXPECT_EQ(l.count_admitted(5, kGet), 1);
  l.now += kMinute;
  EXPECT_EQ(l.count_admitted(5, kGet), 1);  // the hour's third
  l.now += kMinute;
  EXPECT_EQ(l.count_admitted(5, kGet), 0);  // the hour's are spent, 3 minutes in
}

TEST(LayeredBudgets, AWindowRefusedByAnotherBucketCountsNothing) {
  // 1 a minute by rate, charged first, then a window of 3 an hour.
  Limiter l = layered("  per-minute: { rate: 1/min, burst: 1 }\n  per-hour: { window: hour, requests: 3 }\n",
                      "[per-hour, per-minute]");
  for (int m = 0; m < 3; ++m) {
    EXPECT_EQ(l.count_admitted(10, kGet), 1) << m;  // 9 a minute refused by the rate: taken off the window
    l.now += kMinute;
  }
  EXPECT_EQ(l.count_admitted(10, kGet), 0);  // the window's 3 are the 3 admitted
}

// Workers deciding at once on one key never admit past the tightest
// budget, and every charge a refusal took back is gone: what the rate
// bucket holds afterwards is exactly the admissions.
TEST(LayeredBudgets, WorkersAtOnceNeverAdmitMoreAndLeakNoCharge) {
  Limiter l = layered("  per-hour: { rate: 1000/hour, burst: 1000 }\n  per-minute: { window: minute, requests: 300 }\n",
                      "[per-hour, per-minute]");
  http::Http1Policy& policy = l.policy();
  const std::string text = std::string(kGet) + "\r\n\r\n";
  std::atomic<int> admitted{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < 4; ++t) {
    workers.emplace_back([&] {
      std::vector<http::FieldLine> store(policy.stream.head.max_fields);
      std::vector<char> spill(policy.stream.head.max_head_bytes);
      auto scratch = std::make_unique<limiter::DecisionScratch>();
      for (int i = 0; i < 2000; ++i) {
        http::HeadParser parser(policy.fields, policy.stream.head, store, spill);
        ASSERT_EQ(parser.feed(text).status, http::HeadStatus::kComplete);
        limiter::ConnectionFacts conn;
        conn.peer = *net::parse_ip("198.18.0.10");
        const limiter::Decision d =
            limiter::decide(policy, l.state(), http::limiter_request(parser.head(), conn), l.now, *scratch);
        admitted += d.verdict == Verdict::kAdmit;
      }
    });
  }
  for (std::thread& w : workers) w.join();
  // A refusal's passing charge may refuse another request meanwhile (in
  // the limiter's favour), never admit one.
  EXPECT_LE(admitted.load(), 300);
  EXPECT_GE(admitted.load(), 250);
  const Result after = l.send(kGet);
  EXPECT_EQ(after.verdict(), Verdict::kRefuse);
  // The hour's bucket: 1000 less what was admitted, nothing more.
  EXPECT_NE(after.header("RateLimit").find("\"per-hour\";r=" + std::to_string(1000 - admitted.load()) + ";"),
            std::string::npos)
      << after.header("RateLimit") << " after " << admitted.load();
}

TEST(LayeredBudgets, TheLongestWaitOfTheExhaustedOnesAndItsName) {
  Limiter l = layered("  per-minute: { rate: 1/min, burst: 1 }\n  per-hour: { window: hour, requests: 1 }\n",
                      "[per-minute, per-hour]", "ietf", "    refusal: { style: problem }\n");
  EXPECT_EQ(l.count_admitted(1, kGet), 1);
  const Result r = l.send(kGet);  // both exhausted: 60 s and 3600 s
  ASSERT_EQ(r.verdict(), Verdict::kRefuse);
  EXPECT_EQ(r.header("Retry-After"), "3600");
  EXPECT_EQ(r.header("RateLimit"), "\"per-hour\";r=0;t=3600, \"per-minute\";r=0;t=60");
  EXPECT_NE(r.body().find(R"("violated-policies":["per-hour"])"), std::string::npos) << r.body();
  EXPECT_EQ(r.header("Content-Type"), "application/problem+json");
  l.now += kMinute;  // the minute's budget is back; the hour's is not
  const Result hour = l.send(kGet);
  ASSERT_EQ(hour.verdict(), Verdict::kRefuse);
  EXPECT_EQ(hour.header("Retry-After"), "3540");
}

TEST(LayeredBudgets, TheSeedStyleListsEveryBudgetInRateLimitPolicy) {
  Limiter l = layered(kSecondAndDay, "[per-day, per-second]", "seed");
  const Result first = l.send(kGet);
  ASSERT_EQ(first.verdict(), Verdict::kAdmit);
  EXPECT_EQ(first.header("RateLimit-Limit"), "2");  // the binding one: the fewest left
  EXPECT_EQ(first.header("RateLimit-Remaining"), "1");
  EXPECT_EQ(first.header("RateLimit-Policy"), "2;w=1, 5;w=86400");
}

TEST(LayeredBudgets, TheLoaderRefusesWhatCannotBeLayered) {
  auto first_error = [](const std::string& buckets, const std::string& bucket_list,
                        const std::string& style = "ietf") {
    const policy::LoadResult r = policy::load_policy_text(
        "sluice: 1\nheader_style: " + style + "\nbuckets:\n" + buckets + "rules:\n  - name: r\n    key: client_ip\n"
        "    bucket: " + bucket_list + "\n",
        "p.yaml");
    if (!r.errors.empty()) return r.errors[0].message;
    std::vector<policy::PolicyError> errors;
    const auto compiled = http::compile_http1_policy(*r.policy, test_hasher(2), errors);
    return errors.empty() ? std::string() : errors[0].message;
  };
  const std::string two = "  a: { rate: 1/s }\n  b: { rate: 1/day }\n";
  EXPECT_EQ(first_error(two, "[a, b]"), "");
  EXPECT_EQ(first_error(two, "[a, a]"), "rule r: bucket a is listed twice");
  EXPECT_EQ(first_error(two, "[a, b, c]"), "rule r: no bucket named c in buckets");
  EXPECT_EQ(first_error(two, "[]"), "rule r: bucket lists 1 to 4 buckets, not 0");
  EXPECT_EQ(first_error(two + "  c: { rate: 1/s }\n  d: { rate: 1/s }\n  e: { rate: 1/s }\n", "[a, b, c, d, e]"),
            "rule r: bucket lists 1 to 4 buckets, not 5");
  EXPECT_EQ(first_error("  a: { window: minute, tokens: 10 }\n  b: { window: day, tokens: 100 }\n", "[a, b]"),
            "rule r: only one of a rule's buckets may count tokens (b is the second)");
  // Names long enough that draft-11's fields would not fit an insertion.
  const std::string longer(40, 'x');
  const std::string three = "  " + longer + "1: { rate: 1/s }\n  " + longer + "2: { rate: 1/min }\n  " + longer +
                            "3: { rate: 1/hour }\n";
  const std::string list = "[" + longer + "1, " + longer + "2, " + longer + "3]";
  EXPECT_NE(first_error(three, list).find("its rate-limit fields could take"), std::string::npos);
  EXPECT_EQ(first_error(three, list, "seed"), "");
}

}  // namespace
}  // namespace sluice::test

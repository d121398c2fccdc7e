// Hour and day quotas as a policy states them (`window: hour|day`,
// `utc_offset`, `rate: N/day`): what decide() admits and refuses across a
// day, where its windows begin, and the fields and Retry-After it answers.
#include <gtest/gtest.h>

#include "limiter_harness.h"

namespace sluice::test {
namespace {

using limiter::Verdict;

constexpr time::Nanos kHour = 60 * kMinute;

std::string chat(const std::string& deployment = "gpt-default") {
  return "POST /v1/chat/completions HTTP/1.1\r\nHost: router\r\nX-Pi-Deployment: " + deployment +
         "\r\nContent-Length: 0";
}

// The deployment-quota profile with its minute window turned into `window`
// (with `extra` lines), 3 requests and 1000 tokens, and draft-11 fields.
Limiter quota(const std::string& window, const std::string& extra = "") {
  return Limiter("deployment-quotas.yaml", [&](std::string t) {
    t = patched(std::move(t), "    window: minute\n", "    window: " + window + "\n" + extra);
    t = patched(std::move(t), "    requests: 600\n    tokens: 100000\n", "    requests: 3\n    tokens: 1000\n");
    return patched(std::move(t), "header_style: none", "header_style: ietf");
  });
}

TEST(CalendarQuotas, ADayQuotaHoldsUntilMidnightUtc) {
  Limiter l = quota("day");
  // kStart is 08:00 UTC: 16 hours to midnight.
  for (int i = 0; i < 3; ++i) {
    const Result r = l.send(chat());
    ASSERT_EQ(r.verdict(), Verdict::kAdmit) << i;
    EXPECT_EQ(r.header("RateLimit-Policy"), "\"deployment\";q=3;w=86400");
    EXPECT_EQ(r.header("RateLimit"), "\"deployment\";r=" + std::to_string(2 - i) + ";t=57600");
  }
  const Result refused = l.send(chat());
  ASSERT_EQ(refused.verdict(), Verdict::kRefuse);
  EXPECT_EQ(refused.header("Retry-After"), "57600");
  l.now += 15 * kHour + 59 * kMinute + 59 * kSecond;  // 23:59:59
  const Result last = l.send(chat());
  EXPECT_EQ(last.verdict(), Verdict::kRefuse);
  EXPECT_EQ(last.header("Retry-After"), "1");
  l.now += kSecond;  // midnight
  EXPECT_EQ(l.send(chat()).verdict(), Verdict::kAdmit);
  // Another deployment had its own day all along.
  EXPECT_EQ(l.send(chat("other")).verdict(), Verdict::kAdmit);
}

TEST(CalendarQuotas, ADayAtAnOffsetBeginsAtThatMidnight) {
  // UTC-08:00: the day begins at 08:00 UTC, which is kStart.
  Limiter l = quota("day", "    utc_offset: \"-08:00\"\n");
  l.now -= kSecond;  // 23:59:59 local: the day before's last second
  EXPECT_EQ(l.count_admitted(5, chat()), 3);
  EXPECT_EQ(l.send(chat()).header("Retry-After"), "1");
  l.now += kSecond;
  EXPECT_EQ(l.count_admitted(5, chat()), 3);
  EXPECT_EQ(l.send(chat()).header("Retry-After"), "86400");
}

TEST(CalendarQuotas, AnHourQuotaCountsTokensUntilTheFullHour) {
  Limiter l = quota("hour");
  const Result first = l.send(chat());
  ASSERT_EQ(first.verdict(), Verdict::kAdmit);
  EXPECT_EQ(first.header("RateLimit-Policy"), "\"deployment\";q=3;w=3600");
  limiter::report_usage(l.state(), first.decision.usage_key, first.decision.usage_calendar, 1000, l.now + kMinute);
  l.now += 30 * kMinute;
  const Result refused = l.send(chat());  // the tokens of this hour are used up
  ASSERT_EQ(refused.verdict(), Verdict::kRefuse);
  EXPECT_EQ(refused.header("Retry-After"), "1800");
  l.now += 30 * kMinute;
  EXPECT_EQ(l.send(chat()).verdict(), Verdict::kAdmit);
}

TEST(CalendarQuotas, ARateMayBeGivenPerDay) {
  Limiter l("default.yaml",
            [](std::string t) { return patched(std::move(t), "rate: 120/min, burst: 60", "rate: 2/day, burst: 2"); });
  const std::string get = "GET /x HTTP/1.1\r\nHost: a";
  EXPECT_EQ(l.count_admitted(5, get), 2);
  const Result r = l.send(get);
  ASSERT_EQ(r.verdict(), Verdict::kRefuse);
  EXPECT_EQ(r.header("Retry-After"), "43200");  // one request's share of a day
}

}  // namespace
}  // namespace sluice::test

// The deployment-quota profile (config/deployment-quotas.yaml, seed 002),
// rule by rule: DQ01-DQ10 of docs/rules.md.
#include <gtest/gtest.h>

#include "limiter_harness.h"

namespace sluice::test {
namespace {

using limiter::Verdict;

constexpr const char* kProfile = "deployment-quotas.yaml";

std::string chat(const std::string& deployment, const std::string& key = "sk-a") {
  return "POST /v1/chat/completions HTTP/1.1\r\nHost: router\r\nAuthorization: Bearer " + key +
         "\r\nX-Pi-Deployment: " + deployment + "\r\nContent-Length: 0";
}

TEST(DeploymentQuotas, DQ01_QuotasBelongToTheDeploymentNotToTheKey) {
  Limiter l(kProfile);
  int admitted = 0;
  for (int i = 0; i < 700; ++i) {
    // Switching keys, workspaces or addresses does not get around the quota.
    admitted += l.send(chat("gpt-default", "sk-" + std::to_string(i)), "198.18.0." + std::to_string(i % 200 + 1))
                    .verdict() == Verdict::kAdmit;
  }
  EXPECT_EQ(admitted, 600);
  // Another deployment has its own quota, set per deployment.
  EXPECT_EQ(l.count_admitted(1300, chat("gpt-4o-mini-eu-1")), 1200);
  EXPECT_EQ(l.count_admitted(400, chat("claude-sonnet-us-2")), 300);
}

TEST(DeploymentQuotas, DQ01_TheDeploymentCanComeFromOtherAttributes) {
  for (const auto& [key, request] :
       std::vector<std::pair<std::string, std::string>>{
           {"host", "POST /v1/x HTTP/1.1\r\nHost: eu-1.router"},
           {"{ path_param: deployment }", "POST /deployments/eu-1/chat HTTP/1.1\r\nHost: router"},
           {"destination", "POST /v1/x HTTP/1.1\r\nHost: router"}}) {
    Limiter l(kProfile, [&](std::string t) {
      t = patched(std::move(t), "key: { header: X-Pi-Deployment }", "key: " + key);
      if (key.find("path_param") != std::string::npos) {
        t = patched(std::move(t), "  - name: deployment\n", "  - name: deployment\n    path: \"/deployments/{deployment}/*\"\n");
      }
      return t;
    });
    EXPECT_EQ(l.count_admitted(700, request), 600) << key;
  }
}

// A rule keyed on the host counts every spelling the origin reads
// as that host in one bucket: case, one trailing dot, the default port
// written out (with leading zeros) or left empty, the absolute-form authority.
TEST(DeploymentQuotas, EverySpellingOfOneHostSharesItsBudget) {
  Limiter l(kProfile, [](std::string t) {
    t = patched(std::move(t), "key: { header: X-Pi-Deployment }", "key: host");
    return patched(std::move(t), "    requests: 600\n", "    requests: 2\n");
  });
  auto on = [](const std::string& host, const std::string& target = "/v1/x") {
    return "POST " + target + " HTTP/1.1\r\nHost: " + host;
  };
  const std::vector<std::string> spellings = {
      on("API.example.com"),
      on("api.example.com."),
      on("api.example.com:80"),
      on("api.example.com:080"),
      on("api.example.com:"),
      on("elsewhere", "http://Api.Example.Com.:0080/v1/x"),
      on("elsewhere", "https://api.example.com:443/v1/x"),
  };
  // Any two spellings spend the budget of 2; every spelling is refused after.
  for (size_t first = 0; first < spellings.size(); ++first) {
    l.now += kMinute;
    EXPECT_EQ(l.send(on("api.example.com")).verdict(), Verdict::kAdmit) << first;
    EXPECT_EQ(l.send(spellings[first]).verdict(), Verdict::kAdmit) << spellings[first];
    for (const std::string& s : spellings) EXPECT_EQ(l.send(s).status(), 429) << spellings[first] << " then " << s;
    // Another port is another bucket, with its own two.
    EXPECT_EQ(l.count_admitted(3, on("api.example.com:8080")), 2);
    EXPECT_EQ(l.count_admitted(3, on("api.example.com:443")), 2);  // not the default for plain HTTP
  }
}

// A host the appliance cannot read the way the origin does is never
// keyed at all: 400 before any rule.
TEST(DeploymentQuotas, AnInvalidHostIsABadRequestNotAKey) {
  Limiter l(kProfile,
            [](std::string t) { return patched(std::move(t), "key: { header: X-Pi-Deployment }", "key: host"); });
  for (const std::string& host :
       std::vector<std::string>{"a b", "a/b", "user@a", "a, b", "a:xx", "[::1", "[zz]", "a:65536", "a:123456"}) {
    const Result r = l.send("POST /v1/x HTTP/1.1\r\nHost: " + host);
    EXPECT_EQ(r.verdict(), Verdict::kAnswer) << host;
    EXPECT_EQ(r.status(), 400) << host;
  }
  EXPECT_EQ(l.send("POST /v1/x#frag HTTP/1.1\r\nHost: api").status(), 400);
}

TEST(DeploymentQuotas, DQ02_RequestsAndTokensPerMinuteAreBothEnforced) {
  Limiter l(kProfile);
  EXPECT_EQ(l.count_admitted(700, chat("a")), 600);  // RPM
  l.now += kMinute;
  const Result first = l.send(chat("b"));
  ASSERT_TRUE(first.decision.has_usage_key);
  limiter::report_usage(l.state(), first.decision.usage_key, limiter::Calendar{}, 100000, l.now);  // TPM reached
  EXPECT_EQ(l.send(chat("b")).status(), 429);
}

TEST(DeploymentQuotas, DQ03_CountersResetExactlyAtEachFullUtcMinute) {
  Limiter l(kProfile);
  l.now = kStart + 59 * kSecond;  // the last second of a minute
  EXPECT_EQ(l.count_admitted(700, chat("a")), 600);
  l.now = kStart + kMinute - 1;
  EXPECT_EQ(l.send(chat("a")).status(), 429);
  l.now = kStart + kMinute;  // not a sliding window: the next minute is whole
  EXPECT_EQ(l.count_admitted(700, chat("a")), 600);
}

TEST(DeploymentQuotas, DQ04_ARefusedRequestStillCountsTowardTheMinute) {
  Limiter l(kProfile);
  const Result first = l.send(chat("a"));
  limiter::report_usage(l.state(), first.decision.usage_key, limiter::Calendar{}, 100000, l.now);
  for (int i = 0; i < 10; ++i) ASSERT_EQ(l.send(chat("a")).status(), 429);  // refused on tokens
  const limiter::BucketSlot* s = l.buckets().find(first.decision.usage_key);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(limiter::count_in(s->load(0), limiter::Calendar{}.window_of(l.now)), 11u);  // 1 admitted + 10 refused
}

TEST(DeploymentQuotas, DQ05_TokensAreChargedAfterTheRequestAndOneRequestMayOvershoot) {
  Limiter l(kProfile);
  const Result r = l.send(chat("a"));
  limiter::report_usage(l.state(), r.decision.usage_key, limiter::Calendar{}, 99999, l.now);
  EXPECT_EQ(l.send(chat("a")).verdict(), Verdict::kAdmit);  // 99999 < 100000: still admitted
  limiter::report_usage(l.state(), r.decision.usage_key, limiter::Calendar{}, 250000, l.now);  // one large request overshoots
  EXPECT_EQ(l.send(chat("a")).status(), 429);
  l.now += kMinute;
  EXPECT_EQ(l.send(chat("a")).verdict(), Verdict::kAdmit);
}

TEST(DeploymentQuotas, DQ06_OnlyTheChosenDeploymentIsChecked) {
  Limiter l(kProfile);
  EXPECT_EQ(l.count_admitted(600, chat("a")), 600);
  const Result refused = l.send(chat("a"));
  EXPECT_EQ(refused.status(), 429);  // not moved to another deployment
  EXPECT_EQ(l.send(chat("b")).verdict(), Verdict::kAdmit);
  // A request naming no deployment is not checked against any.
  EXPECT_EQ(l.send("POST /v1/chat/completions HTTP/1.1\r\nHost: router").verdict(), Verdict::kForward);
}

TEST(DeploymentQuotas, DQ07_TheRefusalCarriesItsCodeRetryAfterToTheNextMinuteAndATraceId) {
  Limiter l(kProfile);
  l.now = kStart + 12 * kSecond + kSecond / 2;
  EXPECT_EQ(l.count_admitted(600, chat("a")), 600);
  const Result r = l.send(chat("a"));
  ASSERT_EQ(r.status(), 429);
  EXPECT_NE(r.body().find("\"type\":\"rate_limit_error\""), std::string::npos);
  EXPECT_NE(r.body().find("\"code\":\"rate_limited\""), std::string::npos);
  EXPECT_EQ(r.header("Retry-After"), "48");  // 47.5 s to the next minute, rounded up
  const std::string trace = r.header("X-Pi-Trace-Id");
  EXPECT_EQ(trace.size(), 16u);
  EXPECT_NE(l.send(chat("a")).header("X-Pi-Trace-Id"), trace);  // one per response
  EXPECT_FALSE(r.has_header("X-Pi-Provider"));
  EXPECT_EQ(r.header("Access-Control-Allow-Origin"), "*");
  // It counts down to the minute.
  l.now = kStart + 59 * kSecond;
  EXPECT_EQ(l.send(chat("a")).header("Retry-After"), "1");
  l.now = kStart + 1;
  Limiter fresh(kProfile);
  fresh.now = kStart + 1;
  EXPECT_EQ(fresh.count_admitted(600, chat("a")), 600);
  EXPECT_EQ(fresh.send(chat("a")).header("Retry-After"), "60");
}

TEST(DeploymentQuotas, DQ08_ARefusedRequestIsNotForwarded) {
  Limiter l(kProfile);
  EXPECT_EQ(l.count_admitted(600, chat("a")), 600);
  const Result r = l.send(chat("a"));
  EXPECT_EQ(r.verdict(), Verdict::kRefuse);  // the data plane answers it and drops the request
  EXPECT_FALSE(r.response.empty());
}

TEST(DeploymentQuotas, DQ09_AnUpstreams429PassesThroughUntouched) {
  // The limiter adds nothing to the origin's responses in this profile, so an
  // upstream 429 (with its X-Pi-Provider) reaches the client as it was sent.
  Limiter l(kProfile);
  const Result r = l.send(chat("a"));
  EXPECT_EQ(r.verdict(), Verdict::kAdmit);
  EXPECT_TRUE(r.fields.empty());
}

TEST(DeploymentQuotas, DQ10_NoRemainingQuotaFieldsOnAnyResponse) {
  Limiter l(kProfile);
  for (int i = 0; i < 601; ++i) {
    const Result r = l.send(chat("a"));
    ASSERT_TRUE(r.fields.empty());
    for (const char* f : {"RateLimit-Limit", "RateLimit-Remaining", "RateLimit", "X-RateLimit-Remaining"}) {
      ASSERT_FALSE(r.has_header(f)) << f;
    }
  }
}

}  // namespace
}  // namespace sluice::test

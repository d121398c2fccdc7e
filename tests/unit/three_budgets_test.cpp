// The three-budget profile (config/three-budgets.yaml, seed 000), rule by
// rule: TB01-TB19 of docs/rules.md, each driven through the parser and
// decide() with a manual clock.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "limiter_harness.h"

namespace sluice::test {
namespace {

using limiter::Verdict;

constexpr const char* kProfile = "three-budgets.yaml";
const std::string kBare = "GET /v1/things HTTP/1.1\r\nHost: api";
const std::string kCredentialed = "GET /v1/things HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer key-one";
std::string run_request(const std::string& token) { return "POST /vrx/" + token + "/v1/tap HTTP/1.1\r\nHost: api"; }

// A profile with some origins granted (TB08, TB09).
std::string grant_origin(std::string text) {
  return patched(std::move(text), "  allow_origins: []", "  allow_origins: [\"https://app.example\"]");
}

TEST(ThreeBudgets, TB01_ThreeClassesWithTheirOwnBudgets) {
  Limiter l(kProfile);
  l.start_run("run-a");
  EXPECT_EQ(l.count_admitted(700, run_request("run-a")), 600);
  EXPECT_EQ(l.count_admitted(400, kCredentialed), 300);
  EXPECT_EQ(l.count_admitted(100, kBare), 60);
  EXPECT_EQ(l.send(run_request("run-b"), "198.18.0.11").status(), 404);  // not live: see TB12
}

TEST(ThreeBudgets, TB01_RunsAreCountedPerRunCredentialsPerCredentialBareRequestsPerAddress) {
  Limiter l(kProfile);
  EXPECT_EQ(l.count_admitted(60, kBare, "198.18.0.1"), 60);
  EXPECT_EQ(l.send(kBare, "198.18.0.1").verdict(), Verdict::kRefuse);
  EXPECT_EQ(l.send(kBare, "198.18.0.2").verdict(), Verdict::kAdmit);
  EXPECT_EQ(l.count_admitted(300, kCredentialed), 300);
  const Result other = l.send("GET /v1/things HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer key-two");
  EXPECT_EQ(other.verdict(), Verdict::kAdmit);
}

TEST(ThreeBudgets, TB02_ARefusalSaysNothingAboutTheCredentialAndInvalidOnesArePacedTheSame) {
  Limiter l(kProfile);
  const std::string invalid = "GET /v1/things HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer not-a-real-key";
  EXPECT_EQ(l.count_admitted(300, invalid), 300);
  const Result refused_invalid = l.send(invalid);
  EXPECT_EQ(l.count_admitted(300, kCredentialed), 300);
  const Result refused_valid = l.send(kCredentialed);
  ASSERT_EQ(refused_invalid.status(), 429);
  EXPECT_EQ(refused_invalid.body(), refused_valid.body());
  EXPECT_EQ(refused_invalid.header("RateLimit-Limit"), "300");
}

TEST(ThreeBudgets, TB03_OutsideTheDeviceSurfaceOnlyAuthorizationDecidesTheClass) {
  Limiter l(kProfile);
  for (const std::string path : {"/v1/things", "/healthz/deep", "/mcp", "/anything/else"}) {
    const std::string plain = "POST " + path + " HTTP/1.1\r\nHost: api";
    EXPECT_EQ(l.send(plain, "198.18.1." + std::to_string(path.size())).header("RateLimit-Limit"), "60") << path;
    EXPECT_EQ(l.send(plain + "\r\nAuthorization: Bearer k" + path).header("RateLimit-Limit"), "300") << path;
  }
}

TEST(ThreeBudgets, TB04_OnTheDeviceSurfaceTheRunWinsOverAuthorization) {
  Limiter l(kProfile);
  l.start_run("run-a");
  const std::string with_auth = run_request("run-a") + "\r\nAuthorization: Bearer key-one";
  const Result r = l.send(with_auth);
  EXPECT_EQ(r.verdict(), Verdict::kAdmit);
  EXPECT_EQ(r.header("RateLimit-Limit"), "600");
  EXPECT_EQ(l.count_admitted(599, with_auth), 599);
  // The credential's own budget was not touched.
  EXPECT_EQ(l.send(kCredentialed).header("RateLimit-Remaining"), "299");
}

TEST(ThreeBudgets, TB05_RespellingTheCredentialBuysNoSecondBudget) {
  Limiter l(kProfile);
  const std::vector<std::string> spellings = {"Bearer key-one", "bearer key-one", "BEARER   key-one",
                                              "  Bearer key-one\t"};
  int admitted = 0;
  for (int i = 0; i < 100; ++i) {
    for (const std::string& s : spellings) {
      admitted += l.send("GET /v1/x HTTP/1.1\r\nHost: api\r\nAuthorization: " + s).verdict() == Verdict::kAdmit;
    }
  }
  EXPECT_EQ(admitted, 300);
  // The token itself is case-sensitive: another token is another credential.
  EXPECT_EQ(l.send("GET /v1/x HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer KEY-ONE").verdict(), Verdict::kAdmit);
}

TEST(ThreeBudgets, TB05_OnlyAKeyedHashOfTheCredentialIsKept) {
  Limiter l(kProfile);
  const std::string secret = "sk-live-very-secret-credential";
  ASSERT_EQ(l.send("GET /v1/x HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer " + secret).verdict(), Verdict::kAdmit);
  // No bucket slot holds the credential's bytes: scan the table's memory.
  const limiter::BucketTable& t = l.buckets();
  const auto* begin = reinterpret_cast<const char*>(l.buckets().find(l.state().bucket_hasher.key(
      l.policy().bucket_named("credential")->index,
      l.state().credential_hasher.digest(std::span<const uint8_t>(
          reinterpret_cast<const uint8_t*>("bearer sk-live-very-secret-credential"), 37)))));
  ASSERT_NE(begin, nullptr);
  const std::string_view slot(begin, 32);
  EXPECT_EQ(slot.find("secret"), std::string_view::npos);
  (void)t;
}

TEST(ThreeBudgets, TB06_ARotatedCredentialStartsWithAFullBudget) {
  Limiter l(kProfile);
  EXPECT_EQ(l.count_admitted(300, kCredentialed), 300);
  EXPECT_EQ(l.send(kCredentialed).verdict(), Verdict::kRefuse);
  const Result rotated = l.send("GET /v1/things HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer key-one-rotated");
  EXPECT_EQ(rotated.verdict(), Verdict::kAdmit);
  EXPECT_EQ(rotated.header("RateLimit-Remaining"), "299");
}

TEST(ThreeBudgets, TB07_OneAddressHoldsBudgetsForAtMostEightCredentials) {
  Limiter l(kProfile);
  auto with_key = [](int i) { return "GET /v1/x HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer rotating-" + std::to_string(i); };
  for (int i = 0; i < 8; ++i) EXPECT_EQ(l.send(with_key(i), "198.18.3.3").header("RateLimit-Limit"), "300") << i;
  // The ninth credential in use from the address is counted against its bare budget.
  const Result ninth = l.send(with_key(8), "198.18.3.3");
  EXPECT_EQ(ninth.header("RateLimit-Limit"), "60");
  EXPECT_TRUE(ninth.decision.over_credential_ceiling);
  // The eight keep their own budgets, and another address is unaffected.
  EXPECT_EQ(l.send(with_key(3), "198.18.3.3").header("RateLimit-Limit"), "300");
  EXPECT_EQ(l.send(with_key(8), "198.18.3.4").header("RateLimit-Limit"), "300");
}

TEST(ThreeBudgets, TB07_ASlotIsReleasedOnceItsCredentialGoesQuiet) {
  Limiter l(kProfile);
  auto with_key = [](int i) { return "GET /v1/x HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer k" + std::to_string(i); };
  for (int i = 0; i < 8; ++i) ASSERT_EQ(l.send(with_key(i)).header("RateLimit-Limit"), "300");
  l.now += 30 * kSecond;
  for (int i = 1; i < 8; ++i) ASSERT_EQ(l.send(with_key(i)).header("RateLimit-Limit"), "300");  // k0 stays quiet
  EXPECT_EQ(l.send(with_key(9)).header("RateLimit-Limit"), "60");
  l.now += 31 * kSecond;  // k0 quiet for 61 s, the others for 31 s
  EXPECT_EQ(l.send(with_key(9)).header("RateLimit-Limit"), "300");
  EXPECT_EQ(l.send(with_key(0)).header("RateLimit-Limit"), "60");  // its slot is gone
}

TEST(ThreeBudgets, TB08_WithNoOriginGrantedOptionsIsAnOrdinaryBareRequest) {
  Limiter l(kProfile);
  const Result r = l.send("OPTIONS /v1/things HTTP/1.1\r\nHost: api\r\nOrigin: https://app.example");
  EXPECT_EQ(r.verdict(), Verdict::kAdmit);
  EXPECT_EQ(r.header("RateLimit-Limit"), "60");
}

TEST(ThreeBudgets, TB08_APreflightIsExemptUncountedAndHeaderlessWhereAnOriginIsGranted) {
  Limiter l(kProfile, grant_origin);
  const std::string preflight =
      "OPTIONS /v1/things HTTP/1.1\r\nHost: api\r\nOrigin: https://app.example\r\nAccess-Control-Request-Method: GET";
  for (int i = 0; i < 200; ++i) {
    const Result r = l.send(preflight);
    ASSERT_EQ(r.verdict(), Verdict::kExempt);
    ASSERT_FALSE(r.has_header("RateLimit-Limit"));
  }
  EXPECT_EQ(l.send("OPTIONS /healthz HTTP/1.1\r\nHost: api\r\nOrigin: https://app.example").verdict(), Verdict::kExempt);
  EXPECT_EQ(l.send("OPTIONS /.well-known/openid-configuration HTTP/1.1\r\nHost: api\r\nOrigin: https://x").verdict(),
            Verdict::kExempt);
  // Uncounted: the address's bare budget is whole.
  EXPECT_EQ(l.send(kBare).header("RateLimit-Remaining"), "59");
  // Only a real preflight (with Origin), and only on browser-reachable paths.
  EXPECT_EQ(l.send("OPTIONS /v1/things HTTP/1.1\r\nHost: api").header("RateLimit-Limit"), "60");
  EXPECT_EQ(l.send("OPTIONS /internal HTTP/1.1\r\nHost: api\r\nOrigin: https://app.example").verdict(), Verdict::kAdmit);
}

TEST(ThreeBudgets, TB09_ARefusalToAGrantedOriginExposesRetryAfterAndTheRateLimitFields) {
  Limiter l(kProfile, grant_origin);
  const std::string fetch = kCredentialed + "\r\nOrigin: https://app.example";
  EXPECT_EQ(l.count_admitted(300, fetch), 300);
  const Result r = l.send(fetch);
  ASSERT_EQ(r.status(), 429);
  EXPECT_EQ(r.header("Access-Control-Allow-Origin"), "https://app.example");
  const std::string exposed = r.header("Access-Control-Expose-Headers");
  for (const char* f : {"Retry-After", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "RateLimit-Policy"}) {
    EXPECT_NE(exposed.find(f), std::string::npos) << f;
  }
  // An origin that is not granted gets no CORS fields.
  const Result other = l.send(kCredentialed + "\r\nOrigin: https://evil.example");
  ASSERT_EQ(other.status(), 429);
  EXPECT_FALSE(other.has_header("Access-Control-Allow-Origin"));
}

TEST(ThreeBudgets, TB10_TheBareAddressIsTheConnectionsOrTheFirstForwardedHopFromATrustedProxy) {
  Limiter l(kProfile, [](std::string t) { return patched(std::move(t), "  trusted_proxies: []", "  trusted_proxies: [198.18.200.0/24]"); });
  const std::string forwarded = kBare + "\r\nX-Forwarded-For: 198.18.7.7, 198.18.200.9";
  // From the trusted proxy: keyed by 198.18.7.7, whatever the proxy's own address.
  EXPECT_EQ(l.count_admitted(60, forwarded, "198.18.200.1"), 60);
  EXPECT_EQ(l.send(forwarded, "198.18.200.2").verdict(), Verdict::kRefuse);
  EXPECT_EQ(l.send(kBare + "\r\nX-Forwarded-For: 198.18.7.8", "198.18.200.1").verdict(), Verdict::kAdmit);
  // From anyone else the header is not believed: keyed by the connection.
  EXPECT_EQ(l.send(forwarded, "198.18.9.9").verdict(), Verdict::kAdmit);
  EXPECT_EQ(l.count_admitted(100, forwarded, "198.18.9.9"), 59);
}

TEST(ThreeBudgets, TB11_TwoRunsBehindOneAddressNeverShareAnAllowance) {
  Limiter l(kProfile);
  l.start_run("run-a");
  l.start_run("run-b");
  EXPECT_EQ(l.count_admitted(700, run_request("run-a")), 600);
  EXPECT_EQ(l.count_admitted(700, run_request("run-b")), 600);
}

// TB01: a run started with a budget of its own (sluicectl run start TOKEN
// --budget N) is paced at N per minute, with N back to back from full, and
// its headers say so; another run keeps the policy's 600.
TEST(ThreeBudgets, TB01_ARunCanCarryABudgetOfItsOwn) {
  Limiter l(kProfile);
  l.start_run("run-small", 25);
  l.start_run("run-default");
  const Result first = l.send(run_request("run-small"));
  EXPECT_EQ(first.header("RateLimit-Limit"), "25");
  EXPECT_EQ(first.header("RateLimit-Remaining"), "24");
  EXPECT_EQ(l.count_admitted(100, run_request("run-small")), 24);
  const Result refused = l.send(run_request("run-small"));
  EXPECT_EQ(refused.status(), 429);
  EXPECT_EQ(refused.header("Retry-After"), "3");  // 60 s / 25 = 2.4 s to the next request
  EXPECT_EQ(l.send(run_request("run-default")).header("RateLimit-Limit"), "600");
}

TEST(ThreeBudgets, TB12_ARunThatIsNotLiveIsCountedAsBareAndAnswered404) {
  Limiter l(kProfile);
  for (int i = 0; i < 60; ++i) {
    const Result r = l.send(run_request("never-existed"));
    ASSERT_EQ(r.verdict(), Verdict::kAnswer);
    ASSERT_EQ(r.status(), 404);
  }
  // The bare budget of the address is spent: the next such request, and any
  // bare request from it, is refused.
  EXPECT_EQ(l.send(run_request("never-existed")).status(), 429);
  EXPECT_EQ(l.send(kBare).status(), 429);
  EXPECT_EQ(l.send(kBare, "198.18.0.99").verdict(), Verdict::kAdmit);
}

TEST(ThreeBudgets, TB12_TheAnswerCanBeLeftToTheOrigin) {
  Limiter l(kProfile, [](std::string t) { return patched(std::move(t), "    answer: 404", "    answer: forward"); });
  const Result r = l.send(run_request("never-existed"));
  EXPECT_EQ(r.verdict(), Verdict::kAdmit);
  EXPECT_EQ(r.header("RateLimit-Limit"), "60");
}

TEST(ThreeBudgets, TB13_OnceARunHasEndedNoRequestIsPacedAtTheRunRate) {
  Limiter l(kProfile);
  l.start_run("run-a");
  EXPECT_EQ(l.send(run_request("run-a")).header("RateLimit-Limit"), "600");
  l.end_run("run-a");
  const Result after = l.send(run_request("run-a"));
  EXPECT_EQ(after.status(), 404);
  EXPECT_EQ(after.header("RateLimit-Limit"), "60");
}

TEST(ThreeBudgets, TB14_TheRefusalIsA429WithTheErrorEnvelopeAndNothingIsForwarded) {
  Limiter l(kProfile);
  EXPECT_EQ(l.count_admitted(60, kBare), 60);
  const Result r = l.send(kBare);
  EXPECT_EQ(r.verdict(), Verdict::kRefuse);
  EXPECT_EQ(r.status(), 429);
  EXPECT_EQ(r.response.substr(0, 30), "HTTP/1.1 429 Too Many Requests");
  EXPECT_EQ(r.body(), R"({"error":{"code":"rate_limited","message":"Too many requests. Slow down and retry."}})");
  EXPECT_EQ(r.header("Content-Type"), "application/json");
  EXPECT_EQ(r.header("Content-Length"), std::to_string(r.body().size()));
  // after_answer: keep-alive (the default): the connection stays open.
  EXPECT_TRUE(r.keep_alive);
  EXPECT_EQ(r.header("Connection"), "");
}

// A keep-alive answer the data plane cannot keep open after all
// goes with FIN, so it must say so. Written closing (http::write_answer),
// it has `Connection: close` in its head and nothing else changes; an
// answer that closes already is written the same either way.
TEST(ThreeBudgets, TB14_AKeepAliveAnswerSentWithFinSaysConnectionClose) {
  Limiter l(kProfile);
  ASSERT_EQ(l.count_admitted(60, kBare), 60);
  const Result kept = l.send(kBare);
  ASSERT_TRUE(kept.keep_alive);
  Result r;
  r.decision = kept.decision;
  r.response = l.written(kept.decision, false);
  EXPECT_EQ(r.header("Connection"), "close");
  EXPECT_EQ(r.body(), kept.body());
  EXPECT_EQ(r.header("Content-Length"), kept.header("Content-Length"));
  EXPECT_EQ(r.header("Retry-After"), kept.header("Retry-After"));
  std::string without = r.response;
  without.erase(without.find("Connection: close\r\n"), 19);
  EXPECT_EQ(without, kept.response);
  const Result closes = l.send(kBare + "\r\nConnection: close");
  ASSERT_FALSE(closes.keep_alive);
  EXPECT_EQ(closes.response, l.written(closes.decision, false));
}

// after_answer: an answer keeps the connection open unless the
// policy says close, the client asked to close, or the request's end or
// answer is uncertain (Expect: 100-continue, HEAD); then it says
// Connection: close.
TEST(ThreeBudgets, AnAnswerSaysConnectionCloseWhereTheConnectionCloses) {
  Limiter keep(kProfile);
  ASSERT_EQ(keep.count_admitted(60, kBare), 60);
  struct Case {
    std::string request;
    bool keep_alive;
  };
  const std::vector<Case> cases = {
      {kBare, true},
      {kBare + "\r\nConnection: close", false},
      {"GET /v1/things HTTP/1.0\r\nHost: api", false},
      {"GET /v1/things HTTP/1.0\r\nHost: api\r\nConnection: keep-alive", true},
      {"POST /v1/things HTTP/1.1\r\nHost: api\r\nContent-Length: 5\r\nExpect: 100-continue", false},
      {"HEAD /v1/things HTTP/1.1\r\nHost: api", false},
  };
  for (const Case& c : cases) {
    const Result r = keep.send(c.request);
    ASSERT_EQ(r.status(), 429) << c.request;
    EXPECT_EQ(r.keep_alive, c.keep_alive) << c.request;
    EXPECT_EQ(r.header("Connection"), c.keep_alive ? "" : "close") << c.request;
  }
  Limiter close(kProfile, [](std::string t) {
    return patched(std::move(t), "after_answer: keep-alive", "after_answer: close");
  });
  ASSERT_EQ(close.count_admitted(60, kBare), 60);
  const Result r = close.send(kBare);
  EXPECT_FALSE(r.keep_alive);
  EXPECT_EQ(r.header("Connection"), "close");
}

TEST(ThreeBudgets, TB15_RetryAfterIsTheWholeSecondsUntilOneRequestFromTheActualDeficit) {
  // With 2 per minute the interval is 30 s, so the deficit shows.
  Limiter l(kProfile, [](std::string t) {
    return patched(std::move(t), "bare:       { rate: 60/min, burst: 60 }", "bare:       { rate: 2/min, burst: 2 }");
  });
  EXPECT_EQ(l.count_admitted(2, kBare), 2);
  EXPECT_EQ(l.send(kBare).header("Retry-After"), "30");
  l.now += 10 * kSecond + kSecond / 2;
  EXPECT_EQ(l.send(kBare).header("Retry-After"), "20");  // 19.5 s, rounded up
  l.now += 19 * kSecond + kSecond / 2 - 1;
  EXPECT_EQ(l.send(kBare).header("Retry-After"), "1");  // 1 ns short: never 0
  l.now += 1;
  EXPECT_EQ(l.send(kBare).verdict(), Verdict::kAdmit);
}

TEST(ThreeBudgets, TB16_EveryResponseABudgetAppliedToCarriesTheFourFields) {
  Limiter l(kProfile);
  l.start_run("run-a");
  const Result first = l.send(run_request("run-a"));
  EXPECT_EQ(first.header("RateLimit-Limit"), "600");
  EXPECT_EQ(first.header("RateLimit-Remaining"), "599");
  EXPECT_EQ(first.header("RateLimit-Reset"), "1");  // 100 ms until full, rounded up
  EXPECT_EQ(first.header("RateLimit-Policy"), "600;w=60");
  const Result second = l.send(run_request("run-a"));
  EXPECT_EQ(second.header("RateLimit-Remaining"), "598");
  // The refusal carries them too.
  EXPECT_EQ(l.count_admitted(60, kBare), 60);
  const Result refused = l.send(kBare);
  EXPECT_EQ(refused.header("RateLimit-Limit"), "60");
  EXPECT_EQ(refused.header("RateLimit-Remaining"), "0");
  EXPECT_EQ(refused.header("RateLimit-Reset"), "60");
  EXPECT_EQ(refused.header("RateLimit-Policy"), "60;w=60");
  // No budget applied: no field at all.
  const Result health = l.send("GET /healthz HTTP/1.1\r\nHost: api");
  EXPECT_EQ(health.verdict(), Verdict::kExempt);
  EXPECT_TRUE(health.fields.empty());
}

TEST(ThreeBudgets, TB17_AnIdleCallerCanSpendTheWholeBudgetAtOnceThenDrainsTowardTheRate) {
  Limiter l(kProfile);
  l.start_run("run-a");
  EXPECT_EQ(l.count_admitted(600, run_request("run-a")), 600);
  const Result refused = l.send(run_request("run-a"));
  EXPECT_EQ(refused.status(), 429);
  EXPECT_EQ(refused.header("Retry-After"), "1");
  l.now += 100'000'000;  // 100 ms: one request's worth
  EXPECT_EQ(l.send(run_request("run-a")).verdict(), Verdict::kAdmit);
  EXPECT_EQ(l.send(run_request("run-a")).verdict(), Verdict::kRefuse);
  l.now += kMinute;  // a minute idle: full again
  EXPECT_EQ(l.count_admitted(700, run_request("run-a")), 600);
}

TEST(ThreeBudgets, TB18_GetAndHeadOnExactlyHealthzAreNeverLimited) {
  Limiter l(kProfile);
  EXPECT_EQ(l.count_admitted(60, kBare), 60);
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(l.send("GET /healthz HTTP/1.1\r\nHost: api").verdict(), Verdict::kExempt);
    ASSERT_EQ(l.send("HEAD /healthz HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer x").verdict(), Verdict::kExempt);
  }
  EXPECT_EQ(l.send("POST /healthz HTTP/1.1\r\nHost: api").status(), 429);
  EXPECT_EQ(l.send("GET /healthz/deep HTTP/1.1\r\nHost: api").status(), 429);
  EXPECT_EQ(l.send("GET /healthz?probe=1 HTTP/1.1\r\nHost: api").verdict(), Verdict::kExempt);  // the query is not the path
}

TEST(ThreeBudgets, TB19_AClassSwitchedOffCarriesNoFields) {
  Limiter l(kProfile, [](std::string t) {
    return patched(std::move(t), "  - name: bare\n    key: client_ip\n    bucket: bare\n", "");
  });
  for (int i = 0; i < 100; ++i) {
    const Result r = l.send(kBare);
    ASSERT_EQ(r.verdict(), Verdict::kForward);
    ASSERT_TRUE(r.fields.empty());
  }
  EXPECT_EQ(l.send(kCredentialed).header("RateLimit-Limit"), "300");
}

}  // namespace
}  // namespace sluice::test

namespace sluice::test {
namespace {

// An admission's fields are values, rendered only by a caller that inserts
// them (the data plane, as a response is framed); they outlive the policy.
// A refusal carries the same values, which the protocol side writes into
// its answer (TB16 on the 429).
TEST(ThreeBudgets, TB16AdmittedFieldsAreRenderedOnlyWhenInserted) {
  Limiter l("three-budgets.yaml");
  const std::string get = "GET /v1/models HTTP/1.1\r\nHost: a\r\n\r\n";
  const Result first = l.send(get);
  EXPECT_EQ(first.verdict(), limiter::Verdict::kAdmit);
  EXPECT_EQ(first.decision.fields.style, policy::HeaderStyle::kSeed);
  EXPECT_EQ(first.decision.fields.limit, 60u);
  EXPECT_EQ(first.decision.fields.remaining, 59u);
  EXPECT_EQ(first.header("RateLimit-Remaining"), "59");
  char small[20];
  EXPECT_EQ(http::write_ratelimit_fields(first.decision.fields, small), SIZE_MAX) << "too small: nothing half written";
  l.count_admitted(59, get);
  const Result refused = l.send(get);
  ASSERT_EQ(refused.verdict(), limiter::Verdict::kRefuse);
  EXPECT_EQ(refused.decision.fields.style, policy::HeaderStyle::kSeed);
  EXPECT_EQ(refused.decision.fields.remaining, 0u);
  EXPECT_TRUE(refused.decision.answer.charged) << "the answer is written with them";
  EXPECT_EQ(refused.header("RateLimit-Remaining"), "0");
  EXPECT_EQ(refused.header("RateLimit-Limit"), "60");
}

// The operator's busiest-keys view: a decision says what it was counted by.
TEST(ThreeBudgets, DecisionLabelsWhatTheRequestWasCountedBy) {
  Limiter l(kProfile);
  using Kind = limiter::KeyLabel::Kind;
  auto text = [](const limiter::KeyLabel& k) {
    return std::string(reinterpret_cast<const char*>(k.bytes.data()), k.len);
  };
  auto bucket_key = [&](const char* bucket, std::span<const uint8_t> material) {
    return l.state().bucket_hasher.key(l.policy().bucket_named(bucket)->index, material);
  };

  // A bare request: the client address's 16 bytes.
  const Result bare = l.send(kBare, "198.18.0.77");
  ASSERT_EQ(bare.verdict(), Verdict::kAdmit);
  const net::IpAddress peer = *net::parse_ip("198.18.0.77");
  EXPECT_EQ(bare.decision.label.kind, Kind::kClientIp);
  ASSERT_EQ(bare.decision.label.len, 16);
  EXPECT_TRUE(std::equal(peer.bytes.begin(), peer.bytes.end(), bare.decision.label.bytes.begin()));
  EXPECT_EQ(bare.decision.label.key_hash, bucket_key("bare", peer.bytes).k0);

  // A live run: the token's text, cut to 32 bytes.
  l.start_run("run-a");
  const Result run = l.send(run_request("run-a"));
  ASSERT_EQ(run.verdict(), Verdict::kAdmit);
  EXPECT_EQ(run.decision.label.kind, Kind::kText);
  EXPECT_EQ(text(run.decision.label), "run-a");
  const std::string long_token(40, 'r');
  l.start_run(long_token);
  const Result long_run = l.send(run_request(long_token));
  ASSERT_EQ(long_run.verdict(), Verdict::kAdmit);
  EXPECT_EQ(text(long_run.decision.label), long_token.substr(0, 32));
  EXPECT_NE(long_run.decision.label.key_hash, run.decision.label.key_hash);

  // A credential: its digest (lo, then hi), never its text; a refusal carries the label too.
  EXPECT_EQ(l.count_admitted(300, kCredentialed), 300);
  const Result credentialed = l.send(kCredentialed);
  ASSERT_EQ(credentialed.verdict(), Verdict::kRefuse);
  const limiter::Digest d = l.digest("bearer key-one");
  EXPECT_EQ(credentialed.decision.label.kind, Kind::kCredential);
  ASSERT_EQ(credentialed.decision.label.len, 16);
  uint64_t lo = 0, hi = 0;
  std::memcpy(&lo, credentialed.decision.label.bytes.data(), 8);
  std::memcpy(&hi, credentialed.decision.label.bytes.data() + 8, 8);
  EXPECT_EQ(lo, d.lo);
  EXPECT_EQ(hi, d.hi);
  EXPECT_EQ(credentialed.decision.label.key_hash,
            l.state().bucket_hasher.key(l.policy().bucket_named("credential")->index, d).k0);

  // TB07: a credential past the address's ceiling is counted by the address.
  auto with_key = [](int i) {
    return "GET /v1/x HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer ceiling-" + std::to_string(i);
  };
  for (int i = 0; i < 8; ++i) ASSERT_EQ(l.send(with_key(i), "198.18.3.9").decision.label.kind, Kind::kCredential);
  const Result ninth = l.send(with_key(8), "198.18.3.9");
  ASSERT_TRUE(ninth.decision.over_credential_ceiling);
  EXPECT_EQ(ninth.decision.label.kind, Kind::kClientIp);
  const net::IpAddress ceiling_peer = *net::parse_ip("198.18.3.9");
  EXPECT_TRUE(std::equal(ceiling_peer.bytes.begin(), ceiling_peer.bytes.end(), ninth.decision.label.bytes.begin()));

  // Exempt: no rule, no label.
  EXPECT_EQ(l.send("GET /healthz HTTP/1.1\r\nHost: api").decision.label.kind, Kind::kNone);
}

}  // namespace
}  // namespace sluice::test

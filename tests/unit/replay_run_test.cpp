// sluice-replay's decisions (replay/replay_run.h): records decided in time
// order by the real decide() on the shipped profiles, against counts worked
// out by hand from the rules; usage reports (DQ05) charged when their
// response ended; --compare; the JSON and text reports holding the same
// figures; the same outcome on one thread and on two.
#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "control/credential_file.h"
#include "control/json.h"
#include "limiter/credential.h"
#include "net/ip_address.h"
#include "replay/outcome_tally.h"
#include "replay/replay_run.h"
#include "replay/replay_state.h"
#include "replay/report_json.h"
#include "replay/report_text.h"

namespace sluice::replay {
namespace {

constexpr time::Nanos kT0 = 1'796'000'000ull * time::kNanosPerSecond;  // a whole minute
constexpr time::Nanos kMs = 1'000'000;

RequestRecord request(time::Nanos at, const char* ip, const std::string& target, const std::string& fields = "") {
  static uint64_t n = 0;
  RequestRecord r;
  r.at = at;
  r.record_number = ++n;
  r.order = record_order(0, n);
  r.conn.peer = *net::parse_ip(ip);
  r.conn.destination_port = 80;
  r.head = "GET " + target + " HTTP/1.1\r\nHost: api.example\r\n" + fields + "\r\n";
  return r;
}

// The end of the response to the request numbered `response` (a capture's
// RequestRecord::response), with the tokens it reported if any.
RequestRecord response_end(uint64_t response, time::Nanos at, std::optional<uint64_t> tokens = std::nullopt) {
  RequestRecord e;
  e.kind = RequestRecord::Kind::kResponseEnd;
  e.at = at;
  e.order = record_order(0, 1'000'000 + response);
  e.response = response;
  if (tokens) {
    e.has_usage = true;
    e.usage_tokens = *tokens;
    e.usage_at = at;
  }
  return e;
}

struct Replayed {
  ReplayReport report;
};

class ReplayRunTest : public ::testing::Test {
 protected:
  ReplayReport replay(std::vector<RequestRecord> records, const std::string& policy_file,
                      const std::string& compare_file = "", StateSources sources = {}) {
    BoxStateLoad box = load_box_state(sources);
    EXPECT_TRUE(box.errors.empty()) << (box.errors.empty() ? "" : box.errors.front());
    LoadedPolicy first = load_policy(policy_file, *box.state.credential_hasher);
    EXPECT_TRUE(first.policy) << (first.errors.empty() ? "" : first.errors.front());
    PolicyLimiter first_limiter(*first.policy, box.state, 1 << 14);
    LoadedPolicy second;
    std::unique_ptr<PolicyLimiter> second_limiter;
    std::optional<PolicyUnderReplay> compared;
    if (!compare_file.empty()) {
      second = load_policy(compare_file, *box.state.credential_hasher);
      EXPECT_TRUE(second.policy) << (second.errors.empty() ? "" : second.errors.front());
      second_limiter = std::make_unique<PolicyLimiter>(*second.policy, box.state, 1 << 14);
      compared = PolicyUnderReplay{second_limiter.get(), compare_file};
    }
    ReplayReport report;
    decide_records(records, {&first_limiter, policy_file}, compared, {}, report);
    return report;
  }

  static std::string shipped(const char* name) { return std::string(SLUICE_CONFIG_DIR) + "/" + name; }

  // A shipped profile with `from` (which must be in it) replaced by `to`,
  // written to a temporary file: its path, or "" if `from` is not there.
  std::string edited_copy(const char* profile, const std::string& from, const std::string& to,
                          const std::string& name) {
    std::ifstream in(shipped(profile));
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t at = text.find(from);
    if (at == std::string::npos) return "";
    text.replace(at, from.size(), to);
    return write_temp(name, text);
  }

  std::string write_temp(const std::string& name, const std::string& text) {
    const std::string path = ::testing::TempDir() + "replay_run_" + name;
    std::ofstream(path) << text;
    return path;
  }
};

const RuleCounts& row(const PolicyOutcome& o, const std::string& rule) {
  for (const RuleCounts& r : o.rules) {
    if (r.rule == rule) return r;
  }
  static const RuleCounts none{};
  ADD_FAILURE() << "no row for rule '" << rule << "'";
  return none;
}

// TB01, TB14, TB18: 70 bare requests from one address in 70 ms: the burst
// of 60 admitted, 10 refused; another address untouched; /healthz exempt.
// The records arrive shuffled: they are decided in time order.
TEST_F(ReplayRunTest, BareBurstDecidedInTimeOrder_TB01_TB14_TB18) {
  std::vector<RequestRecord> records;
  for (int i = 69; i >= 0; --i) records.push_back(request(kT0 + i * kMs, "198.18.0.7", "/v1/models"));
  for (int i = 0; i < 5; ++i) records.push_back(request(kT0 + i * kMs, "198.18.0.8", "/v1/models"));
  for (int i = 0; i < 3; ++i) records.push_back(request(kT0 + i * kMs, "198.18.0.7", "/healthz"));
  const ReplayReport r = replay(std::move(records), shipped("three-budgets.yaml"));
  EXPECT_EQ(r.records, 78u);
  EXPECT_EQ(r.outcome.requests, 78u);
  EXPECT_EQ(r.outcome.exempt, 3u);
  EXPECT_EQ(r.outcome.admitted, 65u);
  EXPECT_EQ(r.outcome.refused, 10u);
  EXPECT_EQ(row(r.outcome, "bare").refused, 10u);
  EXPECT_EQ(row(r.outcome, "bare").admitted, 65u);
  ASSERT_EQ(r.outcome.refused_keys.size(), 1u);
  const RefusedKey& k = r.outcome.refused_keys[0];
  EXPECT_EQ(k.key, "198.18.0.7");
  EXPECT_EQ(k.rule, "bare");
  EXPECT_EQ(k.requests, 70u);
  EXPECT_EQ(k.refused, 10u);
  EXPECT_EQ(k.first_refusal, kT0 + 60 * kMs);  // the 61st request
  EXPECT_EQ(k.last_refusal, kT0 + 69 * kMs);
  // Both keys' busiest minute against the bare budget of 60 a minute.
  ASSERT_EQ(r.outcome.rates.size(), 1u);
  EXPECT_EQ(r.outcome.rates[0].limit, 60u);
  EXPECT_EQ(r.outcome.rates[0].keys, 2u);
  EXPECT_EQ(r.outcome.rates[0].keys_over, 1u);
  EXPECT_NEAR(r.outcome.rates[0].max_ratio, 70.0 / 60.0, 1e-9);
}

// Layered budgets and the penalty box replay as the live box decides them,
// at each record's own time: one address, 2 a second layered under 100 an
// hour, boxed for a minute after 3 refusals within the minute. Second 0: 2
// admitted, 3 refused (the 3rd boxes it); second 30: boxed, refused though
// its buckets would admit it; second 61, out of the box: 2 admitted.
TEST_F(ReplayRunTest, LayeredBudgetsAndThePenaltyBox) {
  const std::string policy = write_temp("layered.yaml",
                                        "sluice: 1\nname: layered\nheader_style: ietf\nbuckets:\n"
                                        "  per-second: { rate: 2/s, burst: 2 }\n"
                                        "  per-hour: { window: hour, requests: 100 }\n"
                                        "rules:\n  - name: layered\n    key: client_ip\n"
                                        "    bucket: [per-second, per-hour]\n"
                                        "    penalty: { after: 3, within: 1m, for: 1m }\n");
  std::vector<RequestRecord> records;
  for (int i = 0; i < 5; ++i) records.push_back(request(kT0 + i * kMs, "198.18.0.7", "/a"));
  records.push_back(request(kT0 + 30 * time::kNanosPerSecond, "198.18.0.7", "/a"));
  for (int i = 0; i < 2; ++i) records.push_back(request(kT0 + 61 * time::kNanosPerSecond + i * kMs, "198.18.0.7", "/a"));
  const ReplayReport r = replay(std::move(records), policy);
  EXPECT_EQ(r.outcome.requests, 8u);
  EXPECT_EQ(r.outcome.admitted, 4u);
  EXPECT_EQ(r.outcome.refused, 4u);
  ASSERT_EQ(r.outcome.refused_keys.size(), 1u);
  EXPECT_EQ(r.outcome.refused_keys[0].last_refusal, kT0 + 30 * time::kNanosPerSecond);  // the boxed one
}

// A rule's delay replays as the box decides it: 2 a second, one back to
// back, up to 2 waiting: of 4 requests at once, 1 goes at once, 2 are
// admitted late (500 and 1000 ms), 1 is refused.
TEST_F(ReplayRunTest, ADelayAdmitsLateWhatItsBucketWillAdmitSoon) {
  const std::string policy = write_temp("delay.yaml",
                                        "sluice: 1\nname: delay\nbuckets:\n  slow: { rate: 2/s, burst: 1 }\n"
                                        "rules:\n  - name: slow\n    key: client_ip\n    bucket: slow\n"
                                        "    delay_max: 2s\n    delay_per_key: 2\n");
  std::vector<RequestRecord> records;
  for (int i = 0; i < 4; ++i) records.push_back(request(kT0, "198.18.0.7", "/a"));
  const ReplayReport r = replay(std::move(records), policy);
  EXPECT_EQ(r.outcome.admitted, 3u);
  EXPECT_EQ(r.outcome.refused, 1u);
  EXPECT_EQ(row(r.outcome, "slow").delayed, 2u);
  EXPECT_EQ(row(r.outcome, "slow").delay_total, 1500 * kMs);
}

// Records that came behind a load balancer (a PROXY header named their
// client) replay as the policy's proxy_protocol takes them: keyed by the
// relayed client from a trusted proxy; not judged (reset) from an
// untrusted peer or without a header from a trusted one; answered 400
// where the policy reads no header.
TEST_F(ReplayRunTest, PROXYHeadersAsThePolicyTakesThem) {
  const std::string on = write_temp("pp.yaml",
                                    "sluice: 1\nname: pp\nclient_ip:\n  trusted_proxies: [198.18.0.250/32]\n"
                                    "  proxy_protocol: strip\nbuckets:\n  b: { rate: 1/hour, burst: 1 }\n"
                                    "rules:\n  - name: per-client\n    key: client_ip\n    bucket: b\n");
  const std::string off = write_temp("plain.yaml",
                                     "sluice: 1\nname: plain\nbuckets:\n  b: { rate: 1/hour, burst: 1 }\n"
                                     "rules:\n  - name: per-client\n    key: client_ip\n    bucket: b\n");
  const auto relayed = [&](time::Nanos at, const char* peer, const char* client, uint64_t connection) {
    RequestRecord r = request(at, peer, "/a");
    r.connection = connection;
    if (client != nullptr) {
      r.relay = RequestRecord::Relay::kRelayed;
      r.relay_version = 2;
      r.relayed = *net::parse_ip(client);
    }
    return r;
  };
  const auto records = [&] {
    return std::vector<RequestRecord>{
        relayed(kT0, "198.18.0.250", "203.0.113.7", 1),      // admitted, as .7
        relayed(kT0 + kMs, "198.18.0.250", "203.0.113.8", 2),  // admitted, as .8
        relayed(kT0 + 2 * kMs, "198.18.0.250", "203.0.113.7", 3),  // refused: .7's hour
        relayed(kT0 + 3 * kMs, "198.18.0.11", "203.0.113.9", 4),   // an untrusted peer's header: reset
        relayed(kT0 + 4 * kMs, "198.18.0.250", nullptr, 5),        // the balancer without one: reset
    };
  };
  const ReplayReport r = replay(records(), on);
  EXPECT_EQ(r.outcome.requests, 3u);
  EXPECT_EQ(r.outcome.admitted, 2u);
  EXPECT_EQ(r.outcome.refused, 1u);
  const ReplayReport plain = replay(records(), off);
  EXPECT_EQ(plain.outcome.unparsed, 4u) << "a header read as HTTP";
  EXPECT_EQ(plain.outcome.admitted, 1u);
}

// Keyed by an IPv6 prefix (X03), a key reads as that prefix in the report
// ("2001:db8:1::/64"), not as an address; an IPv4 key as its address.
TEST_F(ReplayRunTest, AnIpv6PrefixKeyReadsAsAPrefix) {
  const std::string policy = write_temp("v6.yaml",
                                        "sluice: 1\nname: v6\nclient_ip:\n  ipv6_prefix: 64\nbuckets:\n"
                                        "  b: { rate: 1/hour, burst: 1 }\nrules:\n  - name: per-client\n"
                                        "    key: client_ip\n    bucket: b\n");
  std::vector<RequestRecord> records;
  records.push_back(request(kT0, "2001:db8:1::5", "/a"));
  records.push_back(request(kT0 + kMs, "2001:db8:1::6", "/a"));  // the same /64: refused
  records.push_back(request(kT0 + 2 * kMs, "198.18.0.7", "/a"));
  records.push_back(request(kT0 + 3 * kMs, "198.18.0.7", "/a"));
  const ReplayReport r = replay(std::move(records), policy);
  ASSERT_EQ(r.outcome.refused_keys.size(), 2u);
  std::vector<std::string> keys = {r.outcome.refused_keys[0].key, r.outcome.refused_keys[1].key};
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(keys, (std::vector<std::string>{"198.18.0.7", "2001:db8:1::/64"}));
}

// A policy that needs what the replay was not given says so, with the
// requests it touched: route-families keys by user, and without a
// credential map every credential is unknown (RF10: 401).
TEST_F(ReplayRunTest, MissingStateIsAWarningWithItsCount) {
  std::vector<RequestRecord> records;
  for (int i = 0; i < 3; ++i) {
    RequestRecord r = request(kT0 + i * kMs, "198.18.0.31", "/api/claims");
    r.head = "GET /api/claims HTTP/1.1\r\nHost: cloud\r\nAuthorization: Bearer someone\r\n\r\n";
    records.push_back(r);
  }
  const ReplayReport r = replay(std::move(records), shipped("route-families.yaml"));
  EXPECT_EQ(r.outcome.answered, 3u);
  ASSERT_EQ(r.outcome.warnings.size(), 1u);
  EXPECT_EQ(r.outcome.warnings[0],
            "3 requests answered 401 because no credential map was given (--state-dir, or --credentials with it): "
            "the box may have known their users");
  // The three-budgets profile with nothing missing says nothing.
  std::vector<RequestRecord> plain;
  plain.push_back(request(kT0, "198.18.0.32", "/v1/a"));
  EXPECT_TRUE(replay(std::move(plain), shipped("three-budgets.yaml")).outcome.warnings.empty());
}

// A day window replays by the records' calendar: 3 a day, 4 requests in the
// day's last seconds (the 4th refused), 2 just after midnight (admitted).
TEST_F(ReplayRunTest, ADayWindowEndsAtTheRecordsMidnight) {
  const std::string policy = write_temp("daily.yaml",
                                        "sluice: 1\nname: daily\nbuckets:\n"
                                        "  per-day: { window: day, requests: 3 }\n"
                                        "rules:\n  - name: daily\n    key: client_ip\n    bucket: per-day\n");
  const time::Nanos midnight = (kT0 / (86400 * time::kNanosPerSecond) + 1) * 86400 * time::kNanosPerSecond;
  std::vector<RequestRecord> records;
  for (int i = 0; i < 4; ++i) records.push_back(request(midnight - 2 * time::kNanosPerSecond + i * kMs, "198.18.0.7", "/a"));
  for (int i = 0; i < 2; ++i) records.push_back(request(midnight + time::kNanosPerSecond + i * kMs, "198.18.0.7", "/a"));
  const ReplayReport r = replay(std::move(records), policy);
  EXPECT_EQ(r.outcome.admitted, 5u);
  EXPECT_EQ(r.outcome.refused, 1u);
}

// TB01: the bare bucket refills one request a second; the record clock, not
// the wall clock, is what refills it.
TEST_F(ReplayRunTest, RefillFollowsTheRecordsClock_TB01) {
  std::vector<RequestRecord> records;
  for (int i = 0; i < 61; ++i) records.push_back(request(kT0 + i * kMs, "198.18.0.9", "/v1/a"));
  records.push_back(request(kT0 + 60 * kMs + 1001 * kMs, "198.18.0.9", "/v1/a"));  // a token back
  records.push_back(request(kT0 + 60 * kMs + 1002 * kMs, "198.18.0.9", "/v1/a"));  // none yet
  const ReplayReport r = replay(std::move(records), shipped("three-budgets.yaml"));
  EXPECT_EQ(r.outcome.admitted, 61u);
  EXPECT_EQ(r.outcome.refused, 2u);
}

// TB11, TB12: a live run (from a runs file) is counted by its token; a run
// not live is answered 404 under ended-run.
TEST_F(ReplayRunTest, LiveRunsFromARunsFile_TB11_TB12) {
  const std::string runs = write_temp("runs", "# live runs\nrun-7f3a\nrun-budget 2\n");
  std::vector<RequestRecord> records;
  for (int i = 0; i < 3; ++i) records.push_back(request(kT0 + i * kMs, "198.18.0.10", "/vrx/run-7f3a/v1/screen"));
  for (int i = 0; i < 3; ++i) records.push_back(request(kT0 + i * kMs, "198.18.0.10", "/vrx/run-budget/v1/screen"));
  records.push_back(request(kT0 + 10 * kMs, "198.18.0.10", "/vrx/run-gone/v1/screen"));
  const ReplayReport r = replay(std::move(records), shipped("three-budgets.yaml"), "", {.runs_file = runs});
  EXPECT_EQ(row(r.outcome, "run").admitted, 5u);  // 3 + the budget of 2 a minute (its burst)
  EXPECT_EQ(row(r.outcome, "run").refused, 1u);
  EXPECT_EQ(row(r.outcome, "ended-run").answered, 1u);
  // The busiest periods set each run against the limit that applied to it:
  // run-budget (2 a minute, 3 sent) is over its own budget, run-7f3a (3 of
  // the run bucket's default) is not.
  const auto rates = std::find_if(r.outcome.rates.begin(), r.outcome.rates.end(),
                                  [](const RateDistribution& d) { return d.rule == "run"; });
  ASSERT_NE(rates, r.outcome.rates.end());
  EXPECT_EQ(rates->keys, 2u);
  EXPECT_EQ(rates->keys_over, 1u);
  EXPECT_NEAR(rates->max_ratio, 3.0 / 2.0, 1e-9);
}

TEST_F(ReplayRunTest, ABrokenRunsFileIsNamedByLineAndColumn) {
  const std::string runs = write_temp("badruns", "ok-token\nbad/token\nfine 12 extra\n");
  const BoxStateLoad box = load_box_state({.runs_file = runs});
  ASSERT_EQ(box.errors.size(), 2u);
  EXPECT_EQ(box.errors[0], runs + ":2:1: a run token is 1..128 characters of [A-Za-z0-9._~-]");
  EXPECT_EQ(box.errors[1], runs + ":3:9: a line is TOKEN [BUDGET]");
}

// RF04, RF05: a box's state directory gives the credential map and the
// secret its hashes are keyed with: two credentials of one user share that
// user's bucket (150 of their 160 claims admitted), another user has their
// own, and a credential the map does not hold is answered 401. The
// directory is read and never written.
TEST_F(ReplayRunTest, TheStateDirectorysCredentialMapKeysUsers_RF04_RF05) {
  const std::string dir = ::testing::TempDir() + "replay_run_state";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directory(dir);
  std::array<uint8_t, limiter::KeyHasher::kSecretSize> secret{};
  for (size_t i = 0; i < secret.size(); ++i) secret[i] = static_cast<uint8_t>(i * 7 + 1);
  std::ofstream(dir + "/credential.secret", std::ios::binary)
      .write(reinterpret_cast<const char*>(secret.data()), static_cast<std::streamsize>(secret.size()));
  std::filesystem::permissions(dir + "/credential.secret", std::filesystem::perms::owner_read |
                                                               std::filesystem::perms::owner_write);
  const limiter::KeyHasher hasher(secret);
  const auto digest_of = [&](const std::string& credential) {
    std::string buf(credential.size() + 1, '\0');
    const std::string_view norm = limiter::normalize_credential(credential, std::span<char>(buf.data(), buf.size()));
    return control::digest_hex(
        hasher.digest(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(norm.data()), norm.size())));
  };
  std::ofstream(dir + "/credentials") << digest_of("Bearer alice-key-1") << " alice\n"
                                      << digest_of("Bearer alice-key-2") << " alice\n"
                                      << digest_of("Bearer bob-key") << " bob\n";
  const auto before = std::filesystem::last_write_time(dir + "/credentials");
  std::vector<RequestRecord> records;
  const auto claims = [&](int n, const char* ip, const char* credential) {
    for (int i = 0; i < n; ++i) {
      records.push_back(request(kT0 + i * 1000, ip, "/api/claims/" + std::to_string(i),
                                std::string("Authorization: ") + credential + "\r\n"));
    }
  };
  claims(100, "198.18.0.21", "Bearer alice-key-1");
  claims(60, "198.18.0.22", "bearer   alice-key-2");  // TB05's reading: the scheme in any case, spaces
  claims(5, "198.18.0.23", "Bearer bob-key");
  claims(1, "198.18.0.24", "Bearer nobody-key");
  const ReplayReport r = replay(std::move(records), shipped("route-families.yaml"), "", {.state_dir = dir});
  EXPECT_EQ(row(r.outcome, "claims").admitted, 155u);
  EXPECT_EQ(row(r.outcome, "claims").refused, 10u);
  EXPECT_EQ(r.outcome.answered, 1u);  // RF05: the unknown credential's 401
  ASSERT_EQ(r.outcome.refused_keys.size(), 1u);
  EXPECT_EQ(r.outcome.refused_keys[0].key, "user alice");
  EXPECT_EQ(r.outcome.refused_keys[0].requests, 160u);
  EXPECT_EQ(std::filesystem::last_write_time(dir + "/credentials"), before);
  EXPECT_FALSE(std::filesystem::exists(dir + "/runs.journal"));  // read, never created
  std::filesystem::remove_all(dir);
}

// DQ05, DQ07: tokens reported by a response are charged when the response
// ends: a request before that end is admitted, one after it is refused once
// the minute's tokens are used up.
TEST_F(ReplayRunTest, UsageIsChargedWhenTheResponseEnds_DQ05_DQ07) {
  const std::string deployment = "X-Pi-Deployment: claude-sonnet-us-2\r\n";  // 200000 tokens a minute
  std::vector<RequestRecord> records;
  RequestRecord big = request(kT0 + 1000 * kMs, "198.18.0.11", "/v1/chat", deployment);
  big.has_usage = true;
  big.usage_tokens = 200000;
  big.usage_at = kT0 + 3000 * kMs;
  records.push_back(big);
  records.push_back(request(kT0 + 2000 * kMs, "198.18.0.11", "/v1/chat", deployment));  // before the end
  records.push_back(request(kT0 + 4000 * kMs, "198.18.0.11", "/v1/chat", deployment));  // after it
  records.push_back(request(kT0 + 61000 * kMs, "198.18.0.11", "/v1/chat", deployment));  // the next minute
  const ReplayReport r = replay(std::move(records), shipped("deployment-quotas.yaml"));
  EXPECT_EQ(r.outcome.usage_reports, 1u);
  EXPECT_EQ(r.outcome.admitted, 3u);
  EXPECT_EQ(r.outcome.refused, 1u);
  ASSERT_EQ(r.outcome.refused_keys.size(), 1u);
  EXPECT_EQ(r.outcome.refused_keys[0].key, "claude-sonnet-us-2");
  EXPECT_EQ(r.outcome.refused_keys[0].first_refusal, kT0 + 4000 * kMs);
}

// A capture's response ends come as records of their own, naming the
// request they answer: the tokens charged then (DQ05), and only for a
// request the policy forwarded.
TEST_F(ReplayRunTest, AResponseEndRecordChargesItsRequestsUsage_DQ05) {
  const std::string deployment = "X-Pi-Deployment: claude-sonnet-us-2\r\n";  // 200000 tokens a minute
  std::vector<RequestRecord> records;
  RequestRecord big = request(kT0 + 1000 * kMs, "198.18.0.11", "/v1/chat", deployment);
  big.response = 7;
  records.push_back(big);
  records.push_back(request(kT0 + 2000 * kMs, "198.18.0.11", "/v1/chat", deployment));  // before the end
  records.push_back(response_end(7, kT0 + 3000 * kMs, 200000));
  records.push_back(request(kT0 + 4000 * kMs, "198.18.0.11", "/v1/chat", deployment));  // after it
  const ReplayReport r = replay(std::move(records), shipped("deployment-quotas.yaml"));
  EXPECT_EQ(r.records, 3u);  // the end is no request
  EXPECT_EQ(r.outcome.requests, 3u);
  EXPECT_EQ(r.outcome.usage_reports, 1u);
  EXPECT_EQ(r.outcome.admitted, 2u);
  EXPECT_EQ(r.outcome.refused, 1u);
  ASSERT_EQ(r.outcome.refused_keys.size(), 1u);
  EXPECT_EQ(r.outcome.refused_keys[0].first_refusal, kT0 + 4000 * kMs);
}

// A rule's in-flight slot is held from the head until the response's end
// record, as the appliance holds it until the response ends; a request
// whose end is not known (a log's) gives it back at once.
TEST_F(ReplayRunTest, AnInFlightSlotIsHeldUntilItsResponseEnds) {
  const std::string policy = edited_copy("default.yaml", "    bucket: per-client\n",
                                         "    bucket: per-client\n    concurrency: 1\n", "concurrency.yaml");
  ASSERT_FALSE(policy.empty());
  std::vector<RequestRecord> records;
  RequestRecord slow = request(kT0, "198.18.0.12", "/v1/a");
  slow.response = 1;
  records.push_back(slow);
  records.push_back(request(kT0 + 1 * kMs, "198.18.0.12", "/v1/b"));  // the slot is taken: refused
  records.push_back(response_end(1, kT0 + 2 * kMs));
  RequestRecord next = request(kT0 + 3 * kMs, "198.18.0.12", "/v1/c");  // given back: admitted
  next.response = 2;
  records.push_back(next);
  records.push_back(response_end(2, kT0 + 4 * kMs));
  records.push_back(request(kT0 + 5 * kMs, "198.18.0.12", "/v1/d"));  // no end to wait for: admitted,
  records.push_back(request(kT0 + 6 * kMs, "198.18.0.12", "/v1/e"));  // and its slot given back at once
  const ReplayReport r = replay(std::move(records), policy);
  EXPECT_EQ(r.outcome.requests, 5u);
  EXPECT_EQ(r.outcome.admitted, 4u);
  EXPECT_EQ(r.outcome.refused, 1u);
  ASSERT_EQ(r.outcome.refused_keys.size(), 1u);
  EXPECT_EQ(r.outcome.refused_keys[0].first_refusal, kT0 + 1 * kMs);
}

// A head the stream refused is answered by the appliance before any rule:
// counted as unparsed (sluiced's parse_errors), not as a rule's answer.
TEST_F(ReplayRunTest, AHeadThatDidNotParseIsCountedUnparsed) {
  std::vector<RequestRecord> records;
  RequestRecord bad = request(kT0, "198.18.0.12", "/v1/x");
  bad.head.clear();
  bad.parse_error = http::ParseError::kConflictingContentLength;
  records.push_back(bad);
  RequestRecord junk = request(kT0 + kMs, "198.18.0.12", "/v1/x");
  junk.head = "\x16\x03\x01 not http\r\n\r\n";
  records.push_back(junk);
  const ReplayReport r = replay(std::move(records), shipped("three-budgets.yaml"));
  EXPECT_EQ(r.outcome.unparsed, 2u);
  EXPECT_EQ(r.outcome.answered, 0u);
  EXPECT_EQ(r.outcome.requests, 2u);
}

// --compare counts refusals (429), a rule's answers (404) and unparsed
// heads apart: a policy that answers 404 for /gone/ and refuses the
// second request an hour, against one that only refuses past 3 an hour.
TEST_F(ReplayRunTest, CompareCountsRefusalsAnswersAndUnparsedHeadsApart) {
  const std::string a = write_temp("a.yaml",
                                   "sluice: 1\nname: a\nbuckets:\n  b: { rate: 1/hour, burst: 1 }\n"
                                   "  wide: { rate: 100/hour, burst: 100 }\n"
                                   "rules:\n  - name: gone\n    path: \"/gone/*\"\n    key: client_ip\n    bucket: wide\n"
                                   "    answer: 404\n  - name: per-client\n    key: client_ip\n    bucket: b\n");
  const std::string b = write_temp("b.yaml",
                                   "sluice: 1\nname: b\nbuckets:\n  b: { rate: 3/hour, burst: 3 }\n"
                                   "rules:\n  - name: per-client\n    key: client_ip\n    bucket: b\n");
  std::vector<RequestRecord> records;
  for (int i = 0; i < 4; ++i) records.push_back(request(kT0 + i * kMs, "198.18.0.21", "/a"));  // a: 1+3 refused; b: 3+1
  for (int i = 0; i < 2; ++i) records.push_back(request(kT0 + i * kMs, "198.18.0.22", "/gone/x"));  // a: 404; b: 2 of 3
  RequestRecord bad = request(kT0 + 9 * kMs, "198.18.0.23", "/a");
  bad.head.clear();
  bad.parse_error = http::ParseError::kConflictingContentLength;
  records.push_back(bad);
  const ReplayReport r = replay(std::move(records), a, b);
  ASSERT_TRUE(r.comparison);
  const Comparison& c = *r.comparison;
  EXPECT_EQ(c.refused_by_both, 1u);
  EXPECT_EQ(c.refused_only_by_first, 2u);
  EXPECT_EQ(c.refused_only_by_second, 0u);
  EXPECT_EQ(c.answered_only_by_first, 2u);
  EXPECT_EQ(c.answered_by_both + c.answered_only_by_second, 0u);
  EXPECT_EQ(c.unparsed_by_both, 1u);
  EXPECT_EQ(c.unparsed_only_by_first + c.unparsed_only_by_second, 0u);
  // Who one policy stopped and the other let through: refusals and answers.
  uint64_t listed = 0;
  for (const Difference& d : c.only_first) listed += d.requests;
  EXPECT_EQ(listed, 4u);
  EXPECT_TRUE(c.only_second.empty());
}

// --compare: a stricter copy of the profile refuses 10 more of one
// client's requests; the comparison names that client and rule.
TEST_F(ReplayRunTest, CompareNamesWhoOnlyOnePolicyRefuses) {
  const std::string strict = edited_copy("three-budgets.yaml", "bare:       { rate: 60/min, burst: 60 }",
                                         "bare:       { rate: 10/min, burst: 10 }", "strict.yaml");
  ASSERT_FALSE(strict.empty());
  std::vector<RequestRecord> records;
  for (int i = 0; i < 25; ++i) records.push_back(request(kT0 + i * kMs, "198.18.0.13", "/v1/a"));
  for (int i = 0; i < 70; ++i) records.push_back(request(kT0 + i * kMs, "198.18.0.14", "/v1/a"));
  const ReplayReport r = replay(std::move(records), shipped("three-budgets.yaml"), strict);
  ASSERT_TRUE(r.comparison && r.other);
  EXPECT_EQ(r.outcome.refused, 10u);
  EXPECT_EQ(r.other->refused, 15u + 60u);
  EXPECT_EQ(r.comparison->refused_by_both, 10u);
  EXPECT_EQ(r.comparison->refused_only_by_first, 0u);
  EXPECT_EQ(r.comparison->refused_only_by_second, 65u);
  ASSERT_EQ(r.comparison->only_second.size(), 2u);
  EXPECT_EQ(r.comparison->only_second[0].key, "198.18.0.14");
  EXPECT_EQ(r.comparison->only_second[0].requests, 50u);
  EXPECT_EQ(r.comparison->only_second[0].first, kT0 + 10 * kMs);
  EXPECT_EQ(r.comparison->only_second[1].key, "198.18.0.13");
  EXPECT_EQ(r.comparison->only_second[1].rule, "bare");
  EXPECT_EQ(r.comparison->only_second[1].requests, 15u);
}

// The reports carry the same figures: the JSON's, the text's.
TEST_F(ReplayRunTest, JsonAndTextCarryTheSameFigures) {
  std::vector<RequestRecord> records;
  for (int i = 0; i < 64; ++i) records.push_back(request(kT0 + i * kMs, "2001:db8::7", "/v1/models"));
  ReplayReport r = replay(std::move(records), shipped("three-budgets.yaml"));
  r.inputs.push_back({"x.log", "nginx", 64, 64, 0, {}});
  std::string error;
  const std::optional<control::Json> j = control::parse_json(render_json(r), error);
  ASSERT_TRUE(j) << error;
  const control::Json& p = (*j)["policy"];
  EXPECT_EQ(p["requests"], 64);
  EXPECT_EQ(p["admitted"], 60);
  EXPECT_EQ(p["refused"], 4);
  EXPECT_EQ(p["refused_keys"][0]["key"], "2001:db8::7");
  EXPECT_EQ(p["refused_keys"][0]["first_refusal"], iso_time(kT0 + 60 * kMs));
  EXPECT_EQ(p["series"]["rules"][0]["rule"], "bare");
  EXPECT_EQ(p["series"]["rules"][0]["refused"][0], 4);
  const std::string text = render_text(r);
  EXPECT_NE(text.find("64 requests: 0 forwarded, 0 exempt, 60 admitted, 4 refused, 0 answered"), std::string::npos)
      << text;
  EXPECT_NE(text.find("2001:db8::7"), std::string::npos);
}

// An answer that closes its connection (after_answer: close): the
// appliance judged nothing after it there, so the requests a capture shows
// pipelined behind it are skipped; those on another connection are not.
TEST_F(ReplayRunTest, NothingAfterAClosingAnswerOnItsConnection_TB14) {
  const std::string closing =
      edited_copy("three-budgets.yaml", "after_answer: keep-alive", "after_answer: close", "closing.yaml");
  ASSERT_FALSE(closing.empty());
  std::vector<RequestRecord> records;
  for (int i = 0; i < 63; ++i) {
    records.push_back(request(kT0 + i * kMs, "198.18.0.15", "/v1/a"));
    records.back().connection = record_order(0, 1);
  }
  records.push_back(request(kT0 + 70 * kMs, "198.18.0.15", "/v1/a"));
  records.back().connection = record_order(0, 2);
  const ReplayReport r = replay(std::move(records), closing);
  EXPECT_EQ(r.outcome.requests, 62u);  // 60 admitted, the 61st refused and closed; 2 unjudged; 1 more refused
  EXPECT_EQ(r.outcome.admitted, 60u);
  EXPECT_EQ(r.outcome.refused, 2u);
}

// One thread or two: the same decisions (the pipeline decides in order).
TEST_F(ReplayRunTest, TheSameOutcomeOnOneThreadAndOnTwo) {
  auto records = [] {
    std::vector<RequestRecord> v;
    for (int i = 0; i < 20000; ++i) {
      const std::string ip = "198.18.1." + std::to_string(i % 50);
      v.push_back(request(kT0 + static_cast<time::Nanos>(i) * 3 * kMs, ip.c_str(), "/v1/x"));
    }
    return v;
  };
  ReplayReport one, two;
  {
    tbb::global_control c(tbb::global_control::max_allowed_parallelism, 1);
    one = replay(records(), shipped("three-budgets.yaml"));
  }
  {
    tbb::global_control c(tbb::global_control::max_allowed_parallelism, 2);
    two = replay(records(), shipped("three-budgets.yaml"));
  }
  EXPECT_EQ(one.outcome.admitted, two.outcome.admitted);
  EXPECT_EQ(one.outcome.refused, two.outcome.refused);
  EXPECT_GT(one.outcome.refused, 0u);
  ASSERT_EQ(one.outcome.refused_keys.size(), two.outcome.refused_keys.size());
  for (size_t i = 0; i < one.outcome.refused_keys.size(); ++i) {
    EXPECT_EQ(one.outcome.refused_keys[i].key, two.outcome.refused_keys[i].key);
    EXPECT_EQ(one.outcome.refused_keys[i].refused, two.outcome.refused_keys[i].refused);
  }
}

TEST(ReplayBins, WidthsAreRoundAndFewEnough) {
  EXPECT_EQ(bin_width_for(0), time::kNanosPerSecond);
  EXPECT_EQ(bin_width_for(119 * time::kNanosPerSecond), time::kNanosPerSecond);
  EXPECT_EQ(bin_width_for(120 * time::kNanosPerSecond), 2 * time::kNanosPerSecond);
  EXPECT_EQ(bin_width_for(3600 * time::kNanosPerSecond), 60 * time::kNanosPerSecond);
  EXPECT_LE(30 * 86400 * time::kNanosPerSecond / bin_width_for(30 * 86400 * time::kNanosPerSecond),
            TimeSeries::kMaxBins);
}

}  // namespace
}  // namespace sluice::replay

// The policy loader: the shipped profiles load, and broken files are refused
// whole with file:line:column messages.
#include <gtest/gtest.h>

#include "limiter_harness.h"

namespace sluice::test {
namespace {

std::vector<std::string> errors_of(const std::string& text) {
  const policy::LoadResult r = policy::load_policy_text(text, "p.yaml");
  EXPECT_EQ(r.policy.has_value(), r.errors.empty());
  std::vector<std::string> out;
  for (const auto& e : r.errors) out.push_back(e.to_string());
  return out;
}

const std::string kMinimal =
    "sluice: 1\n"
    "buckets:\n"
    "  b: { rate: 10/s }\n"
    "rules:\n"
    "  - name: r\n"
    "    key: client_ip\n"
    "    bucket: b\n";

TEST(PolicyLoader, TheShippedProfilesLoadAndCompile) {
  for (const char* name : {"three-budgets.yaml", "route-families.yaml", "deployment-quotas.yaml", "default.yaml"}) {
    const policy::LoadResult r = policy::load_policy_file(config_path(name));
    for (const auto& e : r.errors) ADD_FAILURE() << e.to_string();
    ASSERT_TRUE(r.policy) << name;
    std::vector<policy::PolicyError> errors;
    EXPECT_TRUE(http::compile_http1_policy(*r.policy, test_hasher(2), errors)) << name;
  }
  EXPECT_TRUE(errors_of(kMinimal).empty());
}

struct Broken {
  const char* what;
  std::string text;
  std::string expected;  // the whole first error
};

TEST(PolicyLoader, BrokenFilesAreRefusedWithFileLineAndColumn) {
  const std::vector<Broken> cases = {
      {"unknown top-level key", kMinimal + "bukets: {}\n",
       "p.yaml:8:1: unknown key 'bukets' in the policy (expected one of: sluice, name, mode, header_style, "
       "service_ports, limits, client_ip, credentials, cors, usage, after_answer, ambiguous_paths, deadlines, syn_proxy, binding, adoption, exempt, buckets, "
       "cluster, rules, refusal, unauthorized, not_found)"},
      {"after_answer neither keep-alive nor close", kMinimal + "after_answer: linger\n",
       "p.yaml:8:15: after_answer must be keep-alive or close"},
      {"a key given twice", kMinimal + "after_answer: keep-alive\nafter_answer: close\n",
       "p.yaml:9:1: 'after_answer' appears twice in the policy (first at line 8)"},
      {"a rule's key given twice", "sluice: 1\nbuckets:\n  b: { rate: 10/s }\nrules:\n  - name: r\n    key: client_ip\n"
       "    bucket: b\n    bucket: b\n",
       "p.yaml:8:5: 'bucket' appears twice in rule (first at line 7)"},
      {"a bucket defined twice", "sluice: 1\nbuckets:\n  b: { rate: 10/s }\n  b: { rate: 20/s }\nrules:\n  - name: r\n"
       "    key: client_ip\n    bucket: b\n",
       "p.yaml:4:3: 'b' appears twice in buckets (first at line 3)"},
      {"misspelt rule key", "sluice: 1\nbuckets:\n  b: { rate: 10/s }\nrules:\n  - name: r\n    kee: client_ip\n    bucket: b\n",
       "p.yaml:6:5: unknown key 'kee' in rule (expected one of: name, methods, path, require, live_run, key, "
       "when_key_missing, bucket, credential_slots, penalty, concurrency, delay_max, delay_per_key, answer, refusal, header_style, shadow)"},
      {"wrong type", "sluice: 1\nbuckets:\n  b: { rate: 10/s, burst: many }\nrules: []\n",
       "p.yaml:3:27: bucket b burst must be a whole number, not 'many'"},
      {"impossible number", "sluice: 1\nbuckets:\n  b: { rate: 10/s, burst: 0 }\nrules: []\n",
       "p.yaml:3:27: bucket b burst must be between 1 and 1000000000, not 0"},
      {"bad rate", "sluice: 1\nbuckets:\n  b: { rate: 10 per second }\nrules: []\n",
       "p.yaml:3:14: bucket b: rate must be a count per s, min, hour or day, such as 600/min, not '10 per second'"},
      {"a calendar window of a week", "sluice: 1\nbuckets:\n  b: { window: week, requests: 5 }\nrules: []\n",
       "p.yaml:3:16: bucket b: window must be minute, hour or day, not 'week'"},
      {"a UTC offset past 14 hours", "sluice: 1\nbuckets:\n  b: { window: day, utc_offset: '+15:00', requests: 5 }\nrules: []\n",
       "p.yaml:3:33: bucket b: utc_offset must be UTC or +HH:MM / -HH:MM within 14 hours, not '+15:00'"},
      {"a UTC offset not written +HH:MM", "sluice: 1\nbuckets:\n  b: { window: day, utc_offset: 5, requests: 5 }\nrules: []\n",
       "p.yaml:3:33: bucket b: utc_offset must be UTC or +HH:MM / -HH:MM within 14 hours, not '5'"},
      {"a calendar window with neither quota", "sluice: 1\nbuckets:\n  b: { window: hour }\nrules: []\n",
       "p.yaml:3:6: bucket b needs requests, tokens or both per window"},
      {"missing version", "buckets: {}\n", "p.yaml:1:1: the policy needs 'sluice: 1' (the format version)"},
      {"future version", "sluice: 2\n", "p.yaml:1:9: sluice (the format version) must be between 1 and 1, not 2"},
      {"unknown bucket", "sluice: 1\nbuckets: {}\nrules:\n  - name: r\n    key: client_ip\n    bucket: nope\n",
       "p.yaml:4:5: rule r: no bucket named nope in buckets"},
      {"bad path pattern", kMinimal + "    path: /api/{id\n", "p.yaml:8:11: bad path pattern '/api/{id': '{', '}' and '*' are only allowed as {name} segments or a "
       "trailing '*'"},
      {"path parameter not in pattern",
       "sluice: 1\nbuckets:\n  b: { rate: 10/s }\nrules:\n  - name: r\n    path: /a/{x}\n    key: { path_param: y }\n    bucket: b\n",
       "p.yaml:5:5: rule r: path /a/{x} has no parameter {y}"},
      {"bad network", "sluice: 1\nclient_ip:\n  trusted_proxies: [10.0.0.0/33]\n",
       "p.yaml:3:20: '10.0.0.0/33' is not an address or network (such as 198.18.0.0/15)"},
      {"unknown placeholder", "sluice: 1\nrefusal:\n  headers:\n    X-Wait: \"{retry}\"\n",
       "p.yaml:4:13: header X-Wait: unknown placeholder {retry} (known: retry_after, limit, remaining, reset, "
       "window, policy, origin, trace_id)"},
      {"header injection", "sluice: 1\nrefusal:\n  headers:\n    X-A: \"a\\r\\nX-B: b\"\n",
       "p.yaml:4:10: header X-A: a header value may not hold control characters or line breaks"},
      {"duplicate rule", kMinimal + "  - name: r\n    key: client_ip\n    bucket: b\n", "p.yaml:8:5: two rules are named r"},
      {"not yaml", "sluice: 1\nrules: [\n", "p.yaml:3:1: not valid YAML: end of sequence flow not found"},
      {"usage field not a header name (DQ05)", "sluice: 1\nusage: { response_field: \"X Tokens\" }\n",
       "p.yaml:2:26: 'X Tokens' is not a header name of at most 32 characters"},
      {"calendar bucket without quota", "sluice: 1\nbuckets:\n  d: { window: minute }\n",
       "p.yaml:3:6: bucket d needs requests, tokens or both per window"},
      {"status out of range", kMinimal + "refusal: { status: 99 }\n", "p.yaml:8:20: refusal status must be between 100 and 599, not 99"},
      {"slots on an address rule", kMinimal + "    credential_slots: { per_client_ip: 8, overflow_bucket: b }\n",
       "p.yaml:5:5: rule r: credential_slots needs a rule keyed by credential or user"},
      {"empty file", "", "p.yaml: the file is empty"},
      {"service ports not a list", kMinimal + "service_ports: 80\n",
       "p.yaml:8:16: service_ports must be a list of TCP ports"},
      {"service port out of range", kMinimal + "service_ports: [80, 70000]\n",
       "p.yaml:8:21: service port must be between 1 and 65535, not 70000"},
      {"head limit too small", kMinimal + "limits: { max_head_bytes: 100 }\n",
       "p.yaml:8:27: limits max_head_bytes must be between 1024 and 65536, not 100"},
      {"syn_proxy neither on nor off", kMinimal + "syn_proxy: yes\n", "p.yaml:8:12: syn_proxy must be on or off"},
      {"an unknown key is quoted bounded and escaped (a line of another file never comes back whole)",
       kMinimal + "\"root:*:19000:0:99999:7:::\\t\\x01with-a-long-tail-of-more-text\": 1\n",
       "p.yaml:8:1: unknown key 'root:*:19000:0:99999:7:::\\x09\\x01with-a-long-t'... in the policy (expected one of: "
       "sluice, name, mode, header_style, service_ports, limits, client_ip, credentials, cors, usage, after_answer, "
       "ambiguous_paths, deadlines, syn_proxy, binding, adoption, exempt, buckets, cluster, rules, refusal, unauthorized, not_found)"},
      {"a value is quoted bounded and escaped too",
       kMinimal + "exempt:\n  - { path: /h, methods: \"GET\\x01root:*:19000:0:99999:7:::and-more-of-the-line\" }\n",
       "p.yaml:9:26: 'GET\\x01root:*:19000:0:99999:7:::and-more-of'... is not an HTTP method"},
      {"a bucket name that is not plain", "sluice: 1\nbuckets:\n  \"b\\x1b[31m\": { rate: 10/s }\n",
       "p.yaml:3:3: bucket name 'b\\x1b[31m' is not a plain name (1 to 64 letters, digits, '_', '-', '.' or ':')"},
      {"a rule name that is not plain", kMinimal + "  - name: \"two words\"\n    key: client_ip\n    bucket: b\n",
       "p.yaml:8:11: rule name 'two words' is not a plain name (1 to 64 letters, digits, '_', '-', '.' or ':')"},
      {"adoption neither on nor off", kMinimal + "adoption: maybe\n", "p.yaml:8:11: adoption must be on or off"},
      {"binding neither delayed nor immediate", kMinimal + "binding: late\n",
       "p.yaml:8:10: binding must be delayed or immediate"},
      {"delayed binding without the SYN proxy", kMinimal + "syn_proxy: off\nbinding: delayed\n",
       "p.yaml:9:10: binding: delayed needs syn_proxy: on"},
      {"a deadline without a unit", kMinimal + "deadlines: { head: 10 }\n",
       "p.yaml:8:20: deadlines head must be a duration such as 250ms, 60s, 10m or 1h"},
      {"a deadline too short", kMinimal + "deadlines: { body: 5ms }\n",
       "p.yaml:8:20: deadlines body must be 0s (off) or at least 100ms"},
      {"a deadline too long", kMinimal + "deadlines:\n  keep_alive: 25h\n",
       "p.yaml:9:15: deadlines keep_alive must be at most 24h"},
      {"an unknown deadline", kMinimal + "deadlines: { header: 10s }\n",
       "p.yaml:8:14: unknown key 'header' in deadlines (expected one of: head, body, keep_alive, response)"},
      {"exemptions not a list", kMinimal + "exempt: /health\n", "p.yaml:8:9: exempt must be a list"},
      {"exemption without a path", kMinimal + "exempt:\n  - methods: GET\n",
       "p.yaml:9:5: exemption needs a path (matched exactly)"},
      {"exemption path not absolute", kMinimal + "exempt:\n  - path: health\n",
       "p.yaml:9:11: exemption path must start with '/'"},
      {"buckets not a mapping", "sluice: 1\nbuckets: [b]\n", "p.yaml:2:10: buckets must be a mapping"},
      {"rules not a list", "sluice: 1\nrules: { r: {} }\n",
       "p.yaml:2:8: rules must be a list (the first rule that matches a request applies)"},
      {"rule without a bucket", "sluice: 1\nbuckets:\n  b: { rate: 10/s }\nrules:\n  - name: r\n    key: client_ip\n",
       "p.yaml:5:5: rule r needs a bucket"},
      {"unknown when_key_missing", kMinimal + "    when_key_missing: ignore\n",
       "p.yaml:8:23: when_key_missing must be skip or answer-400"},
      {"required field not a header name", kMinimal + "    require: [\"X Bad\"]\n",
       "p.yaml:8:14: 'X Bad' is not a valid header name"},
      {"credential slots without an overflow bucket",
       "sluice: 1\nbuckets:\n  b: { rate: 10/s }\nrules:\n  - name: r\n    key: credential\n    bucket: b\n"
       "    credential_slots: { per_client_ip: 8 }\n",
       "p.yaml:8:23: credential_slots needs overflow_bucket (the budget a credential past the ceiling is counted in)"},
      // Cluster budgets.
      {"a cluster bucket without a cluster section", "sluice: 1\nbuckets:\n  b: { rate: 10/s, scope: cluster }\n",
       "p.yaml:3:3: bucket b: scope: cluster needs a cluster section (the Redis the boxes share)"},
      {"a scope that is neither", "sluice: 1\nbuckets:\n  b: { rate: 10/s, scope: global }\n",
       "p.yaml:3:27: bucket b: scope must be box or cluster"},
      {"a cluster endpoint that does not parse",
       kMinimal + "cluster:\n  redis: [\"198.18.0.9\"]\n  boxes: 2\n  secret_file: /etc/sluice/cluster.secret\n",
       "p.yaml:9:10: cluster redis '198.18.0.9': an endpoint is HOST:PORT, [IPV6]:PORT or unix:/path"},
      {"credentials in a cluster endpoint, which the error does not repeat",
       kMinimal + "cluster:\n  redis: [\"sluice:hunter2@198.18.0.9:6379\"]\n  boxes: 2\n  secret_file: /s\n",
       "p.yaml:9:10: cluster redis '198.18.0.9:6379': credentials do not go in the endpoint; give username and "
       "password_file"},
      {"a username without a password",
       kMinimal + "cluster:\n  redis: [\"unix:/run/r.sock\"]\n  boxes: 2\n  secret_file: /s\n  username: sluice\n",
       "p.yaml:12:13: cluster username needs password_file: the user's password"},
      {"a username with a space",
       kMinimal + "cluster:\n  redis: [\"unix:/run/r.sock\"]\n  boxes: 2\n  secret_file: /s\n  username: \"a b\"\n"
                  "  password_file: /p\n",
       "p.yaml:12:13: cluster username must be 1 to 128 printable characters, no spaces (a Redis ACL user)"},
      {"tls without a CA",
       kMinimal + "cluster:\n  redis: [\"198.18.0.9:6379\"]\n  boxes: 2\n  secret_file: /s\n  tls: { server_name: r }\n",
       "p.yaml:12:8: cluster tls needs ca_file: the CA the servers' certificates are checked against"},
      {"a client certificate without its key",
       kMinimal + "cluster:\n  redis: [\"198.18.0.9:6379\"]\n  boxes: 2\n  secret_file: /s\n"
                  "  tls: { ca_file: /ca, cert_file: /c }\n",
       "p.yaml:12:35: cluster tls cert_file needs key_file, its key"},
      {"tls on a Unix socket",
       kMinimal + "cluster:\n  redis: [\"unix:/run/r.sock\"]\n  boxes: 2\n  secret_file: /s\n  tls: { ca_file: /ca }\n",
       "p.yaml:12:8: cluster tls is for TCP endpoints: 'unix:/run/r.sock' is a Unix socket"},
      {"a relative password file",
       kMinimal + "cluster:\n  redis: [\"unix:/run/r.sock\"]\n  boxes: 2\n  secret_file: /s\n  password_file: pw\n",
       "p.yaml:12:18: cluster password_file must be an absolute path"},
      {"a cluster without redis", kMinimal + "cluster:\n  boxes: 2\n  secret_file: /s\n",
       "p.yaml:9:3: cluster needs redis: the Redis Cluster's seed nodes, or one primary"},
      {"local-share without a box count",
       kMinimal + "cluster:\n  redis: [\"198.18.0.9:6379\"]\n  secret_file: /s\n",
       "p.yaml:9:3: cluster needs boxes (how many boxes share the budgets) for fallback: local-share"},
      {"a cluster without a secret", kMinimal + "cluster:\n  redis: [\"198.18.0.9:6379\"]\n  fallback: local-full\n",
       "p.yaml:9:3: cluster needs secret_file: the bucket-key secret every box shares"},
      {"a sync interval too short",
       kMinimal + "cluster:\n  redis: [\"unix:/run/r.sock\"]\n  boxes: 2\n  secret_file: /s\n  sync_interval: 1ms\n",
       "p.yaml:12:18: cluster sync_interval must be from 5ms to 10s"},
      {"an unknown fallback",
       kMinimal + "cluster:\n  redis: [\"unix:/run/r.sock\"]\n  boxes: 2\n  secret_file: /s\n  fallback: open\n",
       "p.yaml:12:13: cluster fallback must be local-share or local-full"},
      {"a relative secret file",
       kMinimal + "cluster:\n  redis: [\"unix:/run/r.sock\"]\n  boxes: 2\n  secret_file: cluster.secret\n",
       "p.yaml:11:16: cluster secret_file must be an absolute path"},
  };
  for (const Broken& c : cases) {
    const std::vector<std::string> errors = errors_of(c.text);
    ASSERT_FALSE(errors.empty()) << c.what;
    EXPECT_EQ(errors.front(), c.expected) << c.what;
  }
}

TEST(PolicyLoader, EveryErrorOfAFileIsReportedAndNothingIsHalfApplied) {
  const std::vector<std::string> errors =
      errors_of("sluice: 1\nmode: loud\nbuckets:\n  b: { rate: fast }\nrules:\n  - name: r\n    bucket: b\n");
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_EQ(errors[0], "p.yaml:2:7: mode must be enforce or shadow");
  EXPECT_EQ(errors[1].substr(0, 12), "p.yaml:4:14:");
  EXPECT_EQ(errors[2], "p.yaml:6:5: rule r needs a key");
}

TEST(PolicyLoader, ErrorsComeSectionBySection) {
  const std::vector<std::string> errors = errors_of(
      "sluice: 1\nservice_ports: [0]\nlimits: { max_fields: 0 }\nexempt: [{ path: x }]\nrules:\n  - name: r\n"
      "    key: client_ip\nrefusal: { status: 42 }\n");
  EXPECT_EQ(errors, (std::vector<std::string>{
                        "p.yaml:2:17: service port must be between 1 and 65535, not 0",
                        "p.yaml:3:23: limits max_fields must be between 1 and 10000, not 0",
                        "p.yaml:4:18: exemption path must start with '/'",
                        "p.yaml:6:5: rule r needs a bucket",
                        "p.yaml:8:20: refusal status must be between 100 and 599, not 42",
                    }));
}

TEST(PolicyLoader, AMissingFileIsAnError) {
  const policy::LoadResult r = policy::load_policy_file("/nonexistent/policy.yaml");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].to_string(), "/nonexistent/policy.yaml: cannot open the file");
}

TEST(PolicyLoader, DeadlinesHaveTheirDefaultsAndCanBeSetOrTurnedOff) {
  const policy::LoadResult plain = policy::load_policy_text(kMinimal, "p.yaml");
  ASSERT_TRUE(plain.policy);
  EXPECT_EQ(plain.policy->deadlines.head, 10 * kSecond);
  EXPECT_EQ(plain.policy->deadlines.body, 30 * kSecond);
  EXPECT_EQ(plain.policy->deadlines.keep_alive, 75 * kSecond);
  const policy::LoadResult set =
      policy::load_policy_text(kMinimal + "deadlines: { head: 2500ms, body: 0s, keep_alive: 5m }\n", "p.yaml");
  ASSERT_TRUE(set.policy);
  EXPECT_EQ(set.policy->deadlines.head, 2500 * kSecond / 1000);
  EXPECT_EQ(set.policy->deadlines.body, 0u);
  EXPECT_EQ(set.policy->deadlines.keep_alive, 5 * kMinute);
}

TEST(PolicyLoader, RatesAndDurations) {
  uint64_t count;
  time::Nanos period;
  ASSERT_TRUE(policy::parse_rate("600/min", count, period));
  EXPECT_EQ(count, 600u);
  EXPECT_EQ(period, kMinute);
  ASSERT_TRUE(policy::parse_rate("5/second", count, period));
  EXPECT_EQ(period, kSecond);
  EXPECT_FALSE(policy::parse_rate("0/s", count, period));
  EXPECT_FALSE(policy::parse_rate("5/fortnight", count, period));
  ASSERT_TRUE(policy::parse_rate("10000/day", count, period));
  EXPECT_EQ(period, 24 * 60 * kMinute);
  ASSERT_TRUE(policy::parse_rate("3/d", count, period));
  EXPECT_EQ(count, 3u);
  int32_t offset = 1;
  ASSERT_TRUE(policy::parse_utc_offset("UTC", offset));
  EXPECT_EQ(offset, 0);
  ASSERT_TRUE(policy::parse_utc_offset("+05:30", offset));
  EXPECT_EQ(offset, 330);
  ASSERT_TRUE(policy::parse_utc_offset("-08:00", offset));
  EXPECT_EQ(offset, -480);
  ASSERT_TRUE(policy::parse_utc_offset("+14:00", offset));
  EXPECT_FALSE(policy::parse_utc_offset("+14:01", offset));
  EXPECT_FALSE(policy::parse_utc_offset("+05:60", offset));
  EXPECT_FALSE(policy::parse_utc_offset("05:30", offset));
  EXPECT_FALSE(policy::parse_utc_offset("+5:30", offset));
  time::Nanos d;
  ASSERT_TRUE(policy::parse_duration("10m", d));
  EXPECT_EQ(d, 10 * kMinute);
  ASSERT_TRUE(policy::parse_duration("250ms", d));
  EXPECT_EQ(d, 250'000'000u);
  EXPECT_FALSE(policy::parse_duration("10", d));
  EXPECT_FALSE(policy::parse_duration("-1s", d));
}

}  // namespace

// Hour and day windows, at an offset, beside the minute; the compiled
// bucket's fields say the window's length.
TEST(PolicyLoader, CalendarWindowsOfAnHourAndADay) {
  const policy::LoadResult r = policy::load_policy_text(
      "sluice: 1\nbuckets:\n"
      "  rpm: { window: minute, requests: 60 }\n"
      "  rph: { window: hour, requests: 1000, tokens: 50000 }\n"
      "  rpd: { window: day, utc_offset: '-08:00', requests: 10000 }\n"
      "  daily_rate: { rate: 2400/day }\n"
      "rules: []\n",
      "p.yaml");
  ASSERT_TRUE(r.errors.empty()) << r.errors[0].message;
  ASSERT_EQ(r.policy->buckets.size(), 4u);
  EXPECT_EQ(r.policy->buckets[0].window_minutes, 1u);
  EXPECT_EQ(r.policy->buckets[1].window_minutes, 60u);
  EXPECT_EQ(r.policy->buckets[1].tokens, 50000u);
  EXPECT_EQ(r.policy->buckets[2].window_minutes, 1440u);
  EXPECT_EQ(r.policy->buckets[2].utc_offset_minutes, -480);
  EXPECT_EQ(r.policy->buckets[3].period, 24 * 60 * kMinute);
}
// A cluster section, read in full; a bucket is per box unless it
// says otherwise.
TEST(PolicyLoader, ClusterSectionAndScope) {
  using namespace policy;
  const LoadResult r = load_policy_text(
      "sluice: 1\n"
      "buckets:\n"
      "  shared: { rate: 600/min, scope: cluster }\n"
      "  own: { rate: 10/s }\n"
      "  minute: { window: minute, requests: 100, scope: cluster }\n"
      "rules:\n"
      "  - { name: r, key: client_ip, bucket: shared }\n"
      "cluster:\n"
      "  redis: [\"198.18.9.1:7000\", \"[2001:db8::9]:7001\"]\n"
      "  key_prefix: edge\n"
      "  sync_interval: 50ms\n"
      "  fallback: local-share\n"
      "  boxes: 3\n"
      "  secret_file: /etc/sluice/cluster.secret\n"
      "  username: sluice-edge\n"
      "  password_file: /etc/sluice/redis.password\n"
      "  tls: { ca_file: /etc/sluice/redis-ca.pem, cert_file: /etc/sluice/c.pem, key_file: /etc/sluice/c.key,"
      " server_name: redis.internal }\n",
      "p.yaml");
  ASSERT_TRUE(r.policy) << (r.errors.empty() ? "" : r.errors.front().message);
  const Policy& p = *r.policy;
  ASSERT_TRUE(p.cluster);
  EXPECT_EQ(p.cluster->redis, (std::vector<std::string>{"198.18.9.1:7000", "[2001:db8::9]:7001"}));
  EXPECT_EQ(p.cluster->key_prefix, "edge");
  EXPECT_EQ(p.cluster->sync_interval, 50'000'000u);
  EXPECT_EQ(p.cluster->fallback, ClusterSpec::Fallback::kLocalShare);
  EXPECT_EQ(p.cluster->boxes, 3u);
  EXPECT_EQ(p.cluster->secret_file, "/etc/sluice/cluster.secret");
  EXPECT_EQ(p.cluster->username, "sluice-edge");
  EXPECT_EQ(p.cluster->password_file, "/etc/sluice/redis.password");
  ASSERT_TRUE(p.cluster->tls);
  EXPECT_EQ(p.cluster->tls->ca_file, "/etc/sluice/redis-ca.pem");
  EXPECT_EQ(p.cluster->tls->cert_file, "/etc/sluice/c.pem");
  EXPECT_EQ(p.cluster->tls->key_file, "/etc/sluice/c.key");
  EXPECT_EQ(p.cluster->tls->server_name, "redis.internal");
  ASSERT_EQ(p.buckets.size(), 3u);
  EXPECT_EQ(p.buckets[0].scope, BucketSpec::Scope::kCluster);
  EXPECT_EQ(p.buckets[1].scope, BucketSpec::Scope::kBox);
  EXPECT_EQ(p.buckets[2].scope, BucketSpec::Scope::kCluster);
  // The defaults: 20 ms; local-full needs no box count.
  const LoadResult d = load_policy_text(
      "sluice: 1\ncluster:\n  redis: [\"unix:/run/redis.sock\"]\n  fallback: local-full\n  secret_file: /s\n",
      "d.yaml");
  ASSERT_TRUE(d.policy);
  EXPECT_EQ(d.policy->cluster->sync_interval, 20'000'000u);
  EXPECT_EQ(d.policy->cluster->key_prefix, "sluice");
}

}  // namespace sluice::test

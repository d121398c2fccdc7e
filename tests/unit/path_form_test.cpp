// Ambiguous request paths: the classes of bytes origins read differently
// (policy/path_form.h), one case or more per class and the spellings of the
// backslash attack on an exemption; the normal-form fast path; and what the
// limiter does with an ambiguous path under each ambiguous_paths setting.
#include <gtest/gtest.h>

#include <dirent.h>

#include <functional>
#include <string>
#include <vector>

#include "limiter_harness.h"
#include "policy/path_form.h"
#include "policy/path_pattern.h"

namespace sluice::test {
namespace {

using policy::classify_path;
using policy::PathClass;

std::string classes_of(std::string_view path) {
  const policy::PathForm f = classify_path(path);
  std::string s;
  for (int c = 0; c < policy::kPathClasses; ++c) {
    if (f.has(static_cast<PathClass>(c))) s += std::string(s.empty() ? "" : ",") +
                                              std::string(policy::path_class_name(static_cast<PathClass>(c)));
  }
  return s;
}

void expect_class(std::string_view path, PathClass c) {
  EXPECT_TRUE(classify_path(path).has(c)) << path << " should be " << policy::path_class_name(c) << ", is {"
                                          << classes_of(path) << "}";
}

TEST(PathForm, NormalFormPaths) {
  for (const char* p : {"/", "/healthz", "/v1/models", "/v1/models/gpt-4.1/.well-known", "/.well-known/x",
                        "/a/...", "/a/..b", "/a.b/c.", "/v1/", "/caf%C3%A9", "/a%20b", "/a%3Fb", "/a%25b",
                        "/%F0%9F%98%80", "/a/b:c@d!$&'()*+,=", "*", "example.com:443", ""}) {
    EXPECT_TRUE(classify_path(p).normal()) << p << ": {" << classes_of(p) << "}";
  }
  // Past the vector check's 64 bytes the same answer comes from the full scan.
  const std::string long_plain = "/" + std::string(100, 'a') + "/b.c/d";
  EXPECT_TRUE(classify_path(long_plain).normal());
  EXPECT_TRUE(classify_path(long_plain + "/%C3%A9").normal());
  EXPECT_FALSE(classify_path(long_plain + "/..").normal());
  EXPECT_FALSE(classify_path(long_plain + "//x").normal());
}

// What lets decide() skip the normaliser for a path in normal form: the
// normaliser would give the path back unchanged. Every path of up to 6
// bytes over an alphabet of the bytes that matter.
TEST(PathForm, NormalFormIsWhatTheNormaliserLeavesAlone) {
  static constexpr std::string_view kBytes = "/.%2eEfF5cC\\;a0";
  std::array<char, 64> out{};
  std::string path;
  size_t normal = 0;
  std::function<void(size_t)> grow = [&](size_t left) {
    if (!path.empty() && policy::classify_path(path).normal()) {
      ++normal;
      EXPECT_EQ(policy::normalize_path(path, out), path);
    }
    if (left == 0) return;
    for (const char c : kBytes) {
      path.push_back(c);
      grow(left - 1);
      path.pop_back();
    }
  };
  path = "/";
  grow(5);
  EXPECT_GT(normal, 1000u) << "the alphabet reaches normal paths too";
}

TEST(PathForm, PlainlyNormalNeverPassesAnAmbiguousPath) {
  // The fast check may say "look closer" for a normal path, never "normal"
  // for an ambiguous one.
  EXPECT_TRUE(policy::plainly_normal("/v1/models"));
  EXPECT_FALSE(policy::plainly_normal("/.well-known")) << "a '.' after '/' needs the closer look";
  for (const char* p : {"/a\\b", "/a%5cb", "/a//b", "/a/./b", "/a;b", "/a%41"}) {
    EXPECT_FALSE(policy::plainly_normal(p)) << p;
  }
}

TEST(PathForm, EachClass) {
  expect_class("/v1\\healthz", PathClass::kRawBackslash);
  expect_class("\\healthz", PathClass::kRawBackslash);
  expect_class("/v1%5chealthz", PathClass::kEncodedBackslash);
  expect_class("/v1%5Chealthz", PathClass::kEncodedBackslash);
  expect_class("/v1%2fhealthz", PathClass::kEncodedSlash);
  expect_class("/v1%2F..%2Fhealthz", PathClass::kEncodedSlash);
  expect_class("/v1/%2e%2e/healthz", PathClass::kEncodedDot);
  expect_class("/v1/.%2e/healthz", PathClass::kEncodedDot);
  expect_class("/v1/%2E./healthz", PathClass::kEncodedDot);
  expect_class("/v1/%2e/healthz", PathClass::kEncodedDot);
  expect_class("/v1/%2e%2e", PathClass::kEncodedDot);
  expect_class("/v1/../healthz", PathClass::kDotSegment);
  expect_class("/v1/./x", PathClass::kDotSegment);
  expect_class("/v1/..", PathClass::kDotSegment);
  expect_class("/.", PathClass::kDotSegment);
  expect_class("//healthz", PathClass::kRepeatedSlash);
  expect_class("/v1//x", PathClass::kRepeatedSlash);
  expect_class("/v1/x//", PathClass::kRepeatedSlash);
  expect_class("/v1/..;/healthz", PathClass::kSemicolon);
  expect_class("/healthz;a=b", PathClass::kSemicolon);
  expect_class("/healthz%00.json", PathClass::kEncodedControl);
  expect_class("/healthz%0d%0a", PathClass::kEncodedControl);
  expect_class("/a%7Fb", PathClass::kEncodedControl);
  expect_class("/a%zzb", PathClass::kBadPercent);
  expect_class("/a%4", PathClass::kBadPercent);
  expect_class("/a%", PathClass::kBadPercent);
  expect_class("/a%%32%65", PathClass::kBadPercent);
  expect_class("/%C0%AF", PathClass::kNonUtf8);         // an overlong '/'
  expect_class("/%E0%80%AF", PathClass::kNonUtf8);      // the same in three bytes
  expect_class("/%C0%AE%C0%AE/x", PathClass::kNonUtf8); // overlong dots
  expect_class("/a%FFb", PathClass::kNonUtf8);
  expect_class("/a%C3", PathClass::kNonUtf8);           // truncated
  expect_class("/a%C3b", PathClass::kNonUtf8);
  expect_class("/a%ED%A0%80", PathClass::kNonUtf8);     // a surrogate
  expect_class("/a%F4%90%80%80", PathClass::kNonUtf8);  // past U+10FFFF
  expect_class("/%68ealthz", PathClass::kEncodedUnreserved);
  expect_class("/v1%2Dx", PathClass::kEncodedUnreserved);
  expect_class("/a%7e", PathClass::kEncodedUnreserved);
  // A %2e inside a name is not a dot segment: a plain encoded unreserved byte.
  expect_class("/healthz%2ejson", PathClass::kEncodedUnreserved);
  EXPECT_FALSE(classify_path("/healthz%2ejson").has(PathClass::kEncodedDot));
}

TEST(PathForm, AttackSpellingsOfAnExemptionAreAllAmbiguous) {
  for (const char* p : {"/v1/b1%5c..%5c..%5chealthz", "/v1/b1%5C..%5C..%5Chealthz", "/v1/b1\\..\\..\\healthz",
                        "/v1/b1/..%5c..%5chealthz", "/v1/%2e%2e%5chealthz", "/v1/b1%2f..%2f..%2fhealthz",
                        "/v1/..;/healthz", "/v1/%2e%2e/healthz", "/v1/../healthz", "//healthz", "/%68ealthz",
                        "/v1/%C0%AE%C0%AE%C0%AFhealthz"}) {
    EXPECT_FALSE(classify_path(p).normal()) << p;
  }
}

// default.yaml with a second, stricter bucket on /v1/*, and a preflight
// path, as an operator writes them.
std::string two_rules(std::string text, const std::string& mode) {
  text = patched(std::move(text), "after_answer: keep-alive", "after_answer: keep-alive\n" + mode);
  text = patched(std::move(text), "  per-client: { rate: 120/min, burst: 60 }",
                 "  per-client: { rate: 120/min, burst: 60 }\n  v1: { rate: 10/min, burst: 5 }");
  text = patched(std::move(text), "rules:\n", "rules:\n  - name: v1\n    path: \"/v1/*\"\n    key: client_ip\n    bucket: v1\n");
  text = patched(std::move(text), "exempt:\n",
                 "cors:\n  allow_origins: [\"https://app.example\"]\n  preflight_paths: [\"/healthz\", \"/pre/*\"]\n\n"
                 "exempt:\n");
  return text;
}

std::string policy_name_of(const Result& r) { return r.header("RateLimit-Policy"); }

TEST(AmbiguousPaths, RefuseAnswers400WithTheReason) {
  Limiter l("default.yaml", [](std::string t) { return two_rules(std::move(t), ""); });
  ASSERT_EQ(l.policy().ambiguous_paths, policy::AmbiguousPaths::kRefuse) << "refuse is the default";
  for (const char* p : {"/v1/b1%5c..%5c..%5chealthz", "/v1/b1%5C..%5C..%5Chealthz", "/v1/b1\\..\\..\\healthz",
                        "/v1/b1/..%5c..%5chealthz", "/v1/%2e%2e%5chealthz", "//healthz", "/healthz;x",
                        "/%68ealthz", "/healthz%00"}) {
    const Result r = l.send(std::string("GET ") + p + " HTTP/1.1\r\nHost: a");
    EXPECT_EQ(r.verdict(), limiter::Verdict::kAnswer) << p;
    EXPECT_EQ(r.status(), 400) << p;
    EXPECT_EQ(r.decision.path_reading, limiter::PathReading::kRefused) << p;
    EXPECT_EQ(r.decision.rule, -1) << p << ": no rule charged";
    EXPECT_TRUE(r.keep_alive) << p << ": the request is whole, the connection may go on";
  }
  // Normal form is judged as before: exempt, or by its rule.
  const Result health = l.send("GET /healthz HTTP/1.1\r\nHost: a");
  EXPECT_EQ(health.verdict(), limiter::Verdict::kExempt);
  EXPECT_EQ(health.decision.path_reading, limiter::PathReading::kNormal);
  EXPECT_EQ(policy_name_of(l.send("GET /v1/x HTTP/1.1\r\nHost: a")).substr(0, 4), "\"v1\"");
  EXPECT_EQ(policy_name_of(l.send("GET /x HTTP/1.1\r\nHost: a")).substr(0, 12), "\"per-client\"");
  // A query is not the path: `..` and '\\' there are the application's.
  EXPECT_EQ(l.send("GET /healthz?next=..%5c..%5c HTTP/1.1\r\nHost: a").verdict(), limiter::Verdict::kExempt);
}

TEST(AmbiguousPaths, StrictestNeverExemptsAndPicksTheStricterRule) {
  Limiter l("default.yaml", [](std::string t) { return two_rules(std::move(t), "ambiguous_paths: strictest"); });
  ASSERT_EQ(l.policy().ambiguous_paths, policy::AmbiguousPaths::kStrictest);
  // The attack: normalised it is /healthz (exempt), raw it is under /v1/.
  for (const char* p : {"/v1/b1%5c..%5c..%5chealthz", "/v1/b1\\..\\..\\healthz", "/v1/b1/..%5c..%5chealthz",
                        "/v1/%2e%2e%5chealthz"}) {
    const Result r = l.send(std::string("GET ") + p + " HTTP/1.1\r\nHost: a");
    EXPECT_EQ(r.verdict(), limiter::Verdict::kAdmit) << p;
    EXPECT_EQ(r.decision.path_reading, limiter::PathReading::kStrictest) << p;
    EXPECT_EQ(policy_name_of(r).substr(0, 4), "\"v1\"") << p << ": the raw reading's rule admits fewer";
  }
  // Raw it is outside /v1/ (the catch-all), normalised inside: v1 wins again.
  EXPECT_EQ(policy_name_of(l.send("GET /x/..%2fv1/y HTTP/1.1\r\nHost: a")).substr(0, 4), "\"v1\"");
  EXPECT_EQ(policy_name_of(l.send("GET /%76%31/y HTTP/1.1\r\nHost: a")).substr(0, 4), "\"v1\"");
  // Both readings outside /v1/: the catch-all, counted, not exempt.
  const Result h = l.send("GET //healthz HTTP/1.1\r\nHost: a");
  EXPECT_EQ(h.verdict(), limiter::Verdict::kAdmit);
  EXPECT_EQ(policy_name_of(h).substr(0, 12), "\"per-client\"");
  // A preflight on a preflight path is exempt only spelled in normal form.
  const std::string pre = " HTTP/1.1\r\nHost: a\r\nOrigin: https://app.example\r\nAccess-Control-Request-Method: GET";
  // (From another address: the one above has spent most of v1's burst.)
  const std::string peer = "198.18.0.11";
  EXPECT_EQ(l.send("OPTIONS /pre/x" + pre, peer).verdict(), limiter::Verdict::kExempt);
  EXPECT_EQ(l.send("OPTIONS /pre/./x" + pre, peer).verdict(), limiter::Verdict::kAdmit);
  EXPECT_EQ(l.send("OPTIONS /v1/..%5chealthz" + pre, peer).verdict(), limiter::Verdict::kAdmit);
}

TEST(AmbiguousPaths, StrictestCountsTheStricterBucket) {
  // Past v1's burst of 5 the attack spelling is refused: it spends v1's
  // budget, not the catch-all's 60.
  Limiter l("default.yaml", [](std::string t) { return two_rules(std::move(t), "ambiguous_paths: strictest"); });
  EXPECT_EQ(l.count_admitted(20, "GET /v1/b1%5c..%5c..%5chealthz HTTP/1.1\r\nHost: a"), 5);
}

TEST(AmbiguousPaths, LoaderReadsTheSettingAndReportsWhere) {
  const std::string base = "sluice: 1\nname: p\n";
  EXPECT_TRUE(policy::load_policy_text(base + "ambiguous_paths: refuse\n", "p.yaml").policy);
  const auto strict = policy::load_policy_text(base + "ambiguous_paths: strictest\n", "p.yaml");
  ASSERT_TRUE(strict.policy);
  EXPECT_EQ(strict.policy->ambiguous_paths, policy::AmbiguousPaths::kStrictest);
  const auto bad = policy::load_policy_text(base + "ambiguous_paths: guess\n", "p.yaml");
  ASSERT_EQ(bad.errors.size(), 1u);
  EXPECT_EQ(bad.errors[0].to_string(), "p.yaml:3:18: ambiguous_paths must be refuse or strictest");
}

TEST(AmbiguousPaths, EveryShippedProfileStillLoads) {
  DIR* d = opendir(SLUICE_CONFIG_DIR);
  ASSERT_NE(d, nullptr);
  int loaded = 0;
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() < 5 || name.substr(name.size() - 5) != ".yaml") continue;
    const auto r = policy::load_policy_file(config_path(name));
    for (const auto& err : r.errors) ADD_FAILURE() << err.to_string();
    ASSERT_TRUE(r.policy) << name;
    EXPECT_EQ(r.policy->ambiguous_paths, policy::AmbiguousPaths::kRefuse) << name;
    ++loaded;
  }
  closedir(d);
  EXPECT_GE(loaded, 4);
}

}  // namespace
}  // namespace sluice::test

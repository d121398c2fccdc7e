// Compiled rule dispatch: for random rule sets and paths, the rules it leaves
// out are only ever rules that cannot match the path, the rest keep their
// order; a policy whose routes share a first segment is not dispatched; and
// a policy of many routes decides as it would trying every rule.
#include <gtest/gtest.h>

#include <array>
#include <random>
#include <string>
#include <vector>

#include "limiter/rule_dispatch.h"
#include "limiter_harness.h"

namespace sluice {
namespace {

using limiter::RuleDispatch;
using policy::PathPattern;

PathPattern pattern(const std::string& text) {
  std::string why;
  auto p = PathPattern::compile(text, &why);
  EXPECT_TRUE(p.has_value()) << text << ": " << why;
  return *p;
}

TEST(RuleDispatch, LeavesOutOnlyRulesThatCannotMatchAndKeepsTheOrder) {
  static const char* kPatterns[] = {"/v1/*", "/v1", "/v1*", "/v2/{id}", "/api/claims*", "/api/{x}/y", "/{any}/z",
                                    "/*", "/", "/healthz", "/v10/*", "/a/b/c", "/api", "/x*"};
  static const char* kPaths[] = {"/", "/v1", "/v1/", "/v1/chat", "/v10/a", "/v1x", "/v2/7", "/v2", "/api/claims",
                                 "/api/claims/7", "/api/q/y", "/q/z", "/healthz", "/healthz/deep", "/a/b/c", "/x",
                                 "/xy/z", "*", "/api", "/apix/claims", "//v1"};
  std::mt19937 rng(17);
  int active = 0;
  for (int round = 0; round < 3000; ++round) {
    const size_t n = 1 + rng() % 20;
    std::vector<std::vector<PathPattern>> rules(n);
    for (auto& r : rules) {
      const size_t k = rng() % 10 == 0 ? 0 : 1 + rng() % 2;  // 0: no path, any request
      for (size_t j = 0; j < k; ++j) r.push_back(pattern(kPatterns[rng() % std::size(kPatterns)]));
    }
    std::vector<const std::vector<PathPattern>*> ptrs;
    for (const auto& r : rules) ptrs.push_back(&r);
    RuleDispatch d;
    d.build(ptrs, 1);  // however few rules: only the half-the-rules test decides
    active += d.active();
    for (const char* path : kPaths) {
      const auto c = d.candidates(path);
      for (size_t i = 1; i < c.size(); ++i) ASSERT_LT(c[i - 1], c[i]) << "rule order";
      for (size_t r = 0; r < n; ++r) {
        bool can = rules[r].empty();
        std::array<std::string_view, PathPattern::kMaxParams> params;
        for (const PathPattern& p : rules[r]) can = can || p.match(path, params);
        if (can) {
          ASSERT_NE(std::find(c.begin(), c.end(), r), c.end()) << "rule " << r << " matches " << path << " but was left out";
        }
      }
      if (!d.active()) {
        ASSERT_EQ(c.size(), n) << "inactive: every rule is tried";
      }
    }
  }
  EXPECT_GT(active, 300) << "the rule sets dispatched often enough to test it";
}

TEST(RuleDispatch, RoutesUnderOneSegmentAreAllTriedInOrder) {
  std::vector<std::vector<PathPattern>> rules;
  for (int i = 0; i < 12; ++i) rules.push_back({pattern("/api/r" + std::to_string(i) + "*")});
  rules.push_back({pattern("/capabilities")});
  std::vector<const std::vector<PathPattern>*> ptrs;
  for (const auto& r : rules) ptrs.push_back(&r);
  RuleDispatch d;
  d.build(ptrs);
  EXPECT_FALSE(d.active()) << "/api/ would leave 12 of 13 rules to try";
}

TEST(RuleDispatch, FewRulesAreAllTriedInOrder) {
  std::vector<std::vector<PathPattern>> rules(RuleDispatch::kMinRules - 1, std::vector<PathPattern>{pattern("/a/*")});
  std::vector<const std::vector<PathPattern>*> ptrs;
  for (const auto& r : rules) ptrs.push_back(&r);
  RuleDispatch d;
  d.build(ptrs);
  EXPECT_FALSE(d.active());
  EXPECT_EQ(d.candidates("/b").size(), rules.size());
}

// A policy of 12 routes, each its own bucket, then a catch-all: every route's
// requests are counted by its own rule, as trying every rule would count them.
TEST(RuleDispatch, ManyRoutesAreEachCountedByTheirOwnRule) {
  std::string text =
      "sluice: 1\nname: routes\nheader_style: seed\nservice_ports: [80]\nbuckets:\n";
  for (int i = 0; i < 12; ++i) text += "  b" + std::to_string(i) + ": { rate: " + std::to_string(10 + i) + "/min, burst: " + std::to_string(10 + i) + " }\n";
  text += "  rest: { rate: 5/min, burst: 5 }\nrules:\n";
  for (int i = 0; i < 12; ++i) {
    text += "  - name: r" + std::to_string(i) + "\n    path: \"/svc" + std::to_string(i) + "/*\"\n    key: client_ip\n    bucket: b" +
            std::to_string(i) + "\n";
  }
  text += "  - name: rest\n    key: client_ip\n    bucket: rest\n";
  test::Limiter l("default.yaml");
  l.load(text, "routes.yaml", 1 << 12);
  ASSERT_TRUE(l.policy().dispatch.active());
  for (int i = 0; i < 12; ++i) {
    const test::Result r = l.send("GET /svc" + std::to_string(i) + "/x HTTP/1.1\r\nHost: api");
    EXPECT_EQ(r.header("RateLimit-Limit"), std::to_string(10 + i)) << "route " << i;
  }
  EXPECT_EQ(l.send("GET /svc1 HTTP/1.1\r\nHost: api").header("RateLimit-Limit"), "5") << "not under /svc1/";
  EXPECT_EQ(l.send("GET /svc12/x HTTP/1.1\r\nHost: api").header("RateLimit-Limit"), "5");
  EXPECT_EQ(l.send("GET / HTTP/1.1\r\nHost: api").header("RateLimit-Limit"), "5");
}

}  // namespace
}  // namespace sluice

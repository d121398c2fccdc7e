// Path patterns (route families, exemptions, preflight paths) and the path
// normalisation before them: what matches, what a parameter captures, and
// the quick rejections decide() relies on (a pattern's literal lead, a plain
// path left in place) agreeing with the full rules.
#include <gtest/gtest.h>

#include <array>
#include <string>

#include "policy/path_pattern.h"

namespace sluice::policy {
namespace {

struct Matched {
  bool ok = false;
  std::array<std::string_view, PathPattern::kMaxParams> params{};
};

Matched match(std::string_view pattern, std::string_view path) {
  const std::optional<PathPattern> p = PathPattern::compile(pattern, nullptr);
  EXPECT_TRUE(p.has_value()) << pattern;
  Matched m;
  if (!p) return m;
  m.ok = p->match(path, m.params);
  // The quick test never refuses what the full one accepts.
  if (m.ok) {
    EXPECT_TRUE(p->may_match(path)) << pattern << " " << path;
  }
  return m;
}

TEST(PathPattern, LiteralsParametersAndTails) {
  EXPECT_TRUE(match("/healthz", "/healthz").ok);
  EXPECT_FALSE(match("/healthz", "/healthz/x").ok);
  EXPECT_FALSE(match("/healthz", "/health").ok);
  EXPECT_FALSE(match("/healthz", "/healthzz").ok);
  const Matched run = match("/vrx/{run}/v1/*", "/vrx/r-17/v1/models");
  EXPECT_TRUE(run.ok);
  EXPECT_EQ(run.params[0], "r-17");
  EXPECT_FALSE(match("/vrx/{run}/v1/*", "/vrx/r-17/v1").ok) << "* needs something under it";
  EXPECT_FALSE(match("/vrx/{run}/v1/*", "/vrx//v1/x").ok) << "an empty parameter";
  EXPECT_FALSE(match("/vrx/{run}/v1/*", "/vrxa/r/v1/x").ok);
  EXPECT_FALSE(match("/vrx/{run}/v1/*", "/v1/models").ok);
  EXPECT_TRUE(match("/v1/*", "/v1/models").ok);
  EXPECT_FALSE(match("/v1/*", "/v1").ok);
  EXPECT_FALSE(match("/v1/*", "/v10/x").ok);
  EXPECT_TRUE(match("/api/users*", "/api/users").ok);
  EXPECT_TRUE(match("/api/users*", "/api/users/7").ok);
  EXPECT_FALSE(match("/api/users*", "/api/usersx").ok);
  EXPECT_TRUE(match("/*", "/anything/at/all").ok);
  const Matched two = match("/{a}/x/{b}", "/1/x/2");
  EXPECT_TRUE(two.ok);
  EXPECT_EQ(two.params[0], "1");
  EXPECT_EQ(two.params[1], "2");
}

TEST(PathPattern, PlainPathsStayInPlaceOthersAreNormalised) {
  std::array<char, 256> out{};
  const auto norm = [&](std::string_view p) { return std::string(normalize_path(p, out)); };
  const std::string_view plain = "/v1/models/gpt-4.1/.well-known";
  EXPECT_EQ(normalize_path(plain, out).data(), plain.data()) << "matched where it is";
  EXPECT_EQ(norm("/a//b"), "/a/b");
  EXPECT_EQ(norm("/a/./b"), "/a/b");
  EXPECT_EQ(norm("/a/b/.."), "/a/") << "RFC 3986 5.2.4";
  EXPECT_EQ(norm("/a/%62"), "/a/b");
  EXPECT_EQ(norm("/a\\b"), "/a/b");
  EXPECT_EQ(norm("/a/%2F/b"), "/a/b");
  EXPECT_EQ(norm("/."), "/");
  // The same past the vector check's 16-byte blocks and its 64-byte limit.
  EXPECT_EQ(norm("/aaaaaaaaaaaaaa//b"), "/aaaaaaaaaaaaaa/b");
  EXPECT_EQ(norm("/aaaaaaaaaaaaaaa/./b"), "/aaaaaaaaaaaaaaa/b");
  const std::string long_path = "/" + std::string(80, 'a') + "/../b";
  EXPECT_EQ(norm(long_path), "/b");
  const std::string long_plain = "/" + std::string(80, 'a') + "/b";
  EXPECT_EQ(normalize_path(long_plain, out).data(), long_plain.data());
}

}  // namespace
}  // namespace sluice::policy

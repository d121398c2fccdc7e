// What sluice offers beyond the seeds: X01-X05 of docs/rules.md.
#include <gtest/gtest.h>

#include <random>

#include "limiter_harness.h"

namespace sluice::test {
namespace {

using limiter::Verdict;

const std::string kGet = "GET /v1/things HTTP/1.1\r\nHost: api";

TEST(BeyondSeeds, X01_ShadowModeForTheWholePolicyComputesButNeverRefuses) {
  Limiter l("three-budgets.yaml", [](std::string t) {
    return patched(std::move(t), "header_style: seed", "mode: shadow\nheader_style: seed");
  });
  int would_refuse = 0;
  for (int i = 0; i < 100; ++i) {
    const Result r = l.send(kGet);
    ASSERT_EQ(r.verdict(), Verdict::kAdmit);
    would_refuse += r.decision.shadow_refusal;
  }
  EXPECT_EQ(would_refuse, 40);  // 60 within budget; the other 40 counted as would-be refusals
}

TEST(BeyondSeeds, X01_ShadowModePerRule) {
  Limiter l("three-budgets.yaml", [](std::string t) {
    return patched(std::move(t), "  - name: bare\n    key: client_ip\n", "  - name: bare\n    shadow: true\n    key: client_ip\n");
  });
  EXPECT_EQ(l.count_admitted(100, kGet), 100);
  EXPECT_TRUE(l.send(kGet).decision.shadow_refusal);
  const std::string cred = kGet + "\r\nAuthorization: Bearer k";
  EXPECT_EQ(l.count_admitted(400, cred), 300);  // other rules still enforce
}

TEST(BeyondSeeds, X02_TheIetfDraftsStructuredFieldsAsAnAlternativeStyle) {
  Limiter l("default.yaml");
  const Result r = l.send(kGet);
  ASSERT_EQ(r.verdict(), Verdict::kAdmit);
  EXPECT_EQ(r.header("RateLimit-Policy"), "\"per-client\";q=120;w=60");
  EXPECT_EQ(r.header("RateLimit"), "\"per-client\";r=59;t=1");
  EXPECT_FALSE(r.has_header("RateLimit-Limit"));
  // Chosen per rule too.
  Limiter seed("default.yaml", [](std::string t) {
    return patched(std::move(t), "    bucket: per-client\n", "    bucket: per-client\n    header_style: seed\n");
  });
  EXPECT_EQ(seed.send(kGet).header("RateLimit-Limit"), "120");
}

TEST(BeyondSeeds, X03_Ipv6ClientsAreKeyedByTheirPrefix) {
  Limiter l("default.yaml");
  // One host rotating through the addresses of its /64 shares one budget...
  int admitted = 0;
  for (int i = 0; i < 100; ++i) {
    char addr[64];
    std::snprintf(addr, sizeof addr, "2001:db8:1:2:%x::%x", i, i * 7 + 1);
    admitted += l.send(kGet, addr).verdict() == Verdict::kAdmit;
  }
  EXPECT_EQ(admitted, 60);
  // ...while the next /64 is someone else.
  EXPECT_EQ(l.send(kGet, "2001:db8:1:3::1").verdict(), Verdict::kAdmit);
  // The seed profiles key every address (prefix 128).
  Limiter seed("three-budgets.yaml");
  EXPECT_EQ(seed.count_admitted(60, kGet, "2001:db8:1:2::1"), 60);
  EXPECT_EQ(seed.send(kGet, "2001:db8:1:2::2").verdict(), Verdict::kAdmit);
}

TEST(BeyondSeeds, X04_ClientAddressFieldsAreBelievedOnlyFromTrustedPeers) {
  // The default policy trusts no proxy: X-Forwarded-For is ignored.
  Limiter l("default.yaml");
  for (int i = 0; i < 100; ++i) {
    (void)l.send(kGet + "\r\nX-Forwarded-For: 198.18.50." + std::to_string(i), "198.18.0.1");
  }
  EXPECT_EQ(l.send(kGet + "\r\nX-Forwarded-For: 198.18.60.1", "198.18.0.1").verdict(), Verdict::kRefuse);
  // Listing the proxy makes its report count.
  Limiter t("default.yaml", [](std::string s) { return patched(std::move(s), "trusted_proxies: []", "trusted_proxies: [198.18.0.1/32]"); });
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(t.send(kGet + "\r\nX-Forwarded-For: 198.18.50." + std::to_string(i), "198.18.0.1").verdict(), Verdict::kAdmit);
  }
  // ...and only from that proxy.
  EXPECT_EQ(t.count_admitted(100, kGet + "\r\nX-Forwarded-For: 198.18.70.1", "198.18.0.2"), 60);
}

TEST(BeyondSeeds, X05_RetryAfterIsNeverZeroAndNeverEarly) {
  std::mt19937_64 rng(5);
  for (const char* profile : {"three-budgets.yaml", "route-families.yaml", "deployment-quotas.yaml", "default.yaml"}) {
    Limiter l(profile);
    l.add_user("Bearer u", 1);
    const std::string request = std::string(profile) == "route-families.yaml"
                                    ? "GET /api/claims HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer u"
                                : std::string(profile) == "deployment-quotas.yaml"
                                    ? "GET /v1/x HTTP/1.1\r\nHost: a\r\nX-Pi-Deployment: d"
                                    : kGet;
    int refusals = 0;
    for (int i = 0; i < 3000 && refusals < 50; ++i) {
      l.now += rng() % (20 * 1'000'000ull);
      const Result r = l.send(request);
      if (r.verdict() != Verdict::kRefuse) continue;
      ++refusals;
      const int after = std::stoi(r.header("Retry-After"));
      ASSERT_GE(after, 1) << profile;
      // Waiting exactly that long is enough.
      const time::Nanos saved = l.now;
      l.now += static_cast<time::Nanos>(after) * kSecond;
      ASSERT_NE(l.send(request).verdict(), Verdict::kRefuse) << profile << " Retry-After " << after;
      l.now = saved;
    }
    EXPECT_GT(refusals, 0) << profile;
  }
}

}  // namespace
}  // namespace sluice::test

// The route-family profile (config/route-families.yaml, seed 001), rule by
// rule: RF01-RF11 of docs/rules.md.
#include <gtest/gtest.h>

#include "limiter/gcra.h"
#include "limiter_harness.h"

namespace sluice::test {
namespace {

using limiter::Verdict;

constexpr const char* kProfile = "route-families.yaml";

std::string req(const std::string& method, const std::string& path, const std::string& token = "Bearer alice-1") {
  std::string r = method + " " + path + " HTTP/1.1\r\nHost: cloud.example";
  if (!token.empty()) r += "\r\nAuthorization: " + token;
  return r;
}

Limiter with_users() {
  Limiter l(kProfile);
  l.add_user("Bearer alice-1", 1);
  l.add_user("Bearer alice-2", 1);  // a second token of the same user
  l.add_user("Bearer bob-1", 2);
  return l;
}

TEST(RouteFamilies, RF01_EachFamilyHasItsOwnBucketPerCallerAndNoGlobalLimit) {
  Limiter l = with_users();
  EXPECT_EQ(l.count_admitted(400, req("GET", "/api/claims")), 150);
  EXPECT_EQ(l.send(req("GET", "/api/claims/7")).status(), 429);
  // Using up claims refuses nothing in another family, nor another user.
  EXPECT_EQ(l.count_admitted(300, req("GET", "/api/ledgers")), 300);
  EXPECT_EQ(l.send(req("GET", "/api/claims", "Bearer bob-1")).verdict(), Verdict::kAdmit);
}

TEST(RouteFamilies, RF02_RoutesOutsideTheFamiliesAreNotLimited) {
  Limiter l = with_users();
  for (const std::string path : {"/api/organizations", "/api/claimsX", "/", "/api/users/me", "/api/event"}) {
    for (int i = 0; i < 500; ++i) {
      const Result r = l.send(req("GET", path));
      ASSERT_EQ(r.verdict(), Verdict::kForward) << path;
      ASSERT_TRUE(r.fields.empty());
    }
  }
  // Nor are methods a family does not list.
  EXPECT_EQ(l.send(req("PATCH", "/api/events")).verdict(), Verdict::kForward);
}

struct Family {
  const char* name;
  const char* method;
  const char* path;
  uint32_t rate_per_s;
  uint32_t burst;
};

// RF03: the seed's table, one representative route (and the odd ones) each.
const Family kFamilies[] = {
    {"claims", "POST", "/api/claims/replay", 10, 150},
    {"schedules", "GET", "/api/workspaces/w1/schedules/9", 20, 200},
    {"ledgers", "PUT", "/api/ledgers", 20, 300},
    {"content_items", "GET", "/api/content-items/abc", 20, 400},
    {"events_write", "POST", "/api/events", 10, 300},
    {"events_read", "GET", "/api/workspaces/w1/events", 20, 500},
    {"events_manage", "PUT", "/api/events/42/status", 5, 100},
    {"profiles", "GET", "/api/profiles/me", 5, 100},
    {"desktop_connections", "POST", "/api/integrations/connections/c1/heartbeat", 2, 200},
    {"capabilities", "GET", "/v0.8.1/capabilities", 10, 200},
    {"blowhorn_health", "GET", "/api/blowhorn/health", 1, 30},
};

TEST(RouteFamilies, RF03_EveryRouteOfTheSeedsTableMapsToItsFamily) {
  Limiter l = with_users();
  for (const Family& f : kFamilies) {
    const Result r = l.send(req(f.method, f.path));
    ASSERT_EQ(r.verdict(), Verdict::kAdmit) << f.name;
    EXPECT_EQ(l.policy().rules[static_cast<size_t>(r.decision.rule)].name.rfind(f.name, 0), 0u) << f.path;
  }
  // The method-specific families, and the routes the seed lists by hand.
  auto family_of = [&](const std::string& m, const std::string& p) {
    const Result r = l.send(req(m, p));
    return r.decision.rule < 0 ? std::string("-") : l.policy().rules[static_cast<size_t>(r.decision.rule)].name;
  };
  EXPECT_EQ(family_of("POST", "/api/events"), "events_write");
  EXPECT_EQ(family_of("GET", "/api/events"), "events_read");
  EXPECT_EQ(family_of("GET", "/api/events/7/details"), "events_read");
  EXPECT_EQ(family_of("DELETE", "/api/events"), "events_manage");
  EXPECT_EQ(family_of("DELETE", "/api/events/7"), "events_manage");
  EXPECT_EQ(family_of("PUT", "/api/events/status"), "events_manage");
  EXPECT_EQ(family_of("POST", "/api/events/7"), "-");
  EXPECT_EQ(family_of("GET", "/api/workspaces/w1/events/7"), "-");
  EXPECT_EQ(family_of("POST", "/api/integrations/connections"), "desktop_connections");
  EXPECT_EQ(family_of("DELETE", "/api/integrations/connections/desktop/i1"), "desktop_connections_delete");
  EXPECT_EQ(family_of("GET", "/capabilities"), "capabilities");
  EXPECT_EQ(family_of("GET", "/api/schedules"), "schedules");
  EXPECT_EQ(family_of("GET", "/api/workspaces/w1/profiles"), "profiles");
}

TEST(RouteFamilies, RF04_AllTokensOfOneUserShareThatUsersBuckets) {
  Limiter l = with_users();
  int admitted = 0;
  for (int i = 0; i < 200; ++i) {
    admitted += l.send(req("GET", "/api/claims", i % 2 ? "Bearer alice-1" : "Bearer alice-2")).verdict() == Verdict::kAdmit;
  }
  EXPECT_EQ(admitted, 150);
  EXPECT_EQ(l.send(req("GET", "/api/claims", "Bearer bob-1")).verdict(), Verdict::kAdmit);
}

TEST(RouteFamilies, RF05_NoUserOrTheSharedAnonymousTokenIsCountedByClientAddress) {
  Limiter l = with_users();
  const std::string anonymous = "Bearer meshery-results-anonymous";
  EXPECT_EQ(l.count_admitted(200, req("GET", "/api/claims", anonymous), "198.18.5.1"), 150);
  EXPECT_EQ(l.count_admitted(200, req("GET", "/api/claims", anonymous), "198.18.5.2"), 150);
  // The anonymous token is recognised however it is spelled.
  EXPECT_EQ(l.send(req("GET", "/api/claims", "bearer   meshery-results-anonymous"), "198.18.5.1").status(), 429);
}

TEST(RouteFamilies, RF06_ClientAddressFromCfConnectingIpThenXRealIpIpv4First) {
  Limiter l = with_users();
  const std::string caps = "GET /capabilities HTTP/1.1\r\nHost: cloud.example";
  auto exhaust_and_probe = [&](const std::string& fields, const std::string& probe_fields) {
    Limiter fresh = with_users();
    EXPECT_EQ(fresh.count_admitted(200, caps + fields), 200);
    return fresh.send(caps + probe_fields).verdict();
  };
  // CF-Connecting-IP names the client.
  EXPECT_EQ(exhaust_and_probe("\r\nCF-Connecting-IP: 203.0.113.5", "\r\nX-Real-IP: 203.0.113.5"), Verdict::kRefuse);
  // The first valid IPv4 across both headers wins over an earlier IPv6.
  EXPECT_EQ(exhaust_and_probe("\r\nCF-Connecting-IP: 2001:db8::5\r\nX-Real-IP: 198.51.100.7",
                              "\r\nX-Real-IP: 198.51.100.7"),
            Verdict::kRefuse);
  // No valid IPv4: the first valid IPv6.
  EXPECT_EQ(exhaust_and_probe("\r\nCF-Connecting-IP: 2001:db8::5\r\nX-Real-IP: not-an-address",
                              "\r\nX-Real-IP: 2001:db8::5"),
            Verdict::kRefuse);
  // Neither valid: the connection's address.
  EXPECT_EQ(exhaust_and_probe("\r\nCF-Connecting-IP: 999.1.1.1\r\nX-Real-IP: 01.2.3.4", ""), Verdict::kRefuse);
  // Different clients behind one connection address are told apart.
  EXPECT_EQ(exhaust_and_probe("\r\nCF-Connecting-IP: 203.0.113.5", "\r\nCF-Connecting-IP: 203.0.113.6"), Verdict::kAdmit);
}

TEST(RouteFamilies, RF07_BurstBackToBackThenRefillAtTheRateForEveryFamily) {
  for (const Family& f : kFamilies) {
    Limiter l = with_users();
    const std::string r = req(f.method, f.path);
    EXPECT_EQ(l.count_admitted(static_cast<int>(f.burst) + 50, r), static_cast<int>(f.burst)) << f.name;
    // Refill from empty takes burst / rate seconds.
    const time::Nanos refill = f.burst * kSecond / f.rate_per_s;
    l.now += refill - 1;
    EXPECT_EQ(l.count_admitted(static_cast<int>(f.burst) + 50, r), static_cast<int>(f.burst) - 1) << f.name;
    // At most burst + 60 * rate in any minute, sending 20 times a second.
    Limiter m = with_users();
    int admitted = 0;
    for (int tick = 0; tick < 60 * 20; ++tick) {
      for (int i = 0; i < 20; ++i) admitted += m.send(r).verdict() == Verdict::kAdmit;
      m.now += kSecond / 20;
    }
    EXPECT_LE(admitted, static_cast<int>(f.burst + 60 * f.rate_per_s)) << f.name;
    EXPECT_GE(admitted, static_cast<int>(f.burst + 59 * f.rate_per_s)) << f.name;
  }
}

TEST(RouteFamilies, RF08_ABucketIdleForTenMinutesIsDroppedChangingNoAnswer) {
  Limiter l = with_users();
  EXPECT_EQ(l.count_admitted(150, req("GET", "/api/claims")), 150);
  auto reclaim = [&] {
    size_t dropped = 0;
    for (unsigned r = 0; r < l.buckets().regions(); ++r) {
      l.buckets().close_region(r);
      dropped += l.buckets().retire_idle(r, [&](uint16_t kind, const uint64_t* w) {
        return limiter::bucket_idle(l.policy(), kind, w, l.now, 0);
      });
      l.buckets().open_region(r);
    }
    return dropped;
  };
  // The bucket is full again 15 s after the burst; it is dropped once it has
  // been idle (full) for 10 minutes more.
  l.now += 15 * kSecond;
  EXPECT_EQ(reclaim(), 0u);
  l.now += 10 * kMinute - 1;
  EXPECT_EQ(reclaim(), 0u);
  l.now += 1;
  EXPECT_EQ(reclaim(), 1u);
  EXPECT_EQ(l.buckets().count_live(), 0u);
  EXPECT_EQ(l.count_admitted(200, req("GET", "/api/claims")), 150);  // the same answer as before
}

TEST(RouteFamilies, RF09_TheRefusalIsTheMeshKitErrorWithRetryAfter) {
  Limiter l = with_users();
  EXPECT_EQ(l.count_admitted(30, req("GET", "/api/blowhorn/health")), 30);
  const Result r = l.send(req("GET", "/api/blowhorn/health"));
  ASSERT_EQ(r.status(), 429);
  EXPECT_EQ(r.header("Retry-After"), "1");
  const std::string body = r.body();
  for (const char* part : {"\"code\":\"meshery_cloud-3629\"", "\"severity\":\"alert\"", "\"probableCause\"",
                           "\"suggestedRemediation\""}) {
    EXPECT_NE(body.find(part), std::string::npos) << part;
  }
  EXPECT_EQ(body.find("blowhorn"), std::string::npos);  // the body does not name the family
  EXPECT_FALSE(r.has_header("RateLimit-Limit"));
}

TEST(RouteFamilies, RF10_AMissingOrUnknownCredentialGets401AndSpendsNoToken) {
  Limiter l = with_users();
  for (int i = 0; i < 300; ++i) {
    ASSERT_EQ(l.send(req("GET", "/api/claims", "")).status(), 401);
    ASSERT_EQ(l.send(req("GET", "/api/claims", "Bearer stolen-or-made-up")).status(), 401);
  }
  EXPECT_EQ(l.count_admitted(200, req("GET", "/api/claims")), 150);  // alice's bucket is whole
  // Configurable: forwarded to the origin, uncounted.
  Limiter f(kProfile, [](std::string t) { return patched(std::move(t), "unknown: answer-401", "unknown: forward"); });
  const Result r = f.send(req("GET", "/api/claims", ""));
  EXPECT_EQ(r.verdict(), Verdict::kForward);
}

TEST(RouteFamilies, RF11_TheCapabilitiesFamilyIsCountedByAddress) {
  Limiter l = with_users();
  int admitted = 0;
  for (int i = 0; i < 150; ++i) {
    admitted += l.send(req("GET", "/capabilities", "Bearer alice-1"), "198.18.6.6").verdict() == Verdict::kAdmit;
    admitted += l.send(req("GET", "/capabilities", "Bearer bob-1"), "198.18.6.6").verdict() == Verdict::kAdmit;
  }
  EXPECT_EQ(admitted, 200);  // one bucket for the address, whoever asks
  EXPECT_EQ(l.send(req("GET", "/capabilities", ""), "198.18.6.7").verdict(), Verdict::kAdmit);  // no user needed
}

}  // namespace
}  // namespace sluice::test

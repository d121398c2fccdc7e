// Every shipped profile's refusals, written through the answer framed at
// load and through the general path (the same decision with the framed
// answer taken away), byte for byte: the plain refusal, a live run's own
// budget (which the framed answer does not fit), TB07's overflow bucket,
// a CORS grant (TB09), and both connection endings.
#include <gtest/gtest.h>

#include <string>

#include "limiter_harness.h"

namespace sluice::test {
namespace {

using limiter::Verdict;

// The refusal `l` gives `head` once its budget is spent (at most `budget`
// tries), written both ways; counts the ones the framed answer served.
void expect_same_bytes(Limiter& l, const std::string& head, const std::string& peer, int budget, int& framed) {
  Result r;
  for (int i = 0; i <= budget && r.verdict() != Verdict::kRefuse; ++i) r = l.send(head, peer);
  ASSERT_EQ(r.verdict(), Verdict::kRefuse) << head;
  for (bool keep_alive : {false, true}) {
    ASSERT_FALSE(r.written_general[keep_alive].empty());
    EXPECT_EQ(r.written[keep_alive], r.written_general[keep_alive])
        << head << (keep_alive ? " (kept open)" : " (closing)");
  }
  framed += r.decision.answer.framed != nullptr;
}

TEST(FramedRefusal, ThreeBudgetsWritesTheSameBytesEitherWay) {
  Limiter l("three-budgets.yaml", [](std::string text) {
    return patched(std::move(text), "  allow_origins: []", "  allow_origins: [\"https://app.example\"]");
  });
  int framed = 0;
  expect_same_bytes(l, "GET /v1/things HTTP/1.1\r\nHost: api", "198.18.0.1", 61, framed);
  expect_same_bytes(l, "GET /v1/things HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer key-one", "198.18.0.2", 301,
                    framed);
  expect_same_bytes(l, "GET /v1/things HTTP/1.1\r\nHost: api\r\nOrigin: https://app.example", "198.18.0.3", 61,
                    framed);
  l.start_run("run-own", 30);  // a budget of its own: 30 a minute
  expect_same_bytes(l, "POST /vrx/run-own/v1/tap HTTP/1.1\r\nHost: api", "198.18.0.4", 31, framed);
  // TB07: past 8 credentials an address's ninth is counted in the bare bucket.
  for (int i = 1; i <= 8; ++i) {
    ASSERT_EQ(l.send("GET /v1/x HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer slot-" + std::to_string(i),
                     "198.18.0.5").verdict(), Verdict::kAdmit);
  }
  expect_same_bytes(l, "GET /v1/x HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer slot-9", "198.18.0.5", 61, framed);
  EXPECT_GE(framed, 2) << "the plain refusals took the framed answer";
}

TEST(FramedRefusal, RouteFamiliesAndDefaultWriteTheSameBytesEitherWay) {
  int framed = 0;
  Limiter d("default.yaml");
  expect_same_bytes(d, "GET /anything HTTP/1.1\r\nHost: api", "198.18.0.1", 100000, framed);
  Limiter rf("route-families.yaml");
  rf.add_user("Bearer alice-1", 1);
  expect_same_bytes(rf, "GET /api/claims/7 HTTP/1.1\r\nHost: cloud\r\nAuthorization: Bearer alice-1", "198.18.0.2",
                    100000, framed);
  EXPECT_EQ(framed, 2);
}

}  // namespace
}  // namespace sluice::test

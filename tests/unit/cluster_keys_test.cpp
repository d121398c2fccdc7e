// Cluster budgets on the limiter's side: a `scope: cluster` bucket's key is the
// same on every box that shares the cluster's secret, whatever kind each box
// gave the bucket, and whatever its own secrets; every admission on such a
// bucket is recorded in the worker's spend log (its emission interval),
// refusals and box buckets never are; the log adds up per key, turns over,
// and counts what it could not hold.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <thread>
#include <vector>

#include "limiter/spend_log.h"
#include "limiter_harness.h"

namespace sluice::test {
namespace {

// The same two buckets in either order: each box numbers them its own way.
std::string policy_text(bool shared_first) {
  const std::string shared = "  shared: { rate: 6/min, scope: cluster }\n";
  const std::string own = "  own: { rate: 6/min }\n";
  return "sluice: 1\n"
         "service_ports: [80]\n"
         "buckets:\n" +
         (shared_first ? shared + own : own + shared) +
         "rules:\n"
         "  - { name: api, path: /api/*, key: client_ip, bucket: shared }\n"
         "  - { name: tok, path: /tok/*, key: credential, bucket: shared }\n"
         "  - { name: web, key: client_ip, bucket: own }\n"
         "cluster:\n"
         "  redis: [\"unix:/run/sluice-test/none.sock\"]\n"
         "  boxes: 2\n"
         "  secret_file: /nonexistent\n";
}

const limiter::KeyHasher& cluster_secret() {
  static const std::array<uint8_t, 40> material{1, 2, 3, 4, 5, 6, 7, 8, 9};
  static const limiter::KeyHasher h = limiter::KeyHasher::from_material(material);
  return h;
}

// A box: the policy in its own bucket order, the cluster secret, a log.
struct Box {
  explicit Box(bool shared_first)
      : limiter("default.yaml", [shared_first](std::string) { return policy_text(shared_first); }) {
    limiter.state().cluster_hasher = &cluster_secret();
    limiter.scratch().spends = &log;
  }
  std::vector<limiter::KeySpend> drained() {
    std::vector<limiter::KeySpend> out;
    log.drain(log.flip(), out);
    return out;
  }
  limiter::SpendLog log{64};
  Limiter limiter;
};

uint64_t without_kind(uint64_t k1) { return k1 & ~uint64_t{0xffff}; }

TEST(ClusterKeys, TwoBoxesNumberingBucketsApartMeetOnOneKeyAndRecordEachAdmission) {
  Box a(true), b(false);
  ASSERT_NE(a.limiter.policy().bucket_named("shared")->index, b.limiter.policy().bucket_named("shared")->index);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(a.limiter.send("GET /api/x HTTP/1.1\r\nHost: h").verdict(), limiter::Verdict::kAdmit);
  ASSERT_EQ(b.limiter.send("GET /api/y HTTP/1.1\r\nHost: h").verdict(), limiter::Verdict::kAdmit);
  const std::vector<limiter::KeySpend> sa = a.drained(), sb = b.drained();
  ASSERT_EQ(sa.size(), 1u);
  ASSERT_EQ(sb.size(), 1u);
  EXPECT_EQ(sa[0].key.k0, sb[0].key.k0);
  EXPECT_EQ(without_kind(sa[0].key.k1), without_kind(sb[0].key.k1));
  EXPECT_EQ(sa[0].key.bucket(), a.limiter.policy().bucket_named("shared")->index);
  EXPECT_EQ(sb[0].key.bucket(), b.limiter.policy().bucket_named("shared")->index);
  // Three admissions of one every 10 s.
  EXPECT_EQ(sa[0].spent, 3 * 10 * kSecond);
  EXPECT_EQ(sb[0].spent, 10 * kSecond);
  // Another client is another key.
  ASSERT_EQ(a.limiter.send("GET /api/x HTTP/1.1\r\nHost: h", "198.18.0.11").verdict(), limiter::Verdict::kAdmit);
  const std::vector<limiter::KeySpend> other = a.drained();
  ASSERT_EQ(other.size(), 1u);
  EXPECT_NE(other[0].key.k0, sa[0].key.k0);
}

TEST(ClusterKeys, ACredentialMeetsAcrossBoxesThoughItsDigestIsKeyedPerBox) {
  Box a(true), b(false);
  ASSERT_EQ(a.limiter.send("GET /tok/1 HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer tk-1").verdict(),
            limiter::Verdict::kAdmit);
  ASSERT_EQ(b.limiter.send("GET /tok/1 HTTP/1.1\r\nHost: h\r\nAuthorization: bearer  tk-1").verdict(),
            limiter::Verdict::kAdmit);
  const std::vector<limiter::KeySpend> sa = a.drained(), sb = b.drained();
  ASSERT_EQ(sa.size(), 1u);
  ASSERT_EQ(sb.size(), 1u);
  EXPECT_EQ(sa[0].key.k0, sb[0].key.k0);
  EXPECT_EQ(without_kind(sa[0].key.k1), without_kind(sb[0].key.k1));
}

TEST(ClusterKeys, RefusalsAndBoxBucketsAreNotRecorded) {
  Box a(true);
  // 6 back to back from full, then refused: only the 6 are spent.
  for (int i = 0; i < 8; ++i) (void)a.limiter.send("GET /api/x HTTP/1.1\r\nHost: h");
  std::vector<limiter::KeySpend> s = a.drained();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].spent, 6 * 10 * kSecond);
  for (int i = 0; i < 3; ++i) (void)a.limiter.send("GET /web HTTP/1.1\r\nHost: h");
  EXPECT_TRUE(a.drained().empty());
}

TEST(ClusterKeys, WithoutTheClusterSecretABucketIsKeyedAsTheBoxsOwn) {
  // sluiced always gives it; a harness without one still decides, per box.
  Limiter l("default.yaml", [](std::string) { return policy_text(true); });
  limiter::SpendLog log(64);
  l.scratch().spends = &log;
  EXPECT_EQ(l.count_admitted(8, "GET /api/x HTTP/1.1\r\nHost: h"), 6);
}

// DQ02-DQ05 across boxes: a shared window records each request it counts
// (refusals past the quota count nothing more), in its minute, and the
// tokens a finished request reports.
TEST(ClusterKeys, ASharedWindowRecordsItsCountsAndTokensInTheirMinute) {
  Limiter l("default.yaml", [](std::string) {
    return std::string("sluice: 1\nservice_ports: [80]\nbuckets:\n"
                       "  rpm: { window: minute, requests: 3, tokens: 1000, scope: cluster }\n"
                       "rules:\n  - { name: dq, key: { header: X-Deployment }, bucket: rpm }\n"
                       "cluster:\n  redis: [\"unix:/run/none.sock\"]\n  boxes: 2\n  secret_file: /nonexistent\n");
  });
  limiter::SpendLog log(64);
  l.state().cluster_hasher = &cluster_secret();
  l.scratch().spends = &log;
  limiter::BucketKey usage{};
  for (int i = 0; i < 5; ++i) {
    const Result r = l.send("GET /v1/x HTTP/1.1\r\nHost: h\r\nX-Deployment: d1");
    if (r.decision.has_usage_key) usage = r.decision.usage_key;
    EXPECT_TRUE(r.decision.usage_shared);
  }
  limiter::report_usage(l.state(), usage, limiter::Calendar{}, 250, l.now, &log);
  std::vector<limiter::KeySpend> out;
  log.drain(log.flip(), out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].spent, 3u);  // 3 counted; the 2 refused past the quota add nothing
  EXPECT_EQ(out[0].tokens, 250u);
  EXPECT_EQ(out[0].minute, static_cast<uint32_t>(limiter::Calendar{}.window_of(l.now)));
  // The next minute starts the key's entry again.
  l.now += kMinute;
  (void)l.send("GET /v1/x HTTP/1.1\r\nHost: h\r\nX-Deployment: d1");
  limiter::report_usage(l.state(), usage, limiter::Calendar{}, 10, l.now - kMinute, &log);  // late: last minute's, dropped
  out.clear();
  log.drain(log.flip(), out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].spent, 1u);
  EXPECT_EQ(out[0].tokens, 0u);
  EXPECT_EQ(out[0].minute, static_cast<uint32_t>(limiter::Calendar{}.window_of(l.now)));
}

TEST(SpendLog, AddsUpPerKeyTurnsOverAndCountsWhatItCouldNotHold) {
  limiter::SpendLog log(16);  // 12 keys per half
  const auto key = [](uint64_t i) { return limiter::BucketKey{(uint64_t{1} << 63) | i, (i * 0x9e3779b97f4a7c15ull) << 16}; };
  for (uint64_t i = 0; i < 14; ++i) log.record(key(i), 100);
  log.record(key(3), 5);
  EXPECT_EQ(log.lost_records(), 2u);  // keys 12 and 13
  EXPECT_EQ(log.lost(), 200u);
  const unsigned half = log.flip();
  log.record(key(3), 7);  // the other half, while the first is read
  std::vector<limiter::KeySpend> out;
  log.drain(half, out);
  ASSERT_EQ(out.size(), 12u);
  for (const limiter::KeySpend& s : out) EXPECT_EQ(s.spent, s.key == key(3) ? 105u : 100u);
  out.clear();
  log.drain(half, out);
  EXPECT_TRUE(out.empty());  // drained halves are cleared
  log.drain(log.flip(), out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].spent, 7u);
  // Sums saturate rather than wrap.
  log.record(key(1), UINT64_MAX - 1);
  log.record(key(1), 5);
  out.clear();
  log.drain(log.flip(), out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].spent, UINT64_MAX);
  EXPECT_THROW(limiter::SpendLog(100), std::invalid_argument);
}

// The worker records while the control thread turns the log over, the way
// sluiced does: flip, then a grace period (here the token handshake of
// rte_rcu_qsbr: the control thread raises a token, the worker reports the
// token it saw once per pass), then drain. Every admission is drained once:
// none lost, none counted twice (and ThreadSanitizer, which runs this suite,
// sees no race).
TEST(SpendLog, NothingIsLostOrCountedTwiceWhileTheWorkerWrites) {
  limiter::SpendLog log(1024);
  std::atomic<uint64_t> token{0}, reported{0};
  std::atomic<bool> done{false};
  constexpr uint64_t kPasses = 200'000;
  std::thread worker([&] {
    for (uint64_t i = 0; i < kPasses; ++i) {
      log.record(limiter::BucketKey{(uint64_t{1} << 63) | (i % 37), (i % 37) << 16}, 1);
      reported.store(token.load(std::memory_order_acquire), std::memory_order_release);  // quiescent
    }
    done.store(true, std::memory_order_release);
  });
  uint64_t drained = 0;
  std::vector<limiter::KeySpend> out;
  const auto turn_over = [&] {
    const unsigned half = log.flip();
    const uint64_t t = token.fetch_add(1, std::memory_order_acq_rel) + 1;
    while (reported.load(std::memory_order_acquire) < t && !done.load(std::memory_order_acquire)) {
      std::this_thread::yield();
    }
    out.clear();
    log.drain(half, out);
    for (const limiter::KeySpend& s : out) drained += s.spent;
  };
  while (!done.load(std::memory_order_acquire)) turn_over();
  worker.join();
  turn_over();
  turn_over();
  EXPECT_EQ(drained, kPasses);
  EXPECT_EQ(log.lost_records(), 0u);
}

}  // namespace
}  // namespace sluice::test

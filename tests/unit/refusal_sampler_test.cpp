// The refusal sampler (dataplane/refusal_sampler.h): offers past
// the rate are not kept, a full ring drops and counts, drained records say
// what was decided; and through the flow engine, refused and unparsable
// requests reach it while the worker's side allocates nothing (a global
// operator new counts, as in engine_hot_path_test.cpp: this is a test
// program of its own for that reason).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "dataplane/refusal_sampler.h"
#include "flow_harness.h"

#include "counting_allocator.h"

namespace sluice::test {
namespace {

using dataplane::RefusalRecord;
using dataplane::RefusalSampler;
using limiter::KeyLabel;

constexpr time::Nanos kSecond = time::kNanosPerSecond;
constexpr time::Nanos kStart = 1'768'464'000ull * kSecond;

limiter::Decision refusal(int16_t rule, uint8_t slot, uint16_t status = 429) {
  limiter::Decision d;
  d.verdict = limiter::Verdict::kRefuse;
  d.status = status;
  d.rule = rule;
  d.rule_counter = slot;
  d.label.kind = KeyLabel::Kind::kText;
  d.label.len = 5;
  std::memcpy(d.label.bytes.data(), "alice", 5);
  d.label.key_hash = 0x1234;
  return d;
}

const net::IpAddress kClient = *net::parse_ip("198.18.0.7");

// Writes the engine's segments into one fixed buffer.
class FixedSink final : public dataplane::PacketSink {
 public:
  std::span<uint8_t> allocate(dataplane::Side, size_t len) noexcept override {
    return len <= sizeof buf_ ? std::span<uint8_t>(buf_, len) : std::span<uint8_t>();
  }
  void send(dataplane::Side, size_t) noexcept override {}

 private:
  uint8_t buf_[65536];
};

std::vector<RefusalRecord> drain_all(RefusalSampler& s) {
  std::vector<RefusalRecord> out(s.capacity() + 1);
  out.resize(s.drain(out));
  return out;
}

TEST(RefusalSampler, OffKeepsNothingAndHoldsNoRing) {
  RefusalSampler off;
  for (time::Nanos t = kStart; t < kStart + 10 * kSecond; t += kSecond / 10) off.offer(t, refusal(0, 0), kClient);
  EXPECT_EQ(off.capacity(), 0u);
  RefusalRecord r[4];
  EXPECT_EQ(off.drain(r), 0u);
  EXPECT_EQ(off.dropped(), 0u);
  RefusalSampler zero(RefusalSampler::capacity_for(0, 4), RefusalSampler::interval_for(0, 4));
  zero.offer(kStart, refusal(0, 0), kClient);
  EXPECT_EQ(zero.capacity(), 0u);
  EXPECT_EQ(zero.drain(r), 0u);
}

TEST(RefusalSampler, EachWorkerKeepsItsShareOfTheRate) {
  EXPECT_EQ(RefusalSampler::interval_for(10, 1), kSecond / 10);
  EXPECT_EQ(RefusalSampler::interval_for(10, 4), 4 * kSecond / 10);  // 2.5 a second each, 10 in all
  EXPECT_EQ(RefusalSampler::interval_for(1, 1), kSecond);
  EXPECT_EQ(RefusalSampler::capacity_for(5, 2), 64u);          // at least 64
  EXPECT_EQ(RefusalSampler::capacity_for(1000, 1), 1024u);     // a second of them, a power of two
  EXPECT_EQ(RefusalSampler::capacity_for(10000, 1), 4096u);    // at most 4096
}

TEST(RefusalSampler, OffersWithinTheIntervalAreNotKept) {
  RefusalSampler s(64, kSecond);  // one a second
  time::Nanos t = kStart;
  for (int i = 0; i < 30; ++i, t += kSecond / 10) s.offer(t, refusal(0, 3), kClient);  // 3 s of 10 a second
  const std::vector<RefusalRecord> got = drain_all(s);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].at, kStart);
  EXPECT_EQ(got[1].at, kStart + kSecond);
  EXPECT_EQ(got[2].at, kStart + 2 * kSecond);
  EXPECT_EQ(s.dropped(), 0u);
}

TEST(RefusalSampler, AFullRingDropsAndCounts) {
  RefusalSampler s(4, 0);  // every offer kept, four at a time
  for (int i = 0; i < 6; ++i) s.offer(kStart + static_cast<time::Nanos>(i), refusal(0, 0), kClient);
  EXPECT_EQ(s.dropped(), 2u);
  std::vector<RefusalRecord> got = drain_all(s);
  ASSERT_EQ(got.size(), 4u);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i].at, kStart + i) << i;  // the oldest, not the newest
  // Drained, it takes records again.
  s.offer(kStart + 10, refusal(0, 0), kClient);
  got = drain_all(s);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].at, kStart + 10);
  EXPECT_EQ(s.dropped(), 2u);
}

TEST(RefusalSampler, DrainsInOrderAcrossTheRingsEnd) {
  RefusalSampler s(4, 0);
  time::Nanos t = kStart;
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < 3; ++i) s.offer(t++, refusal(0, 0), kClient);
    RefusalRecord two[2];
    ASSERT_EQ(s.drain(two), 2u);  // a partial drain
    EXPECT_EQ(two[1].at, two[0].at + 1);
    const std::vector<RefusalRecord> rest = drain_all(s);
    ASSERT_EQ(rest.size(), 1u);
    EXPECT_EQ(rest[0].at, two[1].at + 1);
  }
  EXPECT_EQ(s.dropped(), 0u);
}

TEST(RefusalSampler, RecordsSayWhatWasDecided) {
  RefusalSampler s(8, 0);
  s.offer(kStart, refusal(2, 5, 429), kClient);
  limiter::Decision unparsable;  // no rule, no bucket: the client's address stands for the key
  unparsable.verdict = limiter::Verdict::kAnswer;
  unparsable.status = 400;
  s.offer(kStart + 1, unparsable, kClient);
  const std::vector<RefusalRecord> got = drain_all(s);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].status, 429);
  EXPECT_TRUE(got[0].has_rule);
  EXPECT_EQ(got[0].rule_slot, 5);
  EXPECT_EQ(got[0].label.kind, KeyLabel::Kind::kText);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(got[0].label.bytes.data()), got[0].label.len), "alice");
  EXPECT_EQ(got[0].label.key_hash, 0x1234u);
  EXPECT_EQ(got[1].status, 400);
  EXPECT_FALSE(got[1].has_rule);
  EXPECT_EQ(got[1].label.kind, KeyLabel::Kind::kClientIp);
  ASSERT_EQ(got[1].label.len, 16);
  EXPECT_EQ(std::memcmp(got[1].label.bytes.data(), kClient.bytes.data(), 16), 0);
}

// A consumer thread drains while the producer offers: every record comes
// out once, in order, or is counted as dropped.
TEST(RefusalSampler, ProducerAndConsumerOnTwoThreads) {
  RefusalSampler s(16, 0);
  constexpr uint64_t kOffers = 200000;
  std::atomic<bool> done{false};
  std::vector<time::Nanos> seen;
  std::thread consumer([&] {
    RefusalRecord batch[8];
    for (;;) {
      const bool last = done.load(std::memory_order_acquire);
      const size_t n = s.drain(batch);
      for (size_t i = 0; i < n; ++i) seen.push_back(batch[i].at);
      if (n == 0 && last) break;
    }
  });
  for (uint64_t i = 0; i < kOffers; ++i) s.offer(kStart + i, refusal(0, 0), kClient);
  done.store(true, std::memory_order_release);
  consumer.join();
  EXPECT_EQ(seen.size() + s.dropped(), kOffers);
  for (size_t i = 1; i < seen.size(); ++i) ASSERT_LT(seen[i - 1], seen[i]) << i;
}

// Through the flow engine: what the request path offers, and that the
// worker's side allocates nothing while it refuses with sampling on.
TEST(RefusalSampler, TheRequestPathOffersRefusalsWithoutAllocating) {
  RefusalSampler sampler(64, 0);
  dataplane::EngineConfig config = EngineWorld::small_config();
  config.refusals = &sampler;
  EngineWorld w(kSmallPolicy, config);  // per-ip: a burst of 2, then 429
  FixedSink sink;
  w.out = &sink;
  w.before_engine = [] { g_counting = true; };
  w.after_engine = [] { g_counting = false; };
  {  // the counter is live
    g_counting = true;
    int* volatile p = new int(1);  // volatile: the allocation cannot be elided
    delete p;
    g_counting = false;
    ASSERT_EQ(g_allocations.exchange(0), 1u);
  }
  for (uint16_t port = 44000; port < 44004; ++port) {
    Connection c(w, false, port);
    c.handshake();
    c.data("GET /v1/models HTTP/1.1\r\nHost: api.example\r\n\r\n");
  }
  EXPECT_EQ(g_allocations.load(), 0u);
  EXPECT_EQ(w.counters.refused.get(), 2u);
  std::vector<RefusalRecord> got = drain_all(sampler);
  ASSERT_EQ(got.size(), 2u);
  for (const RefusalRecord& r : got) {
    EXPECT_EQ(r.status, 429);
    EXPECT_TRUE(r.has_rule);
    EXPECT_EQ(r.rule_slot, w.snapshot->policy.rules[0].counter_slot);
    EXPECT_EQ(r.label.kind, KeyLabel::Kind::kClientIp);
    EXPECT_EQ(r.at, w.now);
  }
  // A request that does not parse is answered 400, keyed by its client.
  Connection bad(w, false, 44010);
  bad.set_client_address("198.18.0.99");
  bad.handshake();
  bad.data("GET /v1/models HTTP/1.1\r\nHost api.example\r\n\r\n");
  EXPECT_EQ(g_allocations.load(), 0u);
  got = drain_all(sampler);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, 400);
  EXPECT_FALSE(got[0].has_rule);
  EXPECT_EQ(got[0].label.kind, KeyLabel::Kind::kClientIp);
  EXPECT_EQ(std::memcmp(got[0].label.bytes.data(), net::parse_ip("198.18.0.99")->bytes.data(), 16), 0);
}

}  // namespace
}  // namespace sluice::test

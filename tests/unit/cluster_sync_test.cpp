// Two boxes' bucket tables meeting on one budget through a real redis-server
// (control/cluster/cluster_sync.h): what box A admitted on a key reaches box B's
// table with B's next sync, so B admits only what is left of the shared
// budget, and the other way round; a publish never moves a TAT back, nor
// wraps one round from a value gone wrong; spends whose batch failed come
// back to be counted again; keys are hash-tagged.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <string>
#include <vector>

#include "control/cluster/cluster_sync.h"
#include "limiter/charge.h"
#include "redis_server.h"

namespace sluice::control {
namespace {

using Clock = RedisLink::Clock;

// 10 a minute, all 10 at once from full: one request every 6 s.
limiter::GcraLimit ten_a_minute() {
  limiter::GcraLimit l;
  EXPECT_TRUE(limiter::GcraLimit::make(10, 60 * time::kNanosPerSecond, 10, l));
  return l;
}

time::Nanos wall_now() {
  return static_cast<time::Nanos>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
}

// A box: its own bucket table and Redis link, the hasher secret shared.
struct Box {
  explicit Box(const RedisEndpoint& redis_endpoint)
      : table(limiter::BucketTable::Options{.capacity = 4096, .bucket_kinds = 1}),
        redis({redis_endpoint}, {}),
        gcra(redis),
        window(redis),
        sync(table, gcra, window, "sluice:test") {
    sync.set_buckets({"ten"});
  }

  // Admits requests on `key` until the first refusal; returns how many.
  unsigned admit_all(const limiter::BucketKey& key, time::Nanos now) {
    unsigned n = 0;
    while (n < 100 && charge_gcra(table, key, now, ten_a_minute()).decision.admit) ++n;
    return n;
  }

  limiter::BucketTable table;
  RedisRouter redis;
  ClusterGcra gcra;
  ClusterWindow window;
  ClusterSync sync;
};

class ClusterSyncTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server_.start()) << "could not start redis-server (scripts/install-deps.sh test)"; }

  // `admitted` requests' worth of spending on `key`.
  static KeySpend spend(const limiter::BucketKey& key, uint64_t admitted) {
    return {key, admitted * ten_a_minute().interval};
  }

  limiter::BucketKey key_of(const char* client) {
    const std::string_view m(client);
    return hasher_.key(0, {reinterpret_cast<const uint8_t*>(m.data()), m.size()});
  }

  RedisServer server_;
  std::array<uint8_t, limiter::KeyHasher::kSecretSize> secret_{7, 1, 4};
  limiter::KeyHasher hasher_{secret_};
};

TEST_F(ClusterSyncTest, WhatOneBoxSpentTheOtherCannotSpendAgain) {
  Box a(server_.endpoint()), b(server_.endpoint());
  const limiter::BucketKey k = key_of("198.18.0.41");
  // Box A admits 6 of the 10, then syncs them.
  time::Nanos now = wall_now();
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(charge_gcra(a.table, k, now, ten_a_minute()).decision.admit);
  const KeySpend spent_a[] = {spend(k, 6)};
  ClusterSync::Report r = a.sync.sync(spent_a, now, Clock::now());
  ASSERT_EQ(r.error, RedisError::kNone) << r.detail;
  EXPECT_EQ(r.sent, 1u);
  // Box B, which never saw the key, reads it with its sync: 4 left for it.
  now = wall_now();
  const KeySpend read_b[] = {spend(k, 0)};
  r = b.sync.sync(read_b, now, Clock::now());
  ASSERT_EQ(r.error, RedisError::kNone) << r.detail;
  EXPECT_EQ(r.published, 1u);
  EXPECT_EQ(b.admit_all(k, now), 4u);
  // B syncs its 4; A, reading, has nothing left.
  const KeySpend spent_b[] = {spend(k, 4)};
  ASSERT_EQ(b.sync.sync(spent_b, now, Clock::now()).error, RedisError::kNone);
  const KeySpend read_a[] = {spend(k, 0)};
  ASSERT_EQ(a.sync.sync(read_a, now, Clock::now()).error, RedisError::kNone);
  EXPECT_EQ(a.admit_all(k, now), 0u);
  // Another key is untouched by all this.
  EXPECT_EQ(a.admit_all(key_of("198.18.0.42"), now), 10u);
}

TEST_F(ClusterSyncTest, APublishNeverMovesATatBack) {
  Box a(server_.endpoint()), b(server_.endpoint());
  const limiter::BucketKey k = key_of("198.18.0.43");
  const time::Nanos now = wall_now();
  // B alone spends 8 locally before anything reaches Redis; A syncs 1.
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(charge_gcra(b.table, k, now, ten_a_minute()).decision.admit);
  const KeySpend spent_a[] = {spend(k, 1)};
  ASSERT_EQ(a.sync.sync(spent_a, now, Clock::now()).error, RedisError::kNone);
  // B reads the shared lead (1 request's worth): its own 8 stay spent.
  const KeySpend read_b[] = {spend(k, 0)};
  const ClusterSync::Report r = b.sync.sync(read_b, now, Clock::now());
  ASSERT_EQ(r.error, RedisError::kNone);
  EXPECT_EQ(r.published, 0u);
  EXPECT_EQ(b.admit_all(k, now), 2u);
}

// A shared TAT that went wrong in Redis (written by someone else, far past
// any bucket) leaves the key refused on the box, with a Retry-After in range,
// rather than wrapping round to a full bucket.
TEST_F(ClusterSyncTest, ALeadPastAnyBucketLeavesTheKeyRefused) {
  Box a(server_.endpoint());
  const limiter::BucketKey k = key_of("198.18.0.45");
  RedisLink raw(server_.endpoint(), {});
  const std::string key = a.sync.redis_key(k);
  // 2^64 ns and 5 ms ahead of now, in microseconds: in nanoseconds, that
  // lead wraps round to 5 ms.
  const std::string tat = std::to_string(wall_now() / 1000 + 18'446'744'073'709'552ull + 5'000);
  const std::string_view set[] = {"SET", key, tat};
  ASSERT_EQ(raw.command(set, Clock::now()).error, RedisError::kNone);
  const time::Nanos now = wall_now();
  const KeySpend read[] = {spend(k, 0)};
  const ClusterSync::Report r = a.sync.sync(read, now, Clock::now());
  ASSERT_EQ(r.error, RedisError::kNone) << r.detail;
  EXPECT_EQ(r.published, 1u);
  const limiter::GcraCharge c = charge_gcra(a.table, k, now, ten_a_minute());
  EXPECT_FALSE(c.decision.admit);
  EXPECT_GT(c.decision.retry_after_s, 365u * 24 * 3600);
  // Spends too large to multiply out are sent saturated, not wrapped.
  const KeySpend huge[] = {{k, ~uint64_t{0}}};  // a saturated sum
  EXPECT_EQ(a.sync.sync(huge, now, Clock::now()).error, RedisError::kNone);
  EXPECT_FALSE(charge_gcra(a.table, k, now, ten_a_minute()).decision.admit);
}

TEST_F(ClusterSyncTest, SpendsOfAFailedBatchComeBackAndKindsOutsideTheClusterStayLocal) {
  Box a(server_.endpoint());
  const limiter::BucketKey k = key_of("198.18.0.44");
  const limiter::BucketKey local{k.k0, (k.k1 & ~uint64_t{0xffff}) | 3};  // kind 3: not a cluster bucket
  server_.stop();
  const KeySpend spends[] = {spend(k, 2), spend(local, 5)};
  const ClusterSync::Report r = a.sync.sync(spends, wall_now(), Clock::now());
  EXPECT_EQ(r.error, RedisError::kUnreachable);
  EXPECT_EQ(r.sent, 0u);
  ASSERT_EQ(r.unsent.size(), 1u);  // the local kind was never part of a batch
  EXPECT_EQ(r.unsent[0].key, k);
  EXPECT_EQ(r.unsent[0].spent, spend(k, 2).spent);
}

// DQ02-DQ05 across boxes: a calendar window's requests and tokens
// add up in Redis per minute; each box takes the totals as its own counts.
TEST_F(ClusterSyncTest, TwoBoxesShareAWindowsRequestsAndTokens) {
  Box a(server_.endpoint()), b(server_.endpoint());
  a.sync.set_buckets({SharedBucket("rpm", true)});
  b.sync.set_buckets({SharedBucket("rpm", true)});
  const limiter::BucketKey k = key_of("deployment-x");
  const limiter::WindowLimit limit{10, 1000};
  const time::Nanos now = wall_now();
  const auto minute = static_cast<uint32_t>(limiter::Calendar{}.window_of(now));
  // A counts 6 requests and is charged 400 tokens.
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(charge_window(a.table, k, now, limit).decision.admit);
  limiter::charge_tokens(a.table, k, 400, now, limiter::Calendar{});
  const KeySpend spent_a[] = {{k, 6, 400, minute}};
  ClusterSync::Report r = a.sync.sync(spent_a, now, Clock::now());
  ASSERT_EQ(r.error, RedisError::kNone) << r.detail;
  EXPECT_EQ(r.sent, 1u);
  EXPECT_EQ(r.published, 0u);  // A's own counts: nothing to move
  // B reads: 4 requests left to it this minute, and 600 tokens.
  const KeySpend read_b[] = {{k, 0, 0, minute}};
  r = b.sync.sync(read_b, now, Clock::now());
  ASSERT_EQ(r.error, RedisError::kNone) << r.detail;
  EXPECT_EQ(r.published, 1u);
  unsigned admitted = 0;
  for (int i = 0; i < 10; ++i) admitted += charge_window(b.table, k, now, limit).decision.admit;
  EXPECT_EQ(admitted, 4u);
  // B's tokens past the quota refuse on A too, once A syncs.
  limiter::charge_tokens(b.table, k, 700, now, limiter::Calendar{});
  const KeySpend spent_b[] = {{k, 4, 700, minute}};
  ASSERT_EQ(b.sync.sync(spent_b, now, Clock::now()).error, RedisError::kNone);
  const KeySpend read_a[] = {{k, 0, 0, minute}};
  ASSERT_EQ(a.sync.sync(read_a, now, Clock::now()).error, RedisError::kNone);
  const limiter::WindowCharge c = charge_window(a.table, k, now, {100, 1000});
  EXPECT_FALSE(c.decision.admit);  // 1100 tokens of 1000
  // The next minute starts empty on both, whatever Redis holds for this one.
  EXPECT_TRUE(charge_window(a.table, k, now + time::kNanosPerMinute, limit).decision.admit);
}

// A window's totals never overwrite a later minute the box has moved on to,
// and the local-share fallback charges a window's counts times the others.
TEST_F(ClusterSyncTest, AWindowsTotalsStayInTheirMinuteAndShareLocally) {
  Box a(server_.endpoint());
  a.sync.set_buckets({SharedBucket("rpm", true)});
  const limiter::BucketKey k = key_of("deployment-y");
  const limiter::WindowLimit limit{10, 0};
  const time::Nanos now = wall_now();
  const auto minute = static_cast<uint32_t>(limiter::Calendar{}.window_of(now));
  // The box is a minute ahead already: last minute's totals change nothing.
  ASSERT_TRUE(charge_window(a.table, k, now + time::kNanosPerMinute, limit).decision.admit);
  const KeySpend late[] = {{k, 9, 0, minute}};
  const ClusterSync::Report r = a.sync.sync(late, now, Clock::now());
  ASSERT_EQ(r.error, RedisError::kNone) << r.detail;
  EXPECT_EQ(r.published, 0u);
  unsigned next = 0;
  for (int i = 0; i < 12; ++i) next += charge_window(a.table, k, now + time::kNanosPerMinute, limit).decision.admit;
  EXPECT_EQ(next, 9u);  // 1 + 9 of 10
  // Fallback: 2 requests counted here stand for 2 on each of 2 others.
  const limiter::BucketKey k2 = key_of("deployment-z");
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(charge_window(a.table, k2, now, limit).decision.admit);
  const KeySpend mine[] = {{k2, 2, 0, minute}};
  EXPECT_EQ(a.sync.share_locally(mine, 2, now), 1u);
  unsigned left = 0;
  for (int i = 0; i < 10; ++i) left += charge_window(a.table, k2, now, limit).decision.admit;
  EXPECT_EQ(left, 4u);  // 10 - 2 - 2 x 2
}

TEST(ClusterSyncKeys, HashTaggedByGroup) {
  limiter::BucketTable table(limiter::BucketTable::Options{.capacity = 4096, .bucket_kinds = 1});
  RedisRouter redis({RedisEndpoint{{}, 0, "/nonexistent"}}, {});
  ClusterGcra gcra(redis);
  ClusterWindow window(redis);
  ClusterSync sync(table, gcra, window, "sluice:prod");
  sync.set_buckets({"", "api"});
  // Kind 1 here; the key in Redis carries the bucket's name instead, so
  // boxes that number their buckets otherwise still meet on it.
  const limiter::BucketKey k{0x8000000000000013ull, 0x0123456789ab0001ull};
  EXPECT_EQ(sync.redis_key(k), "sluice:prod:{g019}:api:80000000000000130123456789ab0000");  // 0x13 of 256 groups
}

}  // namespace
}  // namespace sluice::control

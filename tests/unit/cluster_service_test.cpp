// The cluster sync's thread body (control/cluster/cluster_service.h), stepped by
// hand against a real redis-server: what one box's workers admitted reaches
// another box once it meets the key; a Redis that went away is retried once,
// then the fallback applies (local-share: the box alone holds its share) and
// is left once Redis answers, what the box admitted meanwhile sent then; a
// Redis restarted empty is seeded from what the boxes knew; what another box
// spent is learned from the change logs, never by reading idle keys; a sync
// costs a round trip, not one per group, and the commands Redis runs per
// admitted request stay few at a low rate per key.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "control/cluster/cluster_service.h"
#include "limiter/charge.h"
#include "redis_cluster.h"
#include "redis_server.h"

namespace sluice::control {
namespace {

using Clock = RedisLink::Clock;
using namespace std::chrono_literals;

// 6 a minute, 6 at once from full: one every 10 s.
limiter::GcraLimit six_a_minute() {
  limiter::GcraLimit l;
  EXPECT_TRUE(limiter::GcraLimit::make(6, time::kNanosPerMinute, 6, l));
  return l;
}

time::Nanos wall_now() {
  return static_cast<time::Nanos>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
}

// A box: a table, one worker's spend log, and the service over them.
struct Box {
  explicit Box(const RedisEndpoint& redis) : Box(std::vector<RedisEndpoint>{redis}) {}
  explicit Box(const std::vector<RedisEndpoint>& redis)
      : table(limiter::BucketTable::Options{.capacity = 1 << 14, .bucket_kinds = 1}) {
    policy::ClusterSpec spec;
    for (const RedisEndpoint& e : redis) spec.redis.push_back(e.to_string());
    spec.key_prefix = "sluice:svc";
    spec.boxes = 2;
    RedisLink::Options quick;
    quick.backoff_min = 1ms;
    quick.backoff_max = 2ms;
    service = std::make_unique<ClusterService>(ClusterService::Setup{
        .spec = spec,
        .table = &table,
        .logs = {&log},
        .wait_for_readers = [] {},  // the "worker" is this thread
        .box_clock = [this] { return clock(); },
        .bucket_names = [] { return std::vector<SharedBucket>{"shared"}; },
        .redis = quick,
    });
  }
  // A worker admitting on `key` while the bucket allows: how many.
  unsigned admit(const limiter::BucketKey& key, unsigned at_most) {
    unsigned n = 0;
    for (; n < at_most; ++n) {
      if (!charge_gcra(table, key, wall_now(), six_a_minute()).decision.admit) break;
      log.record(key, six_a_minute().interval);
    }
    return n;
  }
  bool step() { return service->step(Clock::now()); }
  // Syncs up to and including the next that reads every group (the first
  // does, then every ClusterSync::kReadEvery-th): what another box spent on
  // a key this one did not spend on since arrives by then.
  bool step_reading_all() {
    bool ok = true;
    while (service->counters().syncs.load() % ClusterSync::kReadEvery != 0) ok = step() && ok;
    return step() && ok;
  }

  // The box's clock: the wall's, unless a test holds it still.
  std::function<limiter::Nanos()> clock = [] { return wall_now(); };

  limiter::BucketTable table;
  limiter::SpendLog log{16384};  // 12288 keys a turn
  std::unique_ptr<ClusterService> service;
};

limiter::BucketKey key(uint64_t i) { return {(uint64_t{1} << 63) | (i * 0x9e3779b97f4a7c15ull), i << 16}; }

class ClusterServiceTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server_.start()) << "could not start redis-server (scripts/install-deps.sh test)"; }
  RedisServer server_;
};

TEST_F(ClusterServiceTest, WhatOneBoxAdmittedTheOtherMeetsAtItsFirstSyncOfTheKey) {
  Box a(server_.endpoint()), b(server_.endpoint());
  EXPECT_EQ(a.admit(key(1), 4), 4u);
  ASSERT_TRUE(a.step());
  // B has not met the key: its bucket is full. One admission, then its
  // sync reads the shared lead: A's 4 and its own 1 leave 1.
  EXPECT_EQ(b.admit(key(1), 1), 1u);
  ASSERT_TRUE(b.step());
  EXPECT_EQ(b.admit(key(1), 6), 1u);
  EXPECT_GE(b.service->counters().keys_published.load(), 1u);
  // And A, holding the key, learns B's 2 when it next reads the key's
  // group (kReadEvery syncs at most): nothing left.
  ASSERT_TRUE(b.step());
  ASSERT_TRUE(a.step_reading_all());
  EXPECT_EQ(a.admit(key(1), 6), 0u);
  EXPECT_EQ(a.service->counters().in_fallback.load(), 0u);
}

// B met the key, then left it alone while A spent the rest: B learns A's
// spending from the group's change log when it next reads the group,
// sending nothing and reading no key; between those reads it reads nothing.
TEST_F(ClusterServiceTest, AnotherBoxsSpendIsLearnedFromTheChangeLogWithoutReadingTheKey) {
  Box a(server_.endpoint()), b(server_.endpoint());
  EXPECT_EQ(a.admit(key(3), 1), 1u);
  ASSERT_TRUE(a.step());
  EXPECT_EQ(b.admit(key(3), 1), 1u);
  ASSERT_TRUE(b.step());
  ASSERT_TRUE(a.step_reading_all());  // A learns B's 1 without having spent since
  EXPECT_GE(a.service->counters().keys_learned.load(), 1u);
  EXPECT_EQ(a.admit(key(3), 6), 4u);
  ASSERT_TRUE(a.step());
  const uint64_t sent = b.service->counters().keys_sent.load();
  const uint64_t trips = b.service->counters().round_trips.load();
  ASSERT_TRUE(b.step());  // not a sync that reads every group: no call at all
  EXPECT_EQ(b.service->counters().round_trips.load(), trips);
  EXPECT_EQ(b.service->counters().keys_learned.load(), 0u);
  ASSERT_TRUE(b.step_reading_all());
  EXPECT_EQ(b.service->counters().keys_sent.load(), sent);  // nothing sent, nothing read
  EXPECT_GE(b.service->counters().keys_learned.load(), 1u);
  EXPECT_EQ(b.admit(key(3), 6), 0u);
}

// Round trips: the scripts called (the commands they run inside are Redis's
// own work, in its CPU time, not calls).
uint64_t scripts_run(const RedisEndpoint& e) {
  RedisLink raw(e, {});
  const std::string_view info[] = {"INFO", "commandstats"};
  const RedisLink::Result r = raw.command(info, Clock::now());
  std::istringstream lines{std::string(r.reply.text())};
  uint64_t calls = 0;
  for (std::string line; std::getline(lines, line);) {
    const size_t at = line.find(":calls=");
    if ((line.starts_with("cmdstat_evalsha:") || line.starts_with("cmdstat_eval:")) && at != std::string::npos) {
      calls += std::stoull(line.substr(at + 7));
    }
  }
  return calls;
}

// Three boxes, many keys, each admitted now and then on one box or another
// (a low rate per key): Redis runs about one script per box and sync, not
// one per group and sync, nor reads of every key a box met lately.
TEST_F(ClusterServiceTest, ALowRatePerKeyCostsRedisLessThanACommandPerAdmission) {
  Box boxes[3] = {Box(server_.endpoint()), Box(server_.endpoint()), Box(server_.endpoint())};
  std::mt19937 rng(36);
  unsigned admitted = 0;
  for (auto& b : boxes) ASSERT_TRUE(b.step());
  const uint64_t before = scripts_run(server_.endpoint());
  constexpr int kRounds = 40;
  for (int round = 0; round < kRounds; ++round) {
    for (int i = 0; i < 6; ++i) admitted += boxes[rng() % 3].admit(key(1000 + rng() % 300), 1);
    for (auto& b : boxes) ASSERT_TRUE(b.step());
  }
  const uint64_t commands = scripts_run(server_.endpoint()) - before;
  ASSERT_GE(admitted, 200u);
  // One call per box and sync: 3 per round for 6 admissions.
  EXPECT_LE(commands, uint64_t{3} * kRounds + 2) << admitted << " admitted";
  EXPECT_LT(static_cast<double>(commands) / admitted, 0.75) << commands << " commands, " << admitted << " admitted";
}

// On a Redis Cluster of three primaries: once the box knows the map, a sync
// is one call per primary, and what one box spent reaches the other through
// the change logs of every group.
TEST(ClusterServiceOnACluster, ASyncIsOneCallPerPrimaryAndTheLogsCarryEveryGroup) {
  RedisCluster cluster(3, 0);
  ASSERT_TRUE(cluster.start()) << cluster.error();
  Box a(cluster.endpoints()), b(cluster.endpoints());
  constexpr uint64_t kKeys = 64;  // every group, four times over
  for (uint64_t i = 0; i < kKeys; ++i) {
    EXPECT_EQ(a.admit(key(i), 1), 1u);
    EXPECT_EQ(b.admit(key(i), 1), 1u);
  }
  ASSERT_TRUE(a.step());
  ASSERT_TRUE(b.step());
  ASSERT_TRUE(a.step_reading_all());  // learns B's
  for (uint64_t i = 0; i < kKeys; ++i) EXPECT_EQ(a.admit(key(i), 6), 4u) << i;
  const uint64_t trips = a.service->counters().round_trips.load();
  ASSERT_TRUE(a.step());  // its spends, in groups on every primary
  EXPECT_EQ(a.service->counters().round_trips.load() - trips, 3u);
  ASSERT_TRUE(b.step_reading_all());
  EXPECT_GE(b.service->counters().keys_learned.load(), kKeys);
  for (uint64_t i = 0; i < kKeys; ++i) EXPECT_EQ(b.admit(key(i), 6), 0u) << i;
}

// A primary dies (before the cluster notices): only the keys of the groups
// it held miss their syncs and go to the fallback; the other primaries'
// calls, in the same pipelined sync, go on, their keys sent every time.
TEST(ClusterServiceOnACluster, OnlyTheDeadPrimarysGroupsFallBack) {
  RedisCluster cluster(3, 0);
  ASSERT_TRUE(cluster.start()) << cluster.error();
  Box a(cluster.endpoints());
  ASSERT_TRUE(a.step());  // the map learned
  const std::vector<uint16_t> map = cluster.slot_map();
  const auto slot_of = [](const limiter::BucketKey& k) {
    char tag[16];
    std::snprintf(tag, sizeof tag, "{g%03u}", static_cast<unsigned>(k.k0 % ClusterSync::kGroups));
    return RedisRouter::key_slot(tag);
  };
  constexpr uint64_t kKeys = 300;
  const uint16_t dead_port = map[slot_of(key(0))];
  size_t on_dead = 0;
  for (uint64_t i = 0; i < kKeys; ++i) on_dead += map[slot_of(key(i))] == dead_port;
  ASSERT_GT(on_dead, 0u);
  ASSERT_LT(on_dead, kKeys);
  ASSERT_TRUE(cluster.kill_primary_of(slot_of(key(0))));
  const uint64_t sent = a.service->counters().keys_sent.load();
  for (uint64_t i = 0; i < kKeys; ++i) EXPECT_EQ(a.admit(key(i), 1), 1u);
  EXPECT_FALSE(a.step());  // the dead node's call failed: its spends kept for one retry
  EXPECT_EQ(a.service->counters().keys_sent.load() - sent, kKeys - on_dead);
  EXPECT_EQ(a.service->counters().fallback_keys.load(), 0u);
  EXPECT_FALSE(a.step());  // failed again: those, and only those, to the local share
  EXPECT_EQ(a.service->counters().fallback_keys.load(), on_dead);
  for (uint64_t i = 0; i < kKeys; ++i) EXPECT_EQ(a.admit(key(i), 1), 1u);
  const uint64_t sent2 = a.service->counters().keys_sent.load();
  EXPECT_FALSE(a.step());
  EXPECT_EQ(a.service->counters().keys_sent.load() - sent2, kKeys - on_dead);
}

// A sync that asks Redis nothing (nothing to send, no group due) says
// nothing of it: a box that found Redis gone stays in fallback until a sync
// that reaches Redis again.
TEST_F(ClusterServiceTest, AQuietSyncDoesNotTakeTheBoxOutOfFallback) {
  Box a(server_.endpoint());
  ASSERT_TRUE(a.step());
  server_.stop();
  EXPECT_FALSE(a.step_reading_all());
  EXPECT_EQ(a.service->counters().in_fallback.load(), 1u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_FALSE(a.step()) << "quiet sync " << i;
    EXPECT_EQ(a.service->counters().in_fallback.load(), 1u) << "quiet sync " << i;
  }
  ASSERT_TRUE(server_.start());
  bool back = false;
  for (int i = 0; i < 100 && !back; ++i) {
    std::this_thread::sleep_for(10ms);
    back = a.step_reading_all();
  }
  EXPECT_TRUE(back);
  EXPECT_EQ(a.service->counters().in_fallback.load(), 0u);
}

TEST_F(ClusterServiceTest, RedisAwayIsRetriedOnceThenTheBoxHoldsItsShareAndComesBack) {
  Box a(server_.endpoint());
  ASSERT_TRUE(a.step());
  server_.stop();
  // 2 admitted; the first failed sync keeps the spend for a retry.
  EXPECT_EQ(a.admit(key(2), 2), 2u);
  EXPECT_FALSE(a.step());
  EXPECT_EQ(a.service->counters().fallback_keys.load(), 0u);
  EXPECT_EQ(a.service->counters().in_fallback.load(), 1u);
  EXPECT_FALSE(a.service->last_error().empty());
  // The second failure hands it to local-share: charged again once (2
  // boxes), so of the 6 only 6 - 2 - 2 = 2 are left to this box.
  std::this_thread::sleep_for(5ms);  // past the link's back-off
  EXPECT_FALSE(a.step());
  EXPECT_EQ(a.service->counters().fallback_keys.load(), 1u);
  EXPECT_EQ(a.admit(key(2), 6), 2u);
  EXPECT_EQ(a.service->counters().fallbacks.load(), 1u);
  ASSERT_TRUE(server_.start());
  bool back = false;
  for (int i = 0; i < 100 && !back; ++i) {
    std::this_thread::sleep_for(10ms);
    back = a.step();
  }
  ASSERT_TRUE(back);
  EXPECT_EQ(a.service->counters().in_fallback.load(), 0u);
  EXPECT_TRUE(a.service->last_error().empty());
  EXPECT_EQ(a.service->counters().fallbacks.load(), 1u);
}

// A box cut off from Redis admits its local share; the other boxes, not
// seeing it, hand out the whole budget. What the cut box admitted is kept
// and sent once Redis answers again, so every box then repays it: here a
// fresh box meets the key with the cut box's 3 already spent.
TEST_F(ClusterServiceTest, WhatABoxAdmittedWhileCutOffReachesRedisOnceItAnswers) {
  Box a(server_.endpoint());
  ASSERT_TRUE(a.step());
  server_.stop();
  EXPECT_EQ(a.admit(key(7), 2), 2u);
  EXPECT_FALSE(a.step());  // kept for a retry
  std::this_thread::sleep_for(5ms);
  EXPECT_FALSE(a.step());  // charged to the local share: 6 - 2 - 2 = 2 left
  EXPECT_EQ(a.admit(key(7), 1), 1u);
  std::this_thread::sleep_for(5ms);
  EXPECT_FALSE(a.step());  // the fresh 1 charged to the share once, not the first 2 again
  EXPECT_EQ(a.admit(key(7), 6), 0u);
  EXPECT_EQ(a.service->counters().fallback_keys.load(), 2u);
  ASSERT_TRUE(server_.start());  // an empty Redis: only what A sends makes the key
  bool back = false;
  for (int i = 0; i < 100 && !back; ++i) {
    std::this_thread::sleep_for(10ms);
    back = a.step();
  }
  ASSERT_TRUE(back);
  EXPECT_EQ(a.service->counters().repaid_keys.load(), 1u);
  // B meets the key: its first admission is its own, then its sync reads
  // A's 3 (and its 1): of 6, 2 are left, not 5.
  Box b(server_.endpoint());
  EXPECT_EQ(b.admit(key(7), 1), 1u);
  ASSERT_TRUE(b.step());
  EXPECT_EQ(b.admit(key(7), 6), 2u);
  // And once repaid, nothing is owed: the next sync sends nothing more for it.
  const uint64_t sent = a.service->counters().keys_sent.load();
  ASSERT_TRUE(a.step());
  EXPECT_LE(a.service->counters().keys_sent.load() - sent, 1u);  // at most a read of the watched key
}

// Redis restarted empty: the boxes still know each key's shared lead, and
// seed Redis with it at their next sync, so a box that meets the key
// afterwards finds it spent, not full.
TEST_F(ClusterServiceTest, ARedisRestartedEmptyIsSeededFromWhatTheBoxesKnew) {
  Box a(server_.endpoint());
  EXPECT_EQ(a.admit(key(9), 4), 4u);
  ASSERT_TRUE(a.step());  // Redis holds A's 4
  server_.stop();
  ASSERT_TRUE(server_.start());  // empty
  bool back = false;
  for (int i = 0; i < 100 && !back; ++i) {
    std::this_thread::sleep_for(10ms);
    back = a.step_reading_all();  // the group's new epoch seen: A's floor sent
  }
  ASSERT_TRUE(back);
  Box b(server_.endpoint());
  EXPECT_EQ(b.admit(key(9), 1), 1u);
  ASSERT_TRUE(b.step());
  // A's 4 and B's 1 of 6: 1 left (an unseeded Redis would have left 5).
  EXPECT_EQ(b.admit(key(9), 6), 1u);
}

// Keys the box spent on and then left alone are not read again: their
// spends went out, and what other boxes spend on them comes back from the
// change logs. A sync with nothing to send costs no round trip, but every
// kReadEvery-th, which reads every group in one (a single Redis holds them
// all), not one per group.
TEST_F(ClusterServiceTest, IdleWatchedKeysAreNotReadAndAnIdleSyncIsOneRoundTripAtMost) {
  Box a(server_.endpoint());
  constexpr size_t kKeys = 3 * ClusterService::kMaxIdleReads;
  for (size_t i = 0; i < kKeys; ++i) a.log.record(key(100 + i), six_a_minute().interval);
  ASSERT_TRUE(a.step());
  uint64_t sent = a.service->counters().keys_sent.load();
  EXPECT_EQ(sent, kKeys);
  EXPECT_EQ(a.service->counters().keys_watched.load(), kKeys);
  // 6 144 spends over the groups: 1 024 a call at most.
  EXPECT_LE(a.service->counters().round_trips.load(), kKeys / ClusterSync::kMaxCallSpends + 1);
  for (uint64_t i = 1; i <= 2 * ClusterSync::kReadEvery; ++i) {
    const uint64_t trips = a.service->counters().round_trips.load();
    ASSERT_TRUE(a.step());
    EXPECT_EQ(a.service->counters().keys_sent.load(), sent) << "sync " << i;
    EXPECT_EQ(a.service->counters().round_trips.load() - trips, i % ClusterSync::kReadEvery == 0 ? 1u : 0u)
        << "sync " << i;
  }
}

// Past the watch's cap a new key's spend still reaches Redis (once), and no
// watched key's pending spend is dropped to make room.
TEST_F(ClusterServiceTest, PastTheWatchCapASpendStillGoesOut) {
  Box a(server_.endpoint());
  // Held still: on a slow run (sanitizers, a busy machine) the turns take
  // longer than the watch keeps an idle key, and keys would leave it.
  a.clock = [t = wall_now()] { return t; };
  constexpr size_t kPerTurn = 12'000;  // under the log's 12 288 a turn
  size_t recorded = 0;
  uint64_t next = 1'000'000;
  while (recorded < ClusterService::kMaxWatched + kPerTurn) {
    for (size_t i = 0; i < kPerTurn; ++i) a.log.record(key(next++), six_a_minute().interval);
    recorded += kPerTurn;
    ASSERT_TRUE(a.step());
  }
  EXPECT_EQ(a.service->counters().keys_watched.load(), ClusterService::kMaxWatched);
  EXPECT_GE(a.service->counters().keys_sent.load(), recorded);  // every spend went out
  // The last key, past the cap, is in Redis.
  RedisLink raw(server_.endpoint(), {});
  const std::string_view scan[] = {"DBSIZE"};
  const RedisLink::Result n = raw.command(scan, Clock::now());
  ASSERT_TRUE(n.reply.is_integer());
  // Every key, and each group's change log and epoch.
  EXPECT_EQ(static_cast<size_t>(n.reply.integer()), recorded + 2 * ClusterSync::kGroups);  // a log and a state a group
}

}  // namespace
}  // namespace sluice::control

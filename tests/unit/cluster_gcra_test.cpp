// The control plane's Redis side of cluster budgets (control/cluster/redis_link.h,
// control/cluster/cluster_gcra.h) against a real redis-server (Debian's), which the
// test starts itself on a Unix socket in a directory of its own and stops by
// its PID: endpoints parsed strictly; two boxes' spending adds up on one
// shared arrival time; an idle key starts from Redis's clock and expires; a
// script the server lost is loaded again; an unreachable server is retried
// only after a back-off, and a restarted one is used again.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "control/cluster/cluster_gcra.h"
#include "control/cluster/redis_link.h"
#include "control/cluster/redis_router.h"
#include "redis_server.h"

namespace sluice::control {
namespace {

using namespace std::chrono_literals;
using Clock = RedisLink::Clock;

// redis-server is installed by scripts/install-deps.sh test: a machine
// without it fails here, with the reason, rather than skipping quietly.
class ClusterGcraTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server_.start()) << "could not start redis-server (scripts/install-deps.sh test)"; }

  RedisLink::Result raw(RedisLink& link, std::vector<std::string_view> argv) { return link.command(argv, Clock::now()); }

  RedisServer server_;
};

TEST(RedisEndpoint, ParsedStrictly) {
  std::string error;
  auto e = parse_redis_endpoint("198.18.0.5:6379", error);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->host, "198.18.0.5");
  EXPECT_EQ(e->port, 6379);
  EXPECT_EQ(e->to_string(), "198.18.0.5:6379");
  e = parse_redis_endpoint("[2001:db8::5]:7000", error);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->host, "2001:db8::5");
  EXPECT_EQ(e->to_string(), "[2001:db8::5]:7000");
  e = parse_redis_endpoint("unix:/run/redis/redis.sock", error);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->unix_path, "/run/redis/redis.sock");
  for (const char* bad : {"redis", "redis:", ":6379", "redis:0", "redis:65536", "redis:63x79", "2001:db8::5:7000",
                          "[2001:db8::5]", "[2001:db8::5]7000", "unix:", "unix:relative.sock"}) {
    error.clear();
    EXPECT_FALSE(parse_redis_endpoint(bad, error)) << bad;
    EXPECT_FALSE(error.empty()) << bad;
  }
}

TEST_F(ClusterGcraTest, TwoBoxesSpendOneSharedArrivalTime) {
  RedisRouter a({server_.endpoint()}, {}), b({server_.endpoint()}, {});
  ClusterGcra box_a(a), box_b(b);
  std::vector<int64_t> ahead_a, ahead_b;
  // Box A admitted 10 requests of a 1 s emission interval, box B 5 (large
  // spends, so the time between the two calls, well under a second even on
  // a loaded machine, cannot blur the sum).
  const ClusterSpend spend_a[] = {{"{t1}:k", 10'000'000}, {"{t1}:other", 1'000}};
  ASSERT_EQ(box_a.apply(spend_a, ahead_a, Clock::now()).error, RedisError::kNone);
  const ClusterSpend spend_b[] = {{"{t1}:k", 5'000'000}};
  ASSERT_EQ(box_b.apply(spend_b, ahead_b, Clock::now()).error, RedisError::kNone);
  ASSERT_EQ(ahead_a.size(), 2u);
  ASSERT_EQ(ahead_b.size(), 1u);
  // A fresh key: exactly the spend ahead of Redis's clock. Then B's on top,
  // less what that clock moved on between the two.
  EXPECT_EQ(ahead_a[0], 10'000'000);
  EXPECT_EQ(ahead_a[1], 1'000);
  EXPECT_GT(ahead_b[0], ahead_a[0] + 4'000'000);
  EXPECT_LE(ahead_b[0], ahead_a[0] + 5'000'000);
  // A read (spend 0) sees the shared total and changes nothing.
  const ClusterSpend look[] = {{"{t1}:k", 0}};
  ASSERT_EQ(box_a.apply(look, ahead_a, Clock::now()).error, RedisError::kNone);
  EXPECT_LE(ahead_a[0], ahead_b[0]);
  EXPECT_GT(ahead_a[0], ahead_b[0] - 1'000'000);
}

TEST_F(ClusterGcraTest, AKeyBehindTheClockStartsFromItAndExpires) {
  RedisLink link(server_.endpoint(), {});  // the test's own look at the server
  RedisRouter router({server_.endpoint()}, {});
  ClusterGcra gcra(router);
  // A TAT long past: the bucket filled up meanwhile.
  ASSERT_EQ(raw(link, {"SET", "{t2}:k", "1000"}).error, RedisError::kNone);
  std::vector<int64_t> ahead;
  const ClusterSpend spend[] = {{"{t2}:k", 2'000}};
  ASSERT_EQ(gcra.apply(spend, ahead, Clock::now()).error, RedisError::kNone);
  ASSERT_EQ(ahead.size(), 1u);
  EXPECT_EQ(ahead[0], 2'000);
  const RedisLink::Result ttl = raw(link, {"PTTL", "{t2}:k"});
  ASSERT_TRUE(ttl.reply.is_integer());
  EXPECT_GT(ttl.reply.integer(), 900);    // the 2 ms it runs ahead, plus a second
  EXPECT_LE(ttl.reply.integer(), 1'002);
  // A key nobody spent on is not written.
  const ClusterSpend look[] = {{"{t2}:never", 0}};
  ASSERT_EQ(gcra.apply(look, ahead, Clock::now()).error, RedisError::kNone);
  EXPECT_EQ(ahead[0], 0);
  EXPECT_TRUE(raw(link, {"GET", "{t2}:never"}).reply.is_nil());
}

TEST_F(ClusterGcraTest, AScriptTheServerLostIsLoadedAgain) {
  RedisLink link(server_.endpoint(), {});  // the test's own look at the server
  RedisRouter router({server_.endpoint()}, {});
  ClusterGcra gcra(router);
  std::vector<int64_t> ahead;
  // 10 s each: the first has not drained by the time the second comes.
  const ClusterSpend spend[] = {{"{t3}:k", 10'000'000}};
  ASSERT_EQ(gcra.apply(spend, ahead, Clock::now()).error, RedisError::kNone);
  ASSERT_EQ(raw(link, {"SCRIPT", "FLUSH"}).error, RedisError::kNone);
  const RedisLink::Result r = gcra.apply(spend, ahead, Clock::now());
  ASSERT_EQ(r.error, RedisError::kNone) << r.detail;
  ASSERT_EQ(ahead.size(), 1u);
  EXPECT_GT(ahead[0], 19'000'000);  // both spends
}

TEST_F(ClusterGcraTest, AValueThatIsNotATimeIsAServerError) {
  RedisLink link(server_.endpoint(), {});  // the test's own look at the server
  RedisRouter router({server_.endpoint()}, {});
  ClusterGcra gcra(router);
  ASSERT_EQ(raw(link, {"SET", "{t4}:k", "not a number"}).error, RedisError::kNone);
  std::vector<int64_t> ahead;
  const ClusterSpend spend[] = {{"{t4}:k", 1'000}};
  const RedisLink::Result r = gcra.apply(spend, ahead, Clock::now());
  EXPECT_EQ(r.error, RedisError::kServer);
  EXPECT_FALSE(r.detail.empty());
  EXPECT_TRUE(ahead.empty());
  // An error reply is not a broken connection: the next batch goes through
  // at once, with no back-off.
  const ClusterSpend good[] = {{"{t4}:fine", 1'000}};
  EXPECT_EQ(gcra.apply(good, ahead, Clock::now()).error, RedisError::kNone);
}

// The back-off belongs to the link (one per node): a command while it runs
// makes no connection attempt at all.
TEST_F(ClusterGcraTest, AnUnreachableServerIsRetriedAfterABackOff) {
  RedisLink::Options o;
  o.backoff_min = 100ms;
  o.backoff_max = 400ms;
  RedisLink link(server_.endpoint(), o);
  const std::vector<std::string_view> ping = {"PING"};
  ASSERT_EQ(link.command(ping, Clock::now()).error, RedisError::kNone);
  server_.stop();

  // The connection breaks: lost. The next attempt within the back-off makes
  // no connection attempt at all; after it, one, which fails.
  Clock::time_point t = Clock::now();
  EXPECT_EQ(link.command(ping, t).error, RedisError::kConnectionLost);
  EXPECT_FALSE(link.connected());
  const uint64_t connects = link.connects();
  EXPECT_EQ(link.command(ping, t + 50ms).error, RedisError::kBackingOff);
  EXPECT_EQ(link.connects(), connects);
  EXPECT_EQ(link.command(ping, t + 150ms).error, RedisError::kUnreachable);
  EXPECT_EQ(link.connects(), connects + 1);
  EXPECT_EQ(link.failed_connects(), 1u);
  // The back-off doubled (200 ms from the failure), up to its maximum.
  EXPECT_EQ(link.command(ping, t + 300ms).error, RedisError::kBackingOff);
  EXPECT_EQ(link.command(ping, t + 360ms).error, RedisError::kUnreachable);
  EXPECT_EQ(link.command(ping, t + 700ms).error, RedisError::kBackingOff);  // 400 ms, the maximum
  EXPECT_EQ(link.command(ping, t + 770ms).error, RedisError::kUnreachable);
  ASSERT_TRUE(server_.start());
  EXPECT_EQ(link.command(ping, t + 2s).error, RedisError::kNone);
}

// A restarted server (empty: no persistence) is used again once its back-off
// has run: the script is loaded again and the key starts afresh.
TEST_F(ClusterGcraTest, ARestartedServerIsUsedAgain) {
  RedisLink::Options o;
  o.backoff_min = 100ms;
  o.backoff_max = 400ms;
  RedisRouter router({server_.endpoint()}, o);
  ClusterGcra gcra(router);
  std::vector<int64_t> ahead;
  const ClusterSpend spend[] = {{"{t5}:k", 1'000}};
  ASSERT_EQ(gcra.apply(spend, ahead, Clock::now()).error, RedisError::kNone);
  server_.stop();
  const Clock::time_point t = Clock::now();
  EXPECT_NE(gcra.apply(spend, ahead, t).error, RedisError::kNone);
  EXPECT_NE(gcra.apply(spend, ahead, t + 50ms).error, RedisError::kNone);
  ASSERT_TRUE(server_.start());
  const RedisLink::Result r = gcra.apply(spend, ahead, t + 2s);
  ASSERT_EQ(r.error, RedisError::kNone) << r.detail;
  ASSERT_EQ(ahead.size(), 1u);
  EXPECT_LE(ahead[0], 1'000);
  EXPECT_GT(ahead[0], 0);
}

}  // namespace
}  // namespace sluice::control

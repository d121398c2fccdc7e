// The Redis Cluster router (control/cluster/redis_router.h) against real servers
// (Debian's redis-server, started by the tests on loopback and stopped by
// PID): the slot of a key is the spec's (CRC16/XMODEM, hash tags) and the
// servers' own (CLUSTER KEYSLOT); a server without cluster support is used
// as is; on a 3-primary, 3-replica cluster every key lands on its slot's
// primary, a slot moved by hand is followed (ASK during the migration, MOVED
// after it, then one refresh and no more redirections), a redirection loop
// is cut after five, and a killed primary's slot is served again by its
// promoted replica within a bounded time, with the data written before.
#include "control/cluster/redis_router.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "redis_cluster.h"
#include "redis_server.h"

namespace sluice::control {
namespace {

using namespace std::chrono_literals;
using Clock = RedisLink::Clock;

// redis-server (and redis-cli, for the clusters) are installed by
// scripts/install-deps.sh test: without them these tests fail, saying so.
constexpr const char* kNeedsRedis = "could not start redis-server (scripts/install-deps.sh test)";

RedisLink::Options test_options() {
  RedisLink::Options o;
  o.connect_timeout = 250ms;
  o.command_timeout = 500ms;
  return o;
}

RedisLink::Result route(RedisRouter& router, std::string_view key, std::vector<std::string_view> argv) {
  return router.command(key, argv, Clock::now());
}

TEST(RedisKeySlot, SpecExample) {
  // The Redis Cluster specification's CRC16 check value.
  EXPECT_EQ(RedisRouter::crc16("123456789"), 0x31C3);
  EXPECT_EQ(RedisRouter::key_slot("123456789"), 0x31C3 % 16384);
  EXPECT_EQ(RedisRouter::key_slot(""), 0);
  // CLUSTER KEYSLOT on Redis 7.0.
  EXPECT_EQ(RedisRouter::key_slot("foo"), 12182);
  EXPECT_EQ(RedisRouter::key_slot("bar"), 5061);
}

TEST(RedisKeySlot, HashTags) {
  // The spec's examples: the tag alone is hashed...
  EXPECT_EQ(RedisRouter::key_slot("{user1000}.following"), RedisRouter::key_slot("{user1000}.followers"));
  EXPECT_EQ(RedisRouter::key_slot("{user1000}.following"), RedisRouter::key_slot("user1000"));
  EXPECT_EQ(RedisRouter::key_slot("foo{bar}{zap}"), RedisRouter::key_slot("bar"));
  // ...an empty tag is no tag (the first `{` and the first `}` after it
  // decide, nothing later)...
  EXPECT_EQ(RedisRouter::key_slot("foo{}{bar}"), RedisRouter::crc16("foo{}{bar}") % 16384);
  EXPECT_NE(RedisRouter::key_slot("foo{}{bar}"), RedisRouter::key_slot("bar"));
  // ...and the tag runs from the first `{` to the first `}` after it.
  EXPECT_EQ(RedisRouter::key_slot("foo{{bar}}zap"), RedisRouter::key_slot("{bar"));
  EXPECT_EQ(RedisRouter::key_slot("foo{{bar}}zap"), 4015);                         // CLUSTER KEYSLOT says so
  EXPECT_EQ(RedisRouter::key_slot("a}b{c"), RedisRouter::crc16("a}b{c") % 16384);  // no `}` after the `{`
  EXPECT_EQ(RedisRouter::key_slot("{"), RedisRouter::crc16("{") % 16384);
  // ClusterSync's keys: one group, one slot.
  EXPECT_EQ(RedisRouter::key_slot("sluice:{g07}:00ff"), RedisRouter::key_slot("sluice:{g07}:ab12"));
}

TEST(RedisKeySlot, AgreesWithClusterKeyslot) {
  RedisCluster cluster(1, 0);
  ASSERT_TRUE(cluster.start()) << kNeedsRedis << ": " << cluster.error();
  RedisLink link(cluster.endpoints().at(0), test_options());
  std::mt19937 rng(17);
  // Keys of any bytes, braces frequent so that tags of every shape occur.
  std::uniform_int_distribution<int> length(0, 24), pick(0, 9), byte(0, 255);
  for (int i = 0; i < 200; ++i) {
    std::string key;
    for (int n = length(rng); n > 0; --n) {
      const int p = pick(rng);
      key.push_back(p < 2 ? '{' : p < 4 ? '}' : static_cast<char>(byte(rng)));
    }
    const std::string_view argv[] = {"CLUSTER", "KEYSLOT", key};
    const auto r = link.command(argv, Clock::now());
    ASSERT_EQ(r.error, RedisError::kNone) << r.detail;
    ASSERT_TRUE(r.reply.is_integer());
    EXPECT_EQ(RedisRouter::key_slot(key), r.reply.integer()) << "key #" << i << " of " << key.size() << " bytes";
  }
}

TEST(RedisRouterSingle, CommandsGoThroughToAServerWithoutCluster) {
  RedisServer server;
  ASSERT_TRUE(server.start()) << kNeedsRedis;
  // The first seed never answers: the next one is asked.
  RedisRouter router({RedisEndpoint{{}, 0, "/nonexistent/sluice-redis.sock"}, server.endpoint()}, test_options());
  for (int i = 0; i < 20; ++i) {
    const std::string key = "single:" + std::to_string(i), value = std::to_string(i * 7);
    ASSERT_EQ(route(router, key, {"SET", key, value}).error, RedisError::kNone);
    const auto got = route(router, key, {"GET", key});
    ASSERT_EQ(got.error, RedisError::kNone) << got.detail;
    EXPECT_EQ(got.reply.text(), value);
  }
  EXPECT_EQ(router.mode(), RedisRouter::Mode::kSingle);
  EXPECT_FALSE(router.cluster_mode());
  EXPECT_EQ(router.map_refreshes(), 1u);
  EXPECT_EQ(router.redirections(), 0u);
  EXPECT_FALSE(router.owner(RedisRouter::key_slot("single:1")));
  EXPECT_NE(router.describe().find("single (unix:"), std::string::npos) << router.describe();
  // A server error is the server's, untouched.
  const auto wrong = route(router, "single:1", {"LPUSH", "single:1", "x"});
  EXPECT_EQ(wrong.error, RedisError::kServer);
  EXPECT_NE(wrong.detail.find("WRONGTYPE"), std::string::npos) << wrong.detail;
}

TEST(RedisRouterSingle, NoSeedAnsweringFailsFastAndBacksOff) {
  RedisRouter router({RedisEndpoint{{}, 0, "/nonexistent/a.sock"}, RedisEndpoint{{}, 0, "/nonexistent/b.sock"}},
                     test_options());
  const auto start = Clock::now();
  const auto r = route(router, "k", {"GET", "k"});
  EXPECT_EQ(r.error, RedisError::kUnreachable) << r.detail;
  const auto again = route(router, "k", {"GET", "k"});  // both seeds backing off: no attempt at all
  EXPECT_EQ(again.error, RedisError::kBackingOff) << again.detail;
  EXPECT_LT(Clock::now() - start, 1s);
  EXPECT_EQ(router.mode(), RedisRouter::Mode::kUnknown);
  EXPECT_EQ(router.map_refreshes(), 0u);
}

// Redis as production runs it: requirepass (the default user) and an ACL
// user confined to one key prefix.
RedisServer authenticated_server() {
  return RedisServer({"--requirepass", "default-secret", "--user", "sluice", "on", ">sluice-secret", "~sluice:*",
                      "+@all", "-@dangerous", "+cluster|slots"});
}

RedisLink::Options with_credentials(std::string user, std::string password) {
  RedisLink::Options o = test_options();
  o.username = std::move(user);
  o.password = std::move(password);
  return o;
}

TEST(RedisLinkAuth, AuthenticatesAsTheDefaultUserOrAnAclUserOnEveryNewConnection) {
  RedisServer server = authenticated_server();
  ASSERT_TRUE(server.start()) << kNeedsRedis << ": " << server.error();
  RedisLink as_default(server.endpoint(), with_credentials("", "default-secret"));
  const std::string_view set_other[] = {"SET", "other:k", "1"};
  EXPECT_EQ(as_default.command(set_other, Clock::now()).error, RedisError::kNone);
  RedisLink as_sluice(server.endpoint(), with_credentials("sluice", "sluice-secret"));
  const std::string_view set_mine[] = {"SET", "sluice:k", "1"};
  EXPECT_EQ(as_sluice.command(set_mine, Clock::now()).error, RedisError::kNone);
  // Confined to its prefix: a server error, not a credentials one.
  const RedisLink::Result outside = as_sluice.command(set_other, Clock::now());
  EXPECT_EQ(outside.error, RedisError::kServer) << outside.detail;
  EXPECT_NE(outside.detail.find("NOPERM"), std::string::npos) << outside.detail;
  // A new connection (the server restarted) authenticates again.
  server.stop();
  ASSERT_TRUE(server.start()) << server.error();
  RedisLink::Result again;
  for (int i = 0; i < 50 && (again = as_sluice.command(set_mine, Clock::now())).error != RedisError::kNone; ++i) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(again.error, RedisError::kNone) << again.detail;
}

TEST(RedisLinkAuth, RefusedOrMissingCredentialsAreAnAuthErrorThatNamesNoPassword) {
  RedisServer server = authenticated_server();
  ASSERT_TRUE(server.start()) << kNeedsRedis << ": " << server.error();
  const std::string_view ping[] = {"PING"};
  RedisLink wrong(server.endpoint(), with_credentials("sluice", "not-the-secret"));
  const RedisLink::Result refused = wrong.command(ping, Clock::now());
  EXPECT_EQ(refused.error, RedisError::kAuth);
  EXPECT_NE(refused.detail.find("authentication refused (WRONGPASS"), std::string::npos) << refused.detail;
  EXPECT_EQ(refused.detail.find("not-the-secret"), std::string::npos) << refused.detail;
  EXPECT_FALSE(wrong.connected());
  // Like any failed connection: backed off, not retried at every command.
  EXPECT_EQ(wrong.command(ping, Clock::now()).error, RedisError::kBackingOff);
  RedisLink none(server.endpoint(), test_options());
  const RedisLink::Result noauth = none.command(ping, Clock::now());
  EXPECT_EQ(noauth.error, RedisError::kAuth);
  EXPECT_NE(noauth.detail.find("NOAUTH"), std::string::npos) << noauth.detail;
  EXPECT_NE(noauth.detail.find(server.endpoint().to_string()), std::string::npos) << noauth.detail;
}

TEST(RedisLinkAuth, AProbeReportsRefusedCredentialsBeforeAnUnreachableSeed) {
  RedisServer server = authenticated_server();
  ASSERT_TRUE(server.start()) << kNeedsRedis << ": " << server.error();
  RedisRouter refused({server.endpoint(), RedisEndpoint{{}, 0, "/nonexistent/sluice-redis.sock"}},
                      with_credentials("sluice", "not-the-secret"));
  EXPECT_EQ(refused.probe(Clock::now()).error, RedisError::kAuth);
  RedisRouter good({RedisEndpoint{{}, 0, "/nonexistent/sluice-redis.sock"}, server.endpoint()},
                   with_credentials("sluice", "sluice-secret"));
  const RedisLink::Result ok = good.probe(Clock::now());
  EXPECT_EQ(ok.error, RedisError::kNone) << ok.detail;
  EXPECT_EQ(good.mode(), RedisRouter::Mode::kSingle);
}

class RedisRouterCluster : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(cluster_.start()) << kNeedsRedis << ": " << cluster_.error(); }

  // The node id of the node at `e`.
  static std::string id_of(const RedisEndpoint& e) {
    const auto r = RedisCluster::query(e, {"CLUSTER", "MYID"});
    return r.error == RedisError::kNone ? std::string(r.reply.text()) : std::string();
  }

  RedisCluster cluster_{3, 1};
};

TEST_F(RedisRouterCluster, KeysLandOnTheirSlotsPrimary) {
  RedisRouter router({cluster_.endpoints().at(0)}, test_options());
  std::vector<std::string> keys;
  for (int i = 0; i < 300; ++i) keys.push_back("spread:" + std::to_string(i * 7919));
  for (const std::string& k : keys) {
    const auto r = route(router, k, {"SET", k, k + "=v"});
    ASSERT_EQ(r.error, RedisError::kNone) << k << ": " << r.detail;
  }
  for (const std::string& k : keys) {
    const auto r = route(router, k, {"GET", k});
    ASSERT_EQ(r.error, RedisError::kNone) << k << ": " << r.detail;
    EXPECT_EQ(r.reply.text(), k + "=v");
  }
  EXPECT_TRUE(router.cluster_mode());
  EXPECT_EQ(router.map_refreshes(), 1u);  // the first map was right for every key
  EXPECT_EQ(router.redirections(), 0u);
  EXPECT_GE(router.nodes(), 3u);
  // Each key is on the primary the cluster says owns its slot (a GET on any
  // other node would answer MOVED), and the keys reached every primary.
  const std::vector<uint16_t> map = cluster_.slot_map();
  ASSERT_EQ(map.size(), 16384u);
  std::set<uint16_t> used;
  for (const std::string& k : keys) {
    const uint16_t slot = RedisRouter::key_slot(k);
    const auto direct = RedisCluster::query(RedisCluster::endpoint(map[slot]), {"GET", k});
    ASSERT_EQ(direct.error, RedisError::kNone) << k << ": " << direct.detail;
    EXPECT_EQ(direct.reply.text(), k + "=v");
    ASSERT_TRUE(router.owner(slot));
    EXPECT_EQ(router.owner(slot)->port, map[slot]);
    used.insert(map[slot]);
  }
  EXPECT_EQ(used.size(), 3u);
  EXPECT_NE(router.describe().find("16384/16384 slots mapped"), std::string::npos) << router.describe();
}

// A pipeline writes every command before it reads a reply: three BLPOPs
// that each wait 0.2 s on an empty list, one on each primary, take about
// 0.2 s together, not 0.6 s as one after the other would. Commands to one
// node come back in their order.
TEST_F(RedisRouterCluster, APipelineReachesEveryPrimaryAtOnceAndKeepsEachNodesOrder) {
  RedisRouter router({cluster_.endpoints().at(0)}, RedisLink::Options{.command_timeout = std::chrono::milliseconds(2000)});
  ASSERT_EQ(route(router, "warm", {"PING"}).error, RedisError::kNone);  // the map learned
  const std::vector<uint16_t> map = cluster_.slot_map();
  std::vector<std::string> keys;
  std::set<uint16_t> primaries;
  for (int i = 0; keys.size() < 3 && i < 1000; ++i) {
    const std::string k = "{wait:" + std::to_string(i) + "}";  // its counter below shares the tag
    if (primaries.insert(map[RedisRouter::key_slot(k)]).second) keys.push_back(k);
  }
  ASSERT_EQ(keys.size(), 3u);
  std::vector<std::vector<std::string_view>> argvs;
  for (const std::string& k : keys) argvs.push_back({"BLPOP", k, "0.2"});
  const std::string counter = keys[0] + ":n";
  const std::string_view set[] = {"SET", counter, "1"}, incr[] = {"INCR", counter};
  std::vector<RedisRouter::Routed> commands;
  for (size_t i = 0; i < keys.size(); ++i) commands.push_back({keys[i], argvs[i]});
  commands.push_back({set[1], set});
  commands.push_back({incr[1], incr});
  const auto began = std::chrono::steady_clock::now();
  const std::vector<RedisLink::Result> out = router.pipeline(commands, RedisLink::Clock::now());
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  ASSERT_EQ(out.size(), 5u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(out[i].error, RedisError::kNone) << out[i].detail;
    EXPECT_TRUE(out[i].reply.is_nil());  // timed out on an empty list
  }
  EXPECT_EQ(out[3].error, RedisError::kNone);
  ASSERT_EQ(out[4].error, RedisError::kNone) << out[4].detail;
  EXPECT_EQ(out[4].reply.integer(), 2);  // after the SET, on the same node
  EXPECT_GE(took, 0.19);
  EXPECT_LT(took, 0.45) << "the three waits were not at once";
  EXPECT_EQ(router.redirections(), 0u) << router.describe();
}

// A slot moved by hand as redis-cli --cluster reshard does it: the target
// IMPORTING, the source MIGRATING, the keys MIGRATEd, then SETSLOT NODE on
// every primary. Before the target imports, the two nodes send a new key
// back and forth: the router gives up after five redirections.
TEST_F(RedisRouterCluster, FollowsASlotMigration) {
  const uint16_t slot = RedisRouter::key_slot("mig");
  const auto src = cluster_.primary_of(slot);
  ASSERT_TRUE(src);
  RedisEndpoint dst, other;
  for (const RedisEndpoint& p : cluster_.primaries()) {
    if (p.port == src->port) continue;
    (dst.port == 0 ? dst : other) = p;
  }
  ASSERT_NE(dst.port, 0);
  ASSERT_NE(other.port, 0);
  const std::string src_id = id_of(*src), dst_id = id_of(dst), slot_text = std::to_string(slot);

  RedisRouter router({cluster_.endpoints().at(0)}, test_options());
  ASSERT_EQ(route(router, "{mig}:a", {"SET", "{mig}:a", "1"}).error, RedisError::kNone);
  ASSERT_EQ(route(router, "{mig}:b", {"SET", "{mig}:b", "2"}).error, RedisError::kNone);
  ASSERT_EQ(router.redirections(), 0u);

  // The source migrating, the target not (yet) importing: ASK, then MOVED
  // back, and so on.
  ASSERT_EQ(RedisCluster::query(*src, {"CLUSTER", "SETSLOT", slot_text, "MIGRATING", dst_id}).error, RedisError::kNone);
  const auto loop = route(router, "{mig}:new", {"SET", "{mig}:new", "3"});
  EXPECT_EQ(loop.error, RedisError::kServer);
  EXPECT_NE(loop.detail.find("more than 5 redirections"), std::string::npos) << loop.detail;
  EXPECT_EQ(router.redirections(), 5u);

  // Now the target imports: a key the source does not have goes there, once
  // (ASK), and the map still says the source.
  ASSERT_EQ(RedisCluster::query(dst, {"CLUSTER", "SETSLOT", slot_text, "IMPORTING", src_id}).error, RedisError::kNone);
  const auto asked = route(router, "{mig}:new", {"SET", "{mig}:new", "3"});
  ASSERT_EQ(asked.error, RedisError::kNone) << asked.detail;
  EXPECT_EQ(router.redirections(), 6u);
  ASSERT_TRUE(router.owner(slot));
  EXPECT_EQ(router.owner(slot)->port, src->port);
  {
    RedisLink on_dst(dst, test_options());  // ASKING holds for the next command on its connection
    const std::string_view asking[] = {"ASKING"}, get[] = {"GET", "{mig}:new"};
    ASSERT_EQ(on_dst.command(asking, Clock::now()).error, RedisError::kNone);
    const auto there = on_dst.command(get, Clock::now());
    ASSERT_EQ(there.error, RedisError::kNone) << there.detail;
    EXPECT_EQ(there.reply.text(), "3");
  }
  // A key the source still has is served there, no redirection.
  const auto still = route(router, "{mig}:a", {"GET", "{mig}:a"});
  ASSERT_EQ(still.error, RedisError::kNone) << still.detail;
  EXPECT_EQ(still.reply.text(), "1");
  EXPECT_EQ(router.redirections(), 6u);

  // The keys moved, the slot given to the target on every primary.
  const auto migrated = RedisCluster::query(
      *src, {"MIGRATE", "127.0.0.1", std::to_string(dst.port), "", "0", "5000", "KEYS", "{mig}:a", "{mig}:b"});
  ASSERT_EQ(migrated.error, RedisError::kNone) << migrated.detail;
  for (const RedisEndpoint& e : {dst, *src, other}) {
    const auto r = RedisCluster::query(e, {"CLUSTER", "SETSLOT", slot_text, "NODE", dst_id});
    ASSERT_EQ(r.error, RedisError::kNone) << e.to_string() << ": " << r.detail;
  }
  // MOVED: followed, and the slot's owner corrected at once...
  const uint64_t refreshes = router.map_refreshes();
  const auto moved = route(router, "{mig}:a", {"GET", "{mig}:a"});
  ASSERT_EQ(moved.error, RedisError::kNone) << moved.detail;
  EXPECT_EQ(moved.reply.text(), "1");
  EXPECT_EQ(router.redirections(), 7u);
  ASSERT_TRUE(router.owner(slot));
  EXPECT_EQ(router.owner(slot)->port, dst.port);
  // ...then the whole map refreshed before the next command, which goes
  // straight to the target, like every later one.
  const auto next = route(router, "{mig}:b", {"GET", "{mig}:b"});
  ASSERT_EQ(next.error, RedisError::kNone) << next.detail;
  EXPECT_EQ(next.reply.text(), "2");
  EXPECT_EQ(router.map_refreshes(), refreshes + 1);
  for (int i = 0; i < 50; ++i) {
    const std::string k = i % 2 == 0 ? "{mig}:new" : "other:" + std::to_string(i);
    ASSERT_EQ(route(router, k, {"GET", k}).error, RedisError::kNone) << k;
  }
  EXPECT_EQ(router.redirections(), 7u);
  EXPECT_EQ(router.map_refreshes(), refreshes + 1);
  ASSERT_TRUE(router.owner(slot));
  EXPECT_EQ(router.owner(slot)->port, dst.port);
}

// The primary of a key's slot killed: the router's commands fail (the
// caller would retry at its next sync) for a bounded time, each of them
// quickly, until the map it refreshes shows the promoted replica; the value
// written with WAIT 1 before the kill is there.
TEST_F(RedisRouterCluster, FindsThePromotedReplicaAfterItsPrimaryDies) {
  RedisRouter router({cluster_.endpoints().at(0), cluster_.endpoints().at(1)}, test_options());
  const std::string key = "{failover}:k";
  const uint16_t slot = RedisRouter::key_slot(key);
  ASSERT_EQ(route(router, key, {"SET", key, "kept"}).error, RedisError::kNone);
  // WAIT has no key: routed by the key, it runs on the connection the SET used.
  const auto waited = route(router, key, {"WAIT", "1", "2000"});
  ASSERT_EQ(waited.error, RedisError::kNone) << waited.detail;
  ASSERT_EQ(waited.reply.integer(), 1) << "the replica did not acknowledge the write";

  const auto killed = cluster_.kill_primary_of(slot);
  ASSERT_TRUE(killed);
  const uint64_t refreshes = router.map_refreshes();
  const auto start = Clock::now();
  int failures = 0;
  Clock::duration longest{};
  RedisLink::Result got;
  while (Clock::now() - start < 15s) {
    const auto before = Clock::now();
    got = route(router, key, {"GET", key});
    longest = std::max(longest, Clock::now() - before);
    if (got.error == RedisError::kNone) break;
    ++failures;
    EXPECT_TRUE(got.error == RedisError::kUnreachable || got.error == RedisError::kConnectionLost ||
                got.error == RedisError::kBackingOff ||
                (got.error == RedisError::kServer && got.detail.starts_with("CLUSTERDOWN")))
        << to_string(got.error) << ": " << got.detail;
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_EQ(got.error, RedisError::kNone)
      << "not served again within 15 s: " << got.detail << "; " << router.describe();
  EXPECT_EQ(got.reply.text(), "kept");
  EXPECT_GE(failures, 1);  // the first command after the kill cannot have reached the dead node
  EXPECT_LT(longest, 2s) << "one command took too long";
  EXPECT_GT(router.map_refreshes(), refreshes);
  ASSERT_TRUE(router.owner(slot));
  EXPECT_NE(router.owner(slot)->port, killed->port);
  // The cluster agrees: the slot's primary now is the one the router uses.
  ASSERT_TRUE(cluster_.wait_ok(10s)) << cluster_.error();
  ASSERT_TRUE(cluster_.primary_of(slot));
  EXPECT_EQ(cluster_.primary_of(slot)->port, router.owner(slot)->port);
  ASSERT_EQ(route(router, key, {"SET", key, "after"}).error, RedisError::kNone);
  std::printf(
      "failover: %d failed commands over %lld ms; %s\n", failures,
      static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count()),
      router.describe().c_str());
}

}  // namespace
}  // namespace sluice::control

// Replication of runs and credentials between boxes (control/cluster/cluster_replica.h)
// through a real redis-server: a change one box publishes reaches another at
// its next poll, never comes back to the box that made it, and a box that
// joins later catches up from the tables; a box whose credential secret is
// not the cluster's shares runs but no credential; changes wait for a Redis
// that went away and go out once it is back; what does not parse is refused
// and counted.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "control/cluster/cluster_replica.h"
#include "redis_server.h"

namespace sluice::control {
namespace {

using Clock = RedisLink::Clock;
using Change = ReplicaChange;

// A box's tables, as its registries would hold them, and what it was told.
struct Box {
  Box(const RedisEndpoint& e, const std::string& name, const std::string& fingerprint = "fp-1")
      : redis({e}, {}), replica(redis, "sluice:test", name, fingerprint, [this](const Change& c) { return apply(c); }) {}

  bool apply(const Change& c) {
    seen.push_back(c);
    auto& table = c.table == Change::Table::kRuns ? runs : c.table == Change::Table::kCredentials ? credentials : boxes;
    switch (c.op) {
      case Change::Op::kSet: table[c.field] = c.value; return true;
      case Change::Op::kDelete: table.erase(c.field); return true;
      case Change::Op::kReplace: table.clear(); [[fallthrough]];
      case Change::Op::kMerge:
        for (const auto& [f, v] : c.all) table[f] = v;
        return true;
    }
    return false;
  }
  bool poll() { return replica.poll(Clock::now()); }

  RedisRouter redis;
  ClusterReplica replica;
  std::map<std::string, std::string> runs, credentials, boxes;
  std::vector<Change> seen;
};

class ClusterReplicaTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server_.start()) << "could not start redis-server (scripts/install-deps.sh test)"; }
  RedisServer server_;
};

TEST_F(ClusterReplicaTest, AChangeReachesTheOtherBoxAtItsNextPollAndNeverComesBack) {
  Box a(server_.endpoint(), "a"), b(server_.endpoint(), "b");
  ASSERT_TRUE(a.poll());
  ASSERT_TRUE(b.poll());
  a.replica.publish({Change::Table::kRuns, Change::Op::kSet, "ci-42", "120", {}});
  a.replica.publish({Change::Table::kCredentials, Change::Op::kSet, "00112233445566778899aabbccddeeff", "alice", {}});
  ASSERT_TRUE(a.poll());
  EXPECT_TRUE(a.seen.empty());  // its own changes are not applied again
  EXPECT_EQ(a.replica.counters().published.load(), 2u);
  ASSERT_TRUE(b.poll());
  EXPECT_EQ(b.runs, (std::map<std::string, std::string>{{"ci-42", "120"}}));
  EXPECT_EQ(b.credentials.at("00112233445566778899aabbccddeeff"), "alice");
  EXPECT_EQ(b.replica.counters().applied.load(), 2u);
  // The end of the run, then nothing new.
  b.replica.publish({Change::Table::kRuns, Change::Op::kDelete, "ci-42", {}, {}});
  ASSERT_TRUE(b.poll());
  ASSERT_TRUE(a.poll());
  ASSERT_EQ(a.seen.size(), 1u);
  EXPECT_EQ(a.seen[0].op, Change::Op::kDelete);
  ASSERT_TRUE(a.poll());
  EXPECT_EQ(a.seen.size(), 1u);
}

// Penalty boxes travel on the stream alone: another box hears of a boxing
// and of its release; a box that joins later does not catch up on them
// (they end by themselves), and Redis keeps no table of them.
TEST_F(ClusterReplicaTest, PenaltyBoxesTravelOnTheStreamOnly) {
  Box a(server_.endpoint(), "a"), b(server_.endpoint(), "b");
  ASSERT_TRUE(a.poll());
  ASSERT_TRUE(b.poll());
  a.replica.publish({Change::Table::kPenalties, Change::Op::kSet, "boxed/penalty:00", "1000\tboxed\t198.18.0.7", {}});
  ASSERT_TRUE(a.poll());
  ASSERT_TRUE(b.poll());
  EXPECT_EQ(b.boxes, (std::map<std::string, std::string>{{"boxed/penalty:00", "1000\tboxed\t198.18.0.7"}}));
  a.replica.publish({Change::Table::kPenalties, Change::Op::kDelete, "boxed/penalty:00", {}, {}});
  ASSERT_TRUE(a.poll());
  ASSERT_TRUE(b.poll());
  EXPECT_TRUE(b.boxes.empty());
  Box late(server_.endpoint(), "late");
  ASSERT_TRUE(late.poll());
  EXPECT_TRUE(late.boxes.empty());
  EXPECT_EQ(late.replica.counters().refused.load(), 0u);
}

TEST_F(ClusterReplicaTest, ABoxThatJoinsLaterCatchesUpFromTheTables) {
  Box a(server_.endpoint(), "a");
  ASSERT_TRUE(a.poll());
  a.replica.publish({Change::Table::kRuns, Change::Op::kSet, "ci-1", "0", {}});
  a.replica.publish({Change::Table::kRuns, Change::Op::kSet, "ci-2", "60", {}});
  a.replica.publish({Change::Table::kRuns, Change::Op::kDelete, "ci-1", {}, {}});
  ASSERT_TRUE(a.poll());
  Box late(server_.endpoint(), "late");
  ASSERT_TRUE(late.poll());
  EXPECT_EQ(late.runs, (std::map<std::string, std::string>{{"ci-2", "60"}}));
  EXPECT_EQ(late.replica.counters().catch_ups.load(), 1u);
  // What came before the catch-up is not read again from the stream.
  const size_t seen = late.seen.size();
  ASSERT_TRUE(late.poll());
  EXPECT_EQ(late.seen.size(), seen);
}

TEST_F(ClusterReplicaTest, ALoadedCredentialFileReplacesTheOtherBoxesMaps) {
  Box a(server_.endpoint(), "a"), b(server_.endpoint(), "b");
  ASSERT_TRUE(a.poll());
  ASSERT_TRUE(b.poll());
  b.credentials["ffffffffffffffffffffffffffffffff"] = "old";
  Change load{Change::Table::kCredentials, Change::Op::kReplace, {}, {}, {}};
  load.all = {{"0000000000000000000000000000000a", "ann"}, {"0000000000000000000000000000000b", "bob"}};
  a.replica.publish(load);
  ASSERT_TRUE(a.poll());
  ASSERT_TRUE(b.poll());
  EXPECT_EQ(b.credentials, (std::map<std::string, std::string>{{"0000000000000000000000000000000a", "ann"},
                                                               {"0000000000000000000000000000000b", "bob"}}));
}

TEST_F(ClusterReplicaTest, ABoxWithAnotherCredentialSecretSharesRunsButNoCredential) {
  Box a(server_.endpoint(), "a", "fp-1"), other(server_.endpoint(), "other", "fp-2");
  ASSERT_TRUE(a.poll());  // the first box's fingerprint is the cluster's
  ASSERT_TRUE(other.poll());
  EXPECT_EQ(other.replica.counters().credentials_off.load(), 1u);
  EXPECT_EQ(a.replica.counters().credentials_off.load(), 0u);
  a.replica.publish({Change::Table::kCredentials, Change::Op::kSet, "00112233445566778899aabbccddeeff", "alice", {}});
  a.replica.publish({Change::Table::kRuns, Change::Op::kSet, "ci-7", "0", {}});
  other.replica.publish({Change::Table::kCredentials, Change::Op::kSet, "ffeeddccbbaa99887766554433221100", "eve", {}});
  ASSERT_TRUE(a.poll());
  ASSERT_TRUE(other.poll());
  ASSERT_TRUE(a.poll());
  EXPECT_TRUE(other.credentials.empty());
  EXPECT_EQ(other.runs.count("ci-7"), 1u);
  EXPECT_TRUE(a.credentials.empty());  // the other box's never went out
}

TEST_F(ClusterReplicaTest, ChangesWaitForRedisAndGoOutOnceItIsBack) {
  RedisLink::Options quick;
  quick.backoff_min = std::chrono::milliseconds(1);
  quick.backoff_max = std::chrono::milliseconds(2);
  RedisRouter redis({server_.endpoint()}, quick);
  std::vector<Change> none;
  ClusterReplica a(redis, "sluice:test", "a", "fp-1", [&](const Change& c) { none.push_back(c); return true; });
  ASSERT_TRUE(a.poll(Clock::now()));
  server_.stop();
  a.publish({Change::Table::kRuns, Change::Op::kSet, "ci-9", "30", {}});
  EXPECT_FALSE(a.poll(Clock::now()));
  EXPECT_EQ(a.counters().queued.load(), 1u);
  ASSERT_TRUE(server_.start());
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  bool sent = false;
  for (int i = 0; i < 50 && !sent; ++i) {
    sent = a.poll(Clock::now()) && a.counters().queued.load() == 0;
    if (!sent) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(sent);
  Box b(server_.endpoint(), "b");
  ASSERT_TRUE(b.poll());
  EXPECT_EQ(b.runs.at("ci-9"), "30");
}

TEST_F(ClusterReplicaTest, AChangeThatDoesNotParseIsRefusedAndCounted) {
  Box b(server_.endpoint(), "b");
  ASSERT_TRUE(b.poll());
  RedisLink raw(server_.endpoint(), {});
  const std::string stream = b.replica.stream_key();
  const std::string_view bad[] = {"XADD", stream, "*", "box", "x", "table", "passwords", "op", "set", "field", "f",
                                  "value", "v"};
  ASSERT_EQ(raw.command(bad, Clock::now()).error, RedisError::kNone);
  const std::string_view odd_op[] = {"XADD", stream, "*", "box", "x", "table", "runs", "op", "drop", "field", "f"};
  ASSERT_EQ(raw.command(odd_op, Clock::now()).error, RedisError::kNone);
  ASSERT_TRUE(b.poll());
  EXPECT_TRUE(b.seen.empty());
  EXPECT_EQ(b.replica.counters().refused.load(), 2u);
}

}  // namespace
}  // namespace sluice::control

// Live runs and the credential map, replicated between the boxes of a
// cluster through Redis. A change an operator makes on one box
// (run start or end, credential add or remove, a credential file loaded) is
// applied there first, as ever (journal, grace period), then published: one
// Lua script writes it into the cluster's copy of the table (a hash) and
// appends it to a change stream, atomically. Every box reads the stream at
// each sync interval and applies what other boxes changed through its own
// registries (journalled, RCU-published), so a change reaches every box
// within one sync interval plus a grace period once Redis answers. A box
// that (re)connects first catches up from the hashes: it adds what it lacks,
// and never ends a run or drops a credential it holds on that account.
//
// All keys share one hash tag, PREFIX:{repl}:*, so each script touches one
// Redis Cluster slot. Changes wait in a bounded queue while Redis cannot be
// reached; past the bound the oldest are dropped and counted.
//
// Credentials are replicated as their hashes, which mean the same on two
// boxes only if both keep the same credential secret (the state directory's
// credential.secret). Each box compares a fingerprint of its secret with the
// cluster's (the first box's) and replicates no credential, saying so, where
// they differ. Run tokens are kept in Redis as they are: Redis belongs on the
// boxes' private network, with its own ACL.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "control/cluster/redis_router.h"

namespace sluice::control {

struct ReplicaChange {
  // kPenalties: a key put in (kSet) or let out of (kDelete) a rule's
  // penalty box, for rules whose bucket the cluster shares. Stream only:
  // a box expires on its own, so a box that (re)connects catches up on
  // runs and credentials, not on boxes (it boxes a key again at its next
  // run of refusals).
  enum class Table : uint8_t { kRuns, kCredentials, kPenalties };
  enum class Op : uint8_t {
    kSet,      // field := value (a run's budget, a credential's user)
    kDelete,   // field removed
    kReplace,  // the whole table is `all` (a credential file loaded)
    kMerge,    // `all` added (a catch-up)
  };
  Table table = Table::kRuns;
  Op op = Op::kSet;
  std::string field, value;
  std::vector<std::pair<std::string, std::string>> all;
};

struct ReplicaCounters {
  std::atomic<uint64_t> published{0};      // changes of this box that reached Redis
  std::atomic<uint64_t> applied{0};        // changes of other boxes applied here
  std::atomic<uint64_t> refused{0};        // changes of other boxes this box could not apply
  std::atomic<uint64_t> dropped{0};        // changes of this box dropped from a full queue
  std::atomic<uint64_t> queued{0};         // now waiting for Redis
  std::atomic<uint64_t> catch_ups{0};
  std::atomic<uint64_t> credentials_off{0};  // 1: this box's credential secret is not the cluster's
};

class ClusterReplica {
 public:
  // Applies another box's change here; false if it could not be applied.
  using Apply = std::function<bool(const ReplicaChange&)>;
  static constexpr size_t kMaxQueued = 4096;
  static constexpr size_t kReadBatch = 256;

  // `box`: this box's name in the stream (its own changes are skipped);
  // `fingerprint`: of its credential secret.
  ClusterReplica(RedisRouter& redis, const std::string& prefix, std::string box, std::string fingerprint, Apply apply);

  // A change made here, to publish (any thread).
  void publish(ReplicaChange change);
  // Sends what waits, catches up if needed, applies what other boxes
  // changed. The cluster sync's thread; false on a Redis error.
  bool poll(RedisLink::Clock::time_point now);

  [[nodiscard]] const ReplicaCounters& counters() const noexcept { return counters_; }
  // What the last Redis command that failed said (the sync thread's).
  [[nodiscard]] const std::string& last_error() const noexcept { return last_error_; }
  [[nodiscard]] std::string stream_key() const { return prefix_ + ":{repl}:changes"; }
  [[nodiscard]] std::string table_key(ReplicaChange::Table t) const;

 private:
  [[nodiscard]] RedisLink::Result command(std::string_view key, std::span<const std::string_view> argv,
                                          RedisLink::Clock::time_point now);
  [[nodiscard]] bool send_queued(RedisLink::Clock::time_point now);
  [[nodiscard]] bool send(const ReplicaChange& c, RedisLink::Clock::time_point now);
  [[nodiscard]] bool catch_up(RedisLink::Clock::time_point now);
  [[nodiscard]] bool read_stream(RedisLink::Clock::time_point now);
  [[nodiscard]] bool read_table(ReplicaChange::Table t, ReplicaChange& out, RedisLink::Clock::time_point now);
  void apply_entry(const redisReply* fields);

  RedisRouter& redis_;
  std::string prefix_;
  std::string box_;
  std::string fingerprint_;
  Apply apply_;
  std::mutex queue_mutex_;  // publish() from the control thread, poll() from the sync thread
  std::deque<ReplicaChange> queue_;
  bool caught_up_ = false;
  bool credentials_on_ = false;
  std::string last_id_ = "0-0";
  RedisLink::Clock::time_point now_{};
  std::string last_error_;
  ReplicaCounters counters_;
};

}  // namespace sluice::control

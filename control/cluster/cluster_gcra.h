// The shared side of a GCRA budget held across several boxes (a bucket's
// `scope: cluster`): one theoretical arrival time (TAT) per bucket key in
// Redis, which every box advances by what it admitted since its last sync,
// atomically (one Lua script per batch), on Redis's own clock. The script
// answers, for each key, how far the shared TAT now runs ahead of that clock:
// all the boxes' spending together, which the box then publishes into its
// local table, so every box converges on the same budget within one sync
// interval.
//
// Times in Redis are microseconds (Lua's numbers are doubles: nanoseconds
// since the epoch would lose their last digits). A key expires once its
// bucket would be full again, plus a second.
//
// A sync goes through sync_groups(): one script per Redis node for all the
// hash-tag groups it holds, so a box pays one round trip per node and sync,
// not one per group. Each group keeps a change log (a stream,
// PREFIX:{gNNN}:log) of the TATs spends moved, by which box; a box reads the
// other boxes' entries since its cursor in the same script, and so learns
// what they spent on keys it did not spend on itself, without reading those
// keys. Each group also keeps a state (PREFIX:{gNNN}:epoch: an epoch, made
// when missing, and the log's last entry, so an unchanged log is not read):
// a new epoch tells the box that Redis lost the group (restarted empty), so
// the box seeds it again from what it knew.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "control/cluster/redis_link.h"
#include "control/cluster/redis_router.h"
#include "control/cluster/redis_script.h"

namespace sluice::control {

// What one box spent on one key since its last sync.
struct ClusterSpend {
  std::string key;         // the Redis key (the caller hash-tags keys that share a batch)
  uint64_t spent_us = 0;   // admitted requests times the bucket's emission interval, microseconds
  // The least the shared TAT's lead can be now (what the box last learned,
  // less the time since): Redis takes it where it holds less (emptied by a
  // restart, or a failover that lost the last writes). 0: nothing known.
  uint64_t floor_us = 0;
};

// One hash-tag group's part of a node's sync (sync_groups()).
struct GroupSync {
  std::string log_key;    // PREFIX:{gNNN}:log
  std::string epoch_key;  // PREFIX:{gNNN}:epoch, the group's state: "EPOCH LAST-LOG-ENTRY"
  // The last log entry the box has read; empty: none yet (start at the
  // log's end: what came before is known from the box's own spends); "-":
  // this call does not read the log (a group split over calls reads once).
  std::string cursor;
  std::vector<ClusterSpend> spends;

  // Answers.
  std::string epoch;             // the group's epoch
  std::string next_cursor;       // where the next read starts ("-" when not read)
  std::vector<int64_t> ahead_us;  // per spend, as apply() answers
  // Other boxes' log entries since the cursor: a key's name after
  // "PREFIX:{gNNN}:" and its TAT then, microseconds on Redis's clock.
  std::vector<std::pair<std::string, int64_t>> learned;
};

class ClusterGcra {
 public:
  // Log entries read per group and call, at most: a box that falls further
  // behind (a long stall) catches up over several syncs.
  static constexpr unsigned kMaxLogEntries = 64;
  // A group's log keeps about this many entries (XADD MAXLEN ~).
  static constexpr unsigned kLogLength = 1024;

  explicit ClusterGcra(RedisRouter& redis);

  // The keys of a batch must lie in one Redis Cluster slot (ClusterSync tags
  // them so). Adds each spend to its key's shared TAT (a TAT behind Redis's clock
  // starts from it: the bucket had filled) and fills `ahead_us`, one per
  // spend, with how far the shared TAT now runs ahead of that clock (0: the
  // bucket is full). A spend of 0 only reads. One round trip: the script is
  // loaded once (SCRIPT LOAD) and called by its digest, and loaded again
  // when the server has lost it (a restart, SCRIPT FLUSH, a failover). On an
  // error `ahead_us` is left empty and nothing is known to have been applied
  // (a lost connection may still have applied it: the caller counts the
  // spend again, which errs towards refusing).
  [[nodiscard]] RedisLink::Result apply(std::span<const ClusterSpend> batch, std::vector<int64_t>& ahead_us,
                                        RedisLink::Clock::time_point now);

  // One call for several groups on one node (all of them with a single
  // Redis; ClusterSync groups them by node_of()): each group's spends added
  // as apply() adds them, and logged under `box`, the other boxes' log
  // entries since each group's cursor read, and each group's epoch. The
  // keys of other groups than the first are reached through the
  // allow-cross-slot-keys flag (Redis 7), which a Redis Cluster honours only
  // for keys of the node the script runs on: a node that no longer holds
  // one answers a server error, and the caller sends the groups one by one.
  // `redis_now_us`: Redis's clock during the call. On an error the answers
  // are left empty and nothing is known to have been applied.
  [[nodiscard]] RedisLink::Result sync_groups(std::span<GroupSync> groups, std::string_view box,
                                              int64_t& redis_now_us, RedisLink::Clock::time_point now);
  // Several sync_groups() calls at once, each to its own node, pipelined
  // (RedisScript::run_many): every node's script runs while the others'
  // do, so a sync costs about one round trip, not one per node. One result
  // (and Redis clock, `redis_now_us[i]`) per call.
  [[nodiscard]] std::vector<RedisLink::Result> sync_calls(std::span<const std::span<GroupSync>> calls,
                                                          std::string_view box, std::span<int64_t> redis_now_us,
                                                          RedisLink::Clock::time_point now);

  // The node that holds `key`'s slot, as the router's map has it now: an
  // empty name for a single Redis, or a slot no node is known to serve.
  [[nodiscard]] std::string node_of(std::string_view key) const;

  [[nodiscard]] static std::string_view script() noexcept;
  [[nodiscard]] static std::string_view sync_script() noexcept;

 private:
  RedisRouter& redis_;
  RedisScript script_;
  RedisScript sync_script_;
};

}  // namespace sluice::control

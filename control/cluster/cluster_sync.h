// One sync of a box's cluster GCRA buckets: what the box admitted
// on each key since its last sync goes to Redis (ClusterGcra), and the lead
// every box together has given each key's shared arrival time comes back and
// is published into the box's own bucket table, so that no box's TAT for a
// key stays behind what all of them have spent. The workers go on deciding on
// the local table alone; a key converges within one sync interval.
//
// Keys in Redis: PREFIX:{gNNN}:BUCKET:K0K1 (hex), the hash tag grouping keys
// by k0 modulo kGroups so that a batch of one group lies in one Redis
// Cluster slot. The bucket keys must be made with the cluster's shared
// secret (LimiterState::cluster_hasher), and are named by their bucket's
// name, not its kind: boxes number their buckets each in their own way
// (kinds outlive reloads), so K1's low 16 bits, the kind, are left out.
//
// Rate buckets go in one call per Redis node (ClusterGcra::sync_calls, the
// nodes' calls pipelined), which also reads each group's change log: the
// other boxes' spends since the box's last read, published into its table
// for the keys it holds. So a box reads no key it did not spend on, a sync
// costs one round trip however many nodes, and one with nothing to send
// and no group due costs none. Calendar windows go a batch per group
// (ClusterWindow), as the caller sends them.
//
// Publishing only ever moves a TAT forward (compare-and-swap, like a
// charge), so spending the workers add meanwhile is never lost: it is in the
// local TAT, and goes out with the next sync. What a box last learned of a
// key goes back to Redis as a floor with its next spend on it, and for every
// key it knows when a group's epoch changes (Redis restarted empty), so a
// Redis that lost it is seeded again instead of handing out a budget twice.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "control/cluster/cluster_gcra.h"
#include "control/cluster/cluster_window.h"
#include "limiter/bucket_key.h"
#include "limiter/bucket_table.h"
#include "limiter/gcra.h"
#include "limiter/calendar_window.h"
#include "limiter/spend_log.h"

namespace sluice::control {

using limiter::KeySpend;  // spent 0 (and tokens 0): only read the shared state

// A kind's place in the cluster: the bucket's name (its keys' name in
// Redis) and whether it is a calendar window (cluster_window.h, with its
// span and offset) rather than a rate (cluster_gcra.h). An empty name: a
// kind the cluster does not share.
struct SharedBucket {
  std::string name;
  bool window = false;
  limiter::Calendar calendar{};
  SharedBucket() = default;
  SharedBucket(const char* n) : name(n) {}  // NOLINT: a list of names reads as such
  SharedBucket(std::string n, bool w = false, limiter::Calendar c = {})
      : name(std::move(n)), window(w), calendar(c) {}
};

class ClusterSync {
 public:
  // Hash tags: keys spread over this many groups. A Redis Cluster spreads
  // the groups' slots over its primaries, so 256 put some on each of 64
  // primaries (63 of 64 on average); a sync reaches each node in one call.
  static constexpr unsigned kGroups = 256;
  // Every group is read (its epoch, and its change log where that moved)
  // at every kReadEvery-th sync, the first one included; in between a sync
  // writes only to the groups it sends spends to. What other boxes spent
  // matters to this one where it spends, and its own spend's answer brings
  // it then; so a key the box left alone is fresh within kReadEvery
  // intervals (2 s at 20 ms), a Redis restarted empty is seeded again
  // within as long, and a quiet box costs Redis a call per kReadEvery
  // intervals. Reading the other boxes' log entries is much of what a sync
  // costs Redis (docs/cluster.md, "What one Redis serves").
  static constexpr uint64_t kReadEvery = 100;

  ClusterSync(limiter::BucketTable& table, ClusterGcra& gcra, ClusterWindow& window, std::string prefix);

  // `buckets[k]`: the cluster bucket of kind k (an empty name for a kind
  // that is not shared: its spends are ignored). Set again whenever the
  // policy changes.
  void set_buckets(std::vector<SharedBucket> buckets);

  struct Report {
    size_t sent = 0;       // keys whose spend reached Redis
    size_t published = 0;  // local TATs moved forward by the shared lead
    size_t learned = 0;    // of those, by other boxes' spends read from the change logs
    size_t calls = 0;      // round trips to Redis that answered
    size_t reseeded = 0;   // keys sent again as floors after Redis lost their group
    RedisError error = RedisError::kNone;  // the first batch that failed (later batches are still tried)
    std::string detail;
    std::vector<KeySpend> unsent;  // spends to count again at the next sync (their batch failed)
  };

  // Sends `spends` (grouped by hash tag, one round trip per group) and
  // publishes the leads, `box_now` being the box's clock (the table's) when
  // the sync began.
  [[nodiscard]] Report sync(std::span<const KeySpend> spends, limiter::Nanos box_now,
                            RedisLink::Clock::time_point now);

  // The `local-share` fallback, while Redis cannot be reached: each key is
  // charged `others` times what this box spent on it, as if every other box
  // spent as much, so that the box alone holds the budget divided by the
  // box count. Returns the keys charged.
  size_t share_locally(std::span<const KeySpend> spends, uint32_t others, limiter::Nanos box_now) noexcept;

  // Whether kind k is a shared bucket, and a calendar window.
  [[nodiscard]] bool shared(uint16_t kind) const noexcept {
    return kind < buckets_.size() && !buckets_[kind].name.empty();
  }
  [[nodiscard]] bool window(uint16_t kind) const noexcept { return shared(kind) && buckets_[kind].window; }
  // A window bucket's calendar (a UTC minute for any other kind).
  [[nodiscard]] limiter::Calendar calendar(uint16_t kind) const noexcept {
    return window(kind) ? buckets_[kind].calendar : limiter::Calendar{};
  }

  [[nodiscard]] std::string redis_key(const limiter::BucketKey& key) const;
  // A group's change log and epoch (ClusterGcra::sync_groups).
  [[nodiscard]] std::string log_key(unsigned group) const;
  [[nodiscard]] std::string epoch_key(unsigned group) const;
  // Spends per call at most: a bigger sync is cut (a group's log is read
  // with its first part), so no call holds Redis long, nor Lua's stack.
  static constexpr size_t kMaxCallSpends = 1024;
  // A window's key: PREFIX:{gNNN}:BUCKET:K0K1:MINUTE, the window's first
  // minute (for a minute window, the minute itself).
  [[nodiscard]] std::string redis_key(const limiter::BucketKey& key, uint32_t minute) const;

 private:
  // TAT := max(TAT, tat), as a charge would write it.
  [[nodiscard]] bool publish(const limiter::BucketKey& key, uint64_t tat) noexcept;
  // A window's counts for `minute` := at least the totals (never another
  // minute's word, never less than the box counted itself).
  [[nodiscard]] bool share_window_locally(const KeySpend& s, uint32_t others) noexcept;
  [[nodiscard]] bool publish_window(const limiter::BucketKey& key, uint32_t minute, uint64_t requests,
                                    uint64_t tokens) noexcept;
  // A part of a call: one group's spends (indices into the sync's spends,
  // or into `reseed`), whether its log is read.
  struct Part {
    unsigned group = 0;
    std::vector<size_t> spends;
    bool read = false;
  };
  // The rate buckets: every group, a call per node.
  void sync_rates(std::span<const KeySpend> spends, const std::array<std::vector<size_t>, kGroups>& groups,
                  limiter::Nanos box_now, RedisLink::Clock::time_point now, Report& report);
  // One call (its parts on one node), or several at once (pipelined, each
  // to its node), then each call's answer taken in.
  void call(std::span<const KeySpend> spends, const std::vector<Part>& parts, limiter::Nanos box_now,
            RedisLink::Clock::time_point now, Report& report);
  void run(std::span<const KeySpend> spends, const std::vector<std::vector<Part>>& calls, limiter::Nanos box_now,
           RedisLink::Clock::time_point now, Report& report);
  [[nodiscard]] std::vector<GroupSync> prepare(std::span<const KeySpend> spends, const std::vector<Part>& parts,
                                               limiter::Nanos box_now);
  void answer(std::span<const KeySpend> spends, const std::vector<Part>& parts, const std::vector<GroupSync>& batch,
              const RedisLink::Result& r, int64_t redis_now_us, limiter::Nanos box_now,
              RedisLink::Clock::time_point now, Report& report);
  // The keys this box knows a lead of in groups whose epoch changed, sent
  // again as floors (spends of 0).
  void reseed(std::span<const KeySpend> spends, limiter::Nanos box_now, RedisLink::Clock::time_point now,
              Report& report);
  // TAT := max(TAT, tat) for a key the table holds already: what other
  // boxes spent matters only where this box meets the key.
  [[nodiscard]] bool publish_held(const limiter::BucketKey& key, uint64_t tat) noexcept;
  // A name from a change log ("BUCKET:K0K1") back to the box's key.
  [[nodiscard]] bool key_of(std::string_view name, unsigned group, limiter::BucketKey& key) const;
  void sync_windows(std::span<const KeySpend> spends, const std::vector<size_t>& group,
                    RedisLink::Clock::time_point now, Report& report);
  static void failed(const RedisLink::Result& r, std::span<const KeySpend> spends, const std::vector<size_t>& group,
                     Report& report);

  // Each rate key's shared TAT as last learned from Redis, on the box's
  // clock: sent back as the floor Redis takes where it holds less (an empty
  // restart, a failover that lost writes), so no budget is handed out
  // twice. Expired entries go when met, and all at once past kMaxKnown.
  struct KnownHash {
    size_t operator()(const limiter::BucketKey& k) const noexcept { return static_cast<size_t>(k.k0 ^ (k.k1 * 0x9e3779b97f4a7c15ull)); }
  };
  static constexpr size_t kMaxKnown = size_t{1} << 17;
  [[nodiscard]] uint64_t floor_us(const limiter::BucketKey& key, limiter::Nanos box_now);
  void learn(const limiter::BucketKey& key, limiter::Nanos tat, limiter::Nanos box_now);

  std::unordered_map<limiter::BucketKey, limiter::Nanos, KnownHash> known_;
  uint64_t syncs_ = 0;  // for kReadEvery
  std::string box_id_;  // this box in the change logs: random, per process
  std::array<std::string, kGroups> cursor_;  // per group: the last log entry read
  std::array<std::string, kGroups> epoch_;   // per group: its epoch when last synced
  std::array<bool, kGroups> reseed_{};       // per group: Redis lost it, seed it again
  std::unordered_map<std::string, uint16_t> rate_kinds_;  // a rate bucket's name -> its kind here
  limiter::BucketTable& table_;
  ClusterGcra& gcra_;
  ClusterWindow& window_;
  std::string prefix_;
  std::vector<SharedBucket> buckets_;
};

}  // namespace sluice::control

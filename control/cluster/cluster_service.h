// The cluster sync's own thread in sluiced: every sync interval it
// turns over each worker's spend log (limiter/spend_log.h), adds up what the
// box admitted per `scope: cluster` key, sends it to Redis and publishes the
// shared lead back into the box's table (ClusterSync). What the other boxes
// spent on keys this box holds comes back from the hash-tag groups' change
// logs in the same round trip, so a client that moves to this box meets the
// budget the others left, not a full bucket, and no idle key is read. Keys
// the box spent on lately stay watched: their spends are held there until
// Redis has them (retries, the fallback, repayment).
//
// When Redis cannot be reached, a spend is tried once more at the next sync
// (a blip costs nothing), then the fallback takes it: `local-share` charges
// it again locally times the other boxes (ClusterSync::share_locally), so the
// box alone holds its share of the budget; `local-full` lets the box use the
// whole budget. Once Redis answers again, the boxes converge within an
// interval. Every transition is counted and said once in the log.
//
// Never on a worker: the workers only write their logs.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "control/cluster/cluster_gcra.h"
#include "control/cluster/cluster_replica.h"
#include "control/cluster/cluster_sync.h"
#include "control/cluster/redis_link.h"
#include "limiter/bucket_table.h"
#include "limiter/spend_log.h"
#include "policy/policy.h"

namespace sluice::control {

// What the service did, for `sluicectl stats` and the metrics (any thread).
struct ClusterCounters {
  std::atomic<uint64_t> syncs{0};
  std::atomic<uint64_t> sync_failures{0};   // syncs with a batch that failed
  std::atomic<uint64_t> keys_sent{0};       // key spends (and reads) Redis applied
  std::atomic<uint64_t> keys_published{0};  // local TATs moved forward by the shared lead
  std::atomic<uint64_t> keys_learned{0};    // of those, by other boxes' spends from the change logs
  std::atomic<uint64_t> keys_reseeded{0};   // floors sent again after Redis lost a group (an empty restart)
  std::atomic<uint64_t> round_trips{0};     // calls to Redis that answered (budgets; not runs and credentials)
  std::atomic<uint64_t> keys_watched{0};    // now
  std::atomic<uint64_t> fallback_keys{0};   // spends the fallback took
  std::atomic<uint64_t> repaid_keys{0};     // keys whose spends made in fallback reached Redis afterwards
  std::atomic<uint64_t> fallbacks{0};       // times the box went into fallback
  std::atomic<uint64_t> in_fallback{0};     // 1 while in fallback
  std::atomic<uint64_t> last_sync_us{0};    // how long the last sync took
  std::atomic<uint64_t> last_sync_keys{0};  // keys the last sync sent (spends and reads)
  std::atomic<uint64_t> max_sync_us{0};
  std::atomic<uint64_t> sync_us_total{0};
};

class ClusterService {
 public:
  using Clock = RedisLink::Clock;
  struct Setup {
    policy::ClusterSpec spec;
    limiter::BucketTable* table = nullptr;
    std::vector<limiter::SpendLog*> logs;            // one per worker
    std::function<void()> wait_for_readers;          // returns once every worker passed a quiescent state
    std::function<limiter::Nanos()> box_clock;       // the table's clock
    std::function<std::vector<SharedBucket>()> bucket_names;  // per kind: the cluster bucket, or an empty name
    RedisLink::Options redis;
    // Replication of runs and credentials (cluster_replica.h): how another
    // box's change is applied here (none: no replication), this box's name
    // in the change stream, the fingerprint of its credential secret.
    ClusterReplica::Apply apply_change;
    std::string box;
    std::string credential_fingerprint;
  };

  explicit ClusterService(Setup setup);
  ~ClusterService();

  // Tokens charged to a cluster window by the control plane (usage.report,
  // DQ05), for the next sync (any thread).
  void record_tokens(const limiter::BucketKey& key, uint32_t minute, uint64_t tokens);

  // A change made on this box, for the other boxes (any thread).
  void publish(ReplicaChange change);
  [[nodiscard]] const ClusterReplica* replica() const noexcept { return replica_.get(); }

  // One sync. Returns false if a batch failed.
  bool step(Clock::time_point now);
  // Steps every sync interval until `stop`.
  void serve(const std::atomic<bool>& stop);

  [[nodiscard]] const ClusterCounters& counters() const noexcept { return counters_; }
  [[nodiscard]] const policy::ClusterSpec& spec() const noexcept { return setup_.spec; }
  // This box's name in the change stream.
  [[nodiscard]] const std::string& box() const noexcept { return setup_.box; }
  // Admissions the workers' logs could not hold.
  [[nodiscard]] uint64_t lost_records() const noexcept;
  // The last error, one line (empty once a sync went through).
  [[nodiscard]] std::string last_error() const;

  // Keys are dropped from the watch once Redis has their spends and the box
  // has not spent on them for this long; at most this many are watched.
  static constexpr limiter::Nanos kWatchFor = limiter::Nanos{2'000'000'000};
  static constexpr size_t kMaxWatched = 1 << 16;
  // Other boxes' runs and credentials are read at every kReplicaEvery-th
  // sync (the first one included), and whenever this box has its own to send.
  static constexpr uint64_t kReplicaEvery = 5;
  // Reads of watched windows the box spent nothing on, per sync, at most
  // (rate keys are never read idle).
  static constexpr size_t kMaxIdleReads = 2048;

 private:
  struct KeyHash {
    size_t operator()(const limiter::BucketKey& k) const noexcept { return k.k0 ^ (k.k1 >> 16); }
  };
  struct Watched {
    limiter::Nanos spent = 0;       // not yet in Redis (a window: requests): since the last sync that reached it
    uint64_t tokens = 0;            // a window's, likewise
    uint32_t minute = 0;            // a window's: the minute they were counted in
    limiter::Nanos last_spent = 0;  // box clock
    bool retried = false;           // its spend failed once already
    // Of `spent` and `tokens`, what the fallback has charged to the local
    // share already: each spend is charged there once, and all of it still
    // goes to Redis when it answers again.
    limiter::Nanos shared = 0;
    uint64_t shared_tokens = 0;
  };

  void collect(limiter::Nanos box_now);
  void add(const KeySpend& s, limiter::Nanos box_now);
  void settle(const ClusterSync::Report& report, const std::vector<KeySpend>& sent, limiter::Nanos box_now);
  void enter_fallback(const std::string& why);
  void leave_fallback();
  void note_time(Clock::duration took) noexcept;

  Setup setup_;
  RedisRouter redis_;
  ClusterGcra gcra_;
  ClusterWindow window_;
  ClusterSync sync_;
  std::unique_ptr<ClusterReplica> replica_;
  std::unordered_map<limiter::BucketKey, Watched, KeyHash> watched_;
  std::vector<KeySpend> drained_;
  std::vector<KeySpend> unwatched_;  // spends of keys past kMaxWatched: sent once
  std::mutex control_spends_mutex_;
  std::vector<KeySpend> control_spends_;  // record_tokens()'s, taken by collect()
  uint64_t sync_count_ = 0;
  ClusterCounters counters_;
  mutable std::mutex error_mutex_;  // the control socket reads last_error_ while the service writes it
  std::string last_error_;
  std::string last_failure_;  // the last failure that was not a back-off (sync thread only)
};

}  // namespace sluice::control

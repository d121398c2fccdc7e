// One sync of a box's cluster GCRA buckets (issue 17): what the box admitted
// on each key since its last sync goes to Redis (ClusterGcra), and the lead
// every box together has given each key's shared arrival time comes back and
// is published into the box's own bucket table, so that no box's TAT for a
// key stays behind what all of them have spent. The workers go on deciding on
// the local table alone; a key converges within one sync interval.
//
// Keys in Redis: PREFIX:{gNN}:K0K1 (hex), the hash tag grouping keys by the
// low bits of k0 so that a batch of one group lies in one Redis Cluster slot.
// The bucket keys must be made with a hasher secret every box shares, and the
// buckets numbered alike (the same policy), or boxes would not meet on a key.
//
// Publishing only ever moves a TAT forward (compare-and-swap, like a
// charge), so spending the workers add meanwhile is never lost: it is in the
// local TAT, and goes out with the next sync.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "control/cluster_gcra.h"
#include "limiter/bucket_key.h"
#include "limiter/bucket_table.h"
#include "limiter/gcra.h"

namespace sluice::control {

// Requests a box admitted on one key since its last sync.
struct KeySpend {
  limiter::BucketKey key;
  uint64_t admitted = 0;  // 0: only read the shared lead
};

class ClusterSync {
 public:
  // Hash tags: keys spread over this many groups, a batch per group.
  static constexpr unsigned kGroups = 16;

  // `intervals[k]`: bucket kind k's emission interval (what one admitted
  // request adds to a TAT); 0 for a kind that is not a cluster GCRA bucket.
  ClusterSync(limiter::BucketTable& table, ClusterGcra& gcra, std::string prefix,
              std::vector<limiter::Nanos> intervals);

  struct Report {
    size_t sent = 0;       // keys whose spend reached Redis
    size_t published = 0;  // local TATs moved forward by the shared lead
    RedisError error = RedisError::kNone;  // the first batch that failed (later batches are still tried)
    std::string detail;
    std::vector<KeySpend> unsent;  // spends to count again at the next sync (their batch failed)
  };

  // Sends `spends` (grouped by hash tag, one round trip per group) and
  // publishes the leads, `box_now` being the box's clock (the table's) when
  // the sync began.
  [[nodiscard]] Report sync(std::span<const KeySpend> spends, limiter::Nanos box_now,
                            RedisLink::Clock::time_point now);

  [[nodiscard]] std::string redis_key(const limiter::BucketKey& key) const;

 private:
  // TAT := max(TAT, tat), as a charge would write it.
  [[nodiscard]] bool publish(const limiter::BucketKey& key, uint64_t tat) noexcept;

  limiter::BucketTable& table_;
  ClusterGcra& gcra_;
  std::string prefix_;
  std::vector<limiter::Nanos> intervals_;
};

}  // namespace sluice::control

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

class ClusterGcra {
 public:
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

  [[nodiscard]] static std::string_view script() noexcept;

 private:
  RedisRouter& redis_;
  RedisScript script_;
};

}  // namespace sluice::control

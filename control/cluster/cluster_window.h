// The shared side of a calendar-minute window held across several boxes
// (`scope: cluster` on a `window: minute` bucket, DQ02-DQ05): one
// Redis hash per key and minute, its requests and its tokens, to which every
// box adds what it counted since its last sync (HINCRBY, one Lua script per
// batch); the totals come back, and the box takes them as its own counts for
// that minute. A key's hash expires two minutes after it was last added to:
// a minute over is never read again.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "control/cluster/redis_router.h"
#include "control/cluster/redis_script.h"

namespace sluice::control {

struct WindowSpend {
  std::string key;        // the Redis key (the minute in it); a batch's keys share a slot
  uint64_t requests = 0;  // counted since the last sync (0 and 0: only read)
  uint64_t tokens = 0;
  uint64_t ttl_ms = 120'000;  // how long the key outlives its last write
};

struct WindowTotal {
  uint64_t requests = 0;
  uint64_t tokens = 0;
};

class ClusterWindow {
 public:
  explicit ClusterWindow(RedisRouter& redis);

  // Adds each spend and fills `totals`, one per spend, with what every box
  // together has counted in that minute. On an error `totals` is empty.
  [[nodiscard]] RedisLink::Result apply(std::span<const WindowSpend> batch, std::vector<WindowTotal>& totals,
                                        RedisLink::Clock::time_point now);

 private:
  RedisRouter& redis_;
  RedisScript script_;
};

}  // namespace sluice::control

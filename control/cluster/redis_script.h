// A Lua script run by its digest (EVALSHA) on the node that owns its keys'
// slot, loaded there first (SCRIPT LOAD) and again whenever a node answers
// NOSCRIPT: it restarted, was flushed or failed over, or is another node of
// the cluster, where a script loaded elsewhere does not exist. The cluster
// budgets' scripts (cluster_gcra.h, cluster_window.h) run through it.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "control/cluster/redis_router.h"

namespace sluice::control {

class RedisScript {
 public:
  explicit RedisScript(std::string_view text) : text_(text) {}

  // EVALSHA with `keys` (all in one slot) and `args`; one round trip unless
  // the node must load the script first.
  [[nodiscard]] RedisLink::Result run(RedisRouter& redis, std::span<const std::string_view> keys,
                                      std::span<const std::string_view> args, RedisLink::Clock::time_point now);

  // Several runs at once (RedisRouter::pipeline): each call's keys in one
  // slot, the calls on any nodes. One result per call, in their order.
  struct Call {
    std::span<const std::string_view> keys;
    std::span<const std::string_view> args;
  };
  [[nodiscard]] std::vector<RedisLink::Result> run_many(RedisRouter& redis, std::span<const Call> calls,
                                                        RedisLink::Clock::time_point now);
  [[nodiscard]] std::string_view text() const noexcept { return text_; }

 private:
  [[nodiscard]] RedisLink::Result load(RedisRouter& redis, std::string_view routing_key,
                                       RedisLink::Clock::time_point now);

  std::string_view text_;
  std::string sha1_;  // the script's digest, once a node has loaded it (the same on every node)
};

}  // namespace sluice::control

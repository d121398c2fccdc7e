// See redis_script.h.
#include "control/cluster/redis_script.h"

#include <vector>

namespace sluice::control {

RedisLink::Result RedisScript::load(RedisRouter& redis, std::string_view routing_key,
                                    RedisLink::Clock::time_point now) {
  const std::string_view argv[] = {"SCRIPT", "LOAD", text_};
  RedisLink::Result r = redis.command(routing_key, argv, now);
  if (r.error == RedisError::kNone) {
    if (r.reply.text().size() != 40) {
      r.error = RedisError::kProtocol;
      r.detail = "SCRIPT LOAD did not answer with a SHA-1";
    } else {
      sha1_ = std::string(r.reply.text());
    }
  }
  return r;
}

RedisLink::Result RedisScript::run(RedisRouter& redis, std::span<const std::string_view> keys,
                                   std::span<const std::string_view> args, RedisLink::Clock::time_point now) {
  if (keys.empty()) return {};
  const std::string count = std::to_string(keys.size());
  RedisLink::Result r;
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (sha1_.empty()) {
      r = load(redis, keys.front(), now);
      if (r.error != RedisError::kNone) return r;
    }
    std::vector<std::string_view> argv = {"EVALSHA", sha1_, count};
    argv.insert(argv.end(), keys.begin(), keys.end());
    argv.insert(argv.end(), args.begin(), args.end());
    r = redis.command(keys.front(), argv, now);
    // The node lost the script, or never had it: load it there, once.
    if (r.error == RedisError::kServer && r.detail.starts_with("NOSCRIPT")) {
      sha1_.clear();
      continue;
    }
    break;
  }
  return r;
}

}  // namespace sluice::control

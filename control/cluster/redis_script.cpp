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

std::vector<RedisLink::Result> RedisScript::run_many(RedisRouter& redis, std::span<const Call> calls,
                                                    RedisLink::Clock::time_point now) {
  std::vector<RedisLink::Result> out(calls.size());
  if (calls.empty()) return out;
  if (sha1_.empty()) {
    const RedisLink::Result loaded = load(redis, calls.front().keys.front(), now);
    if (loaded.error != RedisError::kNone) {
      for (RedisLink::Result& o : out) o = RedisLink::Result{loaded.error, loaded.detail, {}};
      return out;
    }
  }
  const std::string sha1 = sha1_;
  std::vector<std::string> counts;
  counts.reserve(calls.size());
  std::vector<std::vector<std::string_view>> argvs(calls.size());
  std::vector<RedisRouter::Routed> routed;
  for (size_t i = 0; i < calls.size(); ++i) {
    counts.push_back(std::to_string(calls[i].keys.size()));
    argvs[i] = {"EVALSHA", sha1, counts.back()};
    argvs[i].insert(argvs[i].end(), calls[i].keys.begin(), calls[i].keys.end());
    argvs[i].insert(argvs[i].end(), calls[i].args.begin(), calls[i].args.end());
    routed.push_back({calls[i].keys.front(), argvs[i]});
  }
  out = redis.pipeline(routed, now);
  // A node that lost the script, or never had it: that call alone, which
  // loads it there first.
  for (size_t i = 0; i < calls.size(); ++i) {
    if (out[i].error != RedisError::kServer || !out[i].detail.starts_with("NOSCRIPT")) continue;
    sha1_.clear();
    out[i] = run(redis, calls[i].keys, calls[i].args, now);
  }
  return out;
}

}  // namespace sluice::control

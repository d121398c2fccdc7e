// See cluster_gcra.h.
#include "control/cluster_gcra.h"

#include <string_view>

namespace sluice::control {
namespace {

// KEYS[i]: a bucket's shared TAT, microseconds on Redis's clock.
// ARGV[i]: what a box spent on it since its last sync, microseconds.
// Returns, per key, the TAT's lead over Redis's clock after the spend.
constexpr std::string_view kScript = R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local ahead = {}
for i, key in ipairs(KEYS) do
  local spent = tonumber(ARGV[i])
  local tat = tonumber(redis.call('GET', key) or now)
  if tat < now then tat = now end
  if spent > 0 then
    tat = tat + spent
    redis.call('SET', key, string.format('%d', tat), 'PX', math.floor((tat - now) / 1000) + 1000)
  end
  ahead[i] = tat - now
end
return ahead
)lua";

}  // namespace

std::string_view ClusterGcra::script() noexcept { return kScript; }

RedisLink::Result ClusterGcra::load(std::string_view routing_key, RedisLink::Clock::time_point now) {
  const std::string_view argv[] = {"SCRIPT", "LOAD", kScript};
  RedisLink::Result r = redis_.command(routing_key, argv, now);
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

RedisLink::Result ClusterGcra::apply(std::span<const ClusterSpend> batch, std::vector<int64_t>& ahead_us,
                                     RedisLink::Clock::time_point now) {
  ahead_us.clear();
  if (batch.empty()) return {};
  std::vector<std::string> spent;
  spent.reserve(batch.size());
  for (const ClusterSpend& s : batch) spent.push_back(std::to_string(s.spent_us));
  const std::string keys = std::to_string(batch.size());
  RedisLink::Result r;
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (sha1_.empty()) {
      r = load(batch.front().key, now);
      if (r.error != RedisError::kNone) return r;
    }
    std::vector<std::string_view> argv = {"EVALSHA", sha1_, keys};
    for (const ClusterSpend& s : batch) argv.push_back(s.key);
    for (const std::string& v : spent) argv.push_back(v);
    r = redis_.command(batch.front().key, argv, now);
    // The node lost the script (restarted, flushed, failed over), or never
    // had it (another node of the cluster): load it there, once.
    if (r.error == RedisError::kServer && r.detail.starts_with("NOSCRIPT")) {
      sha1_.clear();
      continue;
    }
    break;
  }
  if (r.error != RedisError::kNone) return r;
  if (r.reply.elements() != batch.size()) {
    r.error = RedisError::kProtocol;
    r.detail = "the script answered " + std::to_string(r.reply.elements()) + " values for " +
               std::to_string(batch.size()) + " keys";
    return r;
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    const redisReply* e = r.reply.element(i);
    if (!reply_is_integer(e)) {
      r.error = RedisError::kProtocol;
      r.detail = "the script answered a value that is not an integer";
      ahead_us.clear();
      return r;
    }
    ahead_us.push_back(reply_integer(e));
  }
  return r;
}

}  // namespace sluice::control

// See cluster_gcra.h.
#include "control/cluster/cluster_gcra.h"

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

ClusterGcra::ClusterGcra(RedisRouter& redis) : redis_(redis), script_(kScript) {}

std::string_view ClusterGcra::script() noexcept { return kScript; }

RedisLink::Result ClusterGcra::apply(std::span<const ClusterSpend> batch, std::vector<int64_t>& ahead_us,
                                     RedisLink::Clock::time_point now) {
  ahead_us.clear();
  if (batch.empty()) return {};
  std::vector<std::string> spent;
  spent.reserve(batch.size());
  for (const ClusterSpend& s : batch) spent.push_back(std::to_string(s.spent_us));
  std::vector<std::string_view> keys, args;
  for (const ClusterSpend& s : batch) keys.push_back(s.key);
  for (const std::string& v : spent) args.push_back(v);
  RedisLink::Result r = script_.run(redis_, keys, args, now);
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

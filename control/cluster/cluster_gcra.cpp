// See cluster_gcra.h.
#include "control/cluster/cluster_gcra.h"

#include <string_view>

namespace sluice::control {
namespace {

// KEYS[i]: a bucket's shared TAT, microseconds on Redis's clock.
// ARGV[2i-1]: what a box spent on it since its last sync, microseconds.
// ARGV[2i]: the lead the box last learned for it, less the time since: the
// least the shared TAT can be. A Redis that restarted empty (or a replica
// promoted before the last writes reached it) is seeded from it again
// rather than handing the budget out afresh; otherwise the TAT is past it.
// Returns, per key, the TAT's lead over Redis's clock after the spend.
constexpr std::string_view kScript = R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local ahead = {}
for i, key in ipairs(KEYS) do
  local spent = tonumber(ARGV[2 * i - 1])
  local floor = now + tonumber(ARGV[2 * i])
  local stored = redis.call('GET', key)
  local tat = tonumber(stored or now)
  if tat < now then tat = now end
  local seeded = tat < floor
  if seeded then tat = floor end
  if spent > 0 or seeded then
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
  std::vector<std::string> values;
  values.reserve(2 * batch.size());
  for (const ClusterSpend& s : batch) {
    values.push_back(std::to_string(s.spent_us));
    values.push_back(std::to_string(s.floor_us));
  }
  std::vector<std::string_view> keys, args;
  for (const ClusterSpend& s : batch) keys.push_back(s.key);
  for (const std::string& v : values) args.push_back(v);
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

// See cluster_window.h.
#include "control/cluster/cluster_window.h"

#include <hiredis/hiredis.h>

namespace sluice::control {
namespace {

// KEYS[i]: a key's window. ARGV[3i-2], ARGV[3i-1]: requests and tokens a box
// counted since its last sync; ARGV[3i]: the key's expiry, milliseconds.
// Returns the totals, two per key. A read (0, 0) writes nothing, so it
// never makes a key without an expiry.
constexpr std::string_view kScript = R"lua(
local out = {}
for i, key in ipairs(KEYS) do
  local r = tonumber(ARGV[3 * i - 2])
  local t = tonumber(ARGV[3 * i - 1])
  local req, tok
  if r > 0 or t > 0 then
    req = redis.call('HINCRBY', key, 'r', r)
    tok = redis.call('HINCRBY', key, 't', t)
    redis.call('PEXPIRE', key, ARGV[3 * i])
  else
    local v = redis.call('HMGET', key, 'r', 't')
    req = tonumber(v[1] or 0)
    tok = tonumber(v[2] or 0)
  end
  out[2 * i - 1] = req
  out[2 * i] = tok
end
return out
)lua";

// Counts past this are saturated before they go out: Redis's integers are
// signed 64-bit, and a window's count stops at 2^32 - 1 anyway.
constexpr uint64_t kMaxCount = uint64_t{1} << 40;

}  // namespace

ClusterWindow::ClusterWindow(RedisRouter& redis) : redis_(redis), script_(kScript) {}

RedisLink::Result ClusterWindow::apply(std::span<const WindowSpend> batch, std::vector<WindowTotal>& totals,
                                       RedisLink::Clock::time_point now) {
  totals.clear();
  if (batch.empty()) return {};
  std::vector<std::string> counts;
  counts.reserve(3 * batch.size());
  for (const WindowSpend& s : batch) {
    counts.push_back(std::to_string(std::min(s.requests, kMaxCount)));
    counts.push_back(std::to_string(std::min(s.tokens, kMaxCount)));
    counts.push_back(std::to_string(s.ttl_ms));
  }
  std::vector<std::string_view> keys, args(counts.begin(), counts.end());
  for (const WindowSpend& s : batch) keys.push_back(s.key);
  RedisLink::Result r = script_.run(redis_, keys, args, now);
  if (r.error != RedisError::kNone) return r;
  if (r.reply.elements() != 2 * batch.size()) {
    r.error = RedisError::kProtocol;
    r.detail = "the window script answered " + std::to_string(r.reply.elements()) + " values for " +
               std::to_string(batch.size()) + " keys";
    return r;
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    const redisReply* req = r.reply.element(2 * i);
    const redisReply* tok = r.reply.element(2 * i + 1);
    if (!reply_is_integer(req) || !reply_is_integer(tok) || reply_integer(req) < 0 || reply_integer(tok) < 0) {
      r.error = RedisError::kProtocol;
      r.detail = "the window script answered a count that is not a whole number";
      totals.clear();
      return r;
    }
    totals.push_back({static_cast<uint64_t>(reply_integer(req)), static_cast<uint64_t>(reply_integer(tok))});
  }
  return r;
}

}  // namespace sluice::control

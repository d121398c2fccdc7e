// See cluster_gcra.h.
#include "control/cluster/cluster_gcra.h"

#include <hiredis/hiredis.h>

#include <charconv>
#include <optional>
#include <string_view>

namespace sluice::control {
namespace {

// One key's spend, both scripts' core: the TAT (microseconds on Redis's
// clock, `now`) moved by `spent`, first raised to `floor` where Redis holds
// less (a Redis that restarted empty, or a replica promoted before the last
// writes reached it, is seeded again rather than handing the budget out
// afresh). Written, to expire once the bucket is full again plus a second,
// only when it moved. Returns the TAT and whether it moved.
constexpr std::string_view kSpendFunction = R"lua(
local function spend(key, spent, floor, now)
  local tat = tonumber(redis.call('GET', key) or now)
  if tat < now then tat = now end
  local seeded = tat < floor
  if seeded then tat = floor end
  local moved = spent > 0 or seeded
  if moved then
    tat = tat + spent
    redis.call('SET', key, string.format('%d', tat), 'PX', math.floor((tat - now) / 1000) + 1000)
  end
  return tat, moved
end
)lua";

// apply(): KEYS[i], a bucket's shared TAT; ARGV[2i-1], what a box spent on
// it since its last sync (microseconds); ARGV[2i], the lead the box last
// learned for it less the time since: the least the shared TAT can be.
// Returns, per key, the TAT's lead over Redis's clock after the spend.
constexpr std::string_view kScriptBody = R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local ahead = {}
for i, key in ipairs(KEYS) do
  local tat = spend(key, tonumber(ARGV[2 * i - 1]), now + tonumber(ARGV[2 * i]), now)
  ahead[i] = tat - now
end
return ahead
)lua";

// A node's sync (sync_groups()). KEYS[1]: the first group's log, which
// routes the call; every other key comes in ARGV and is reached through
// allow-cross-slot-keys. ARGV: box, group count, "mget" where one command
// may read keys of several slots (a single Redis; a Redis Cluster refuses
// it even here) or "get", then per group its log,
// state key, cursor, spend count and the length of "PREFIX:{gNNN}:", then per
// spend its key, spent and floor (as kScriptBody's). Returns Redis's clock, then
// per group: its epoch, each spend's lead, the next cursor, the count of
// learned pairs and the pairs (a key's name after the prefix, its TAT).
//
// A group's state key holds "EPOCH LAST": its epoch (Redis's clock when the
// key was made: a new one means Redis lost the group) and its log's last
// entry. One MGET reads every group's (a GET each on a Redis Cluster), so a
// group nobody wrote to since the box's cursor costs no more (its log is not
// touched: a range read of a stream costs several times a GET even when
// empty). The states are read before any write: a group its node does not hold fails the script there,
// before it changed anything (a script's writes are not undone by a later
// error), and the caller can send the groups again. The log is read before
// this box's entry is added; the cursor moves past that entry when the read
// reached the log's end.
constexpr std::string_view kSyncShebang = "#!lua flags=allow-cross-slot-keys";
// The sync script's parts: the groups' states read (before any write), a
// group's log read past the box's cursor, and a group's spends made.
constexpr std::string_view kSyncFunctions = R"lua(
local function read_states(groups, mget)
  local keys, a = {}, 4
  for g = 1, groups do
    keys[g] = ARGV[a + 1]
    a = a + 5 + 3 * tonumber(ARGV[a + 3])
  end
  if mget then return redis.call('MGET', unpack(keys)) end
  for g = 1, groups do keys[g] = redis.call('GET', keys[g]) end
  return keys
end

local function read_log(log, cursor, box, learned)
  local es = redis.call('XRANGE', log, '(' .. cursor, '+', 'COUNT', MAXE)
  local last = cursor
  for _, e in ipairs(es) do
    last = e[1]
    local f = e[2]
    if f[2] ~= box then
      for i = 3, #f, 2 do
        learned[#learned + 1] = f[i]
        learned[#learned + 1] = f[i + 1]
      end
    end
  end
  return last, #es < MAXE
end

local function spend_group(a, n, plen, now, box, out)
  local changed = {'b', box}
  for j = 1, n do
    local key = ARGV[a]
    local tat, moved = spend(key, tonumber(ARGV[a + 1]), now + tonumber(ARGV[a + 2]), now)
    a = a + 3
    if moved then
      changed[#changed + 1] = string.sub(key, plen + 1)
      changed[#changed + 1] = string.format('%d', tat)
    end
    out[#out + 1] = tat - now
  end
  return changed, a
end
)lua";

constexpr std::string_view kSyncBody = R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local box, groups = ARGV[1], tonumber(ARGV[2])
local out = {now}
local states = read_states(groups, ARGV[3] == 'mget')
local a = 4
for g = 1, groups do
  local log, stk, cursor = ARGV[a], ARGV[a + 1], ARGV[a + 2]
  local n, plen = tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4])
  local state = states[g]
  if not state then
    state = string.format('%d', now) .. ' 0-0'
    redis.call('SET', stk, state)
  end
  local sp = string.find(state, ' ', 1, true)
  local epoch, tail = string.sub(state, 1, sp - 1), string.sub(state, sp + 1)
  out[#out + 1] = epoch
  local learned = {}
  local last, at_end = cursor, true
  if cursor == '' then
    last = tail
  elseif cursor ~= '-' and cursor ~= tail then
    last, at_end = read_log(log, cursor, box, learned)
  end
  local changed
  changed, a = spend_group(a + 5, n, plen, now, box, out)
  if #changed > 2 then
    local id = redis.call('XADD', log, 'MAXLEN', '~', LOGLEN, '*', unpack(changed))
    redis.call('SET', stk, epoch .. ' ' .. id)
    if at_end and cursor ~= '-' then last = id end
  end
  out[#out + 1] = last
  out[#out + 1] = #learned / 2
  for _, v in ipairs(learned) do out[#out + 1] = v end
end
return out
)lua";

// kSpendFunction and a body; the flags line, where there is one, first.
std::string script_text(std::string_view flags, std::string_view body) {
  return std::string(flags) + std::string(kSpendFunction) + std::string(body);
}

const std::string& script_filled() {
  static const std::string text = script_text({}, kScriptBody);
  return text;
}

std::string sync_script_text() {
  std::string s = script_text(kSyncShebang, std::string(kSyncFunctions) + std::string(kSyncBody));
  const auto put = [&s](std::string_view name, unsigned value) {
    for (size_t at = s.find(name); at != std::string::npos; at = s.find(name)) {
      s.replace(at, name.size(), std::to_string(value));
    }
  };
  put("MAXE", ClusterGcra::kMaxLogEntries);
  put("LOGLEN", ClusterGcra::kLogLength);
  return s;
}

const std::string& sync_script_filled() {
  static const std::string text = sync_script_text();
  return text;
}

std::string_view text_of(const redisReply* r) noexcept {
  if (r == nullptr || (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_STATUS)) return {};
  return {r->str, r->len};
}

bool parse_int(std::string_view text, int64_t& out) noexcept {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size() && !text.empty();
}

}  // namespace

ClusterGcra::ClusterGcra(RedisRouter& redis)
    : redis_(redis), script_(script_filled()), sync_script_(sync_script_filled()) {}

std::string_view ClusterGcra::script() noexcept { return script_filled(); }
std::string_view ClusterGcra::sync_script() noexcept { return sync_script_filled(); }

std::string ClusterGcra::node_of(std::string_view key) const {
  if (!redis_.cluster_mode()) return {};
  const uint16_t slot = RedisRouter::key_slot(key);
  const std::optional<RedisEndpoint> e = redis_.owner(slot);
  // An unmapped slot goes alone: no other group is known to share its node.
  if (e) return e->to_string();
  std::string alone = "?";
  alone += std::to_string(slot);
  return alone;
}

namespace {

// A sync call's arguments (the script's ARGV) and the strings they view.
struct SyncArgs {
  std::vector<std::string> numbers;
  std::vector<std::string_view> args;
  std::string_view key[1];
};

void sync_args(std::span<const GroupSync> groups, std::string_view box, bool cluster, SyncArgs& a) {
  size_t spends = 0;
  for (const GroupSync& g : groups) spends += g.spends.size();
  a.numbers.reserve(3 * groups.size() + 2 * spends + 1);
  a.numbers.push_back(std::to_string(groups.size()));
  a.args = {box, a.numbers.back(), cluster ? "get" : "mget"};
  // `numbers` is reserved: the views into it stay put.
  for (const GroupSync& g : groups) {
    const size_t plen = g.log_key.size() - 3;  // "PREFIX:{gNNN}:" + "log"
    a.numbers.push_back(std::to_string(g.spends.size()));
    a.numbers.push_back(std::to_string(plen));
    a.args.insert(a.args.end(), {g.log_key, g.epoch_key, g.cursor, a.numbers[a.numbers.size() - 2], a.numbers.back()});
    for (const ClusterSpend& s : g.spends) {
      a.numbers.push_back(std::to_string(s.spent_us));
      a.numbers.push_back(std::to_string(s.floor_us));
      a.args.insert(a.args.end(), {s.key, a.numbers[a.numbers.size() - 2], a.numbers.back()});
    }
  }
  a.key[0] = groups.front().log_key;
}

// The script's answer read into the groups; kProtocol (the groups' answers
// cleared) when it is not the answer the script gives.
void read_sync(RedisLink::Result& r, std::span<GroupSync> groups, int64_t& redis_now_us) {
  const auto bad = [&r, groups](std::string what) {
    r.error = RedisError::kProtocol;
    r.detail = "the sync script answered " + std::move(what);
    for (GroupSync& g : groups) {
      g.ahead_us.clear();
      g.learned.clear();
    }
  };
  size_t i = 0;
  const size_t n = r.reply.elements();
  if (n == 0 || !reply_is_integer(r.reply.element(0))) return bad("no clock");
  redis_now_us = reply_integer(r.reply.element(i++));
  for (GroupSync& g : groups) {
    if (i + 2 + g.spends.size() + 1 > n) return bad("too few values");
    g.epoch = std::string(text_of(r.reply.element(i++)));
    for (size_t j = 0; j < g.spends.size(); ++j) {
      const redisReply* e = r.reply.element(i++);
      if (!reply_is_integer(e)) return bad("a lead that is not an integer");
      g.ahead_us.push_back(reply_integer(e));
    }
    g.next_cursor = std::string(text_of(r.reply.element(i++)));
    const redisReply* count = r.reply.element(i++);
    if (!reply_is_integer(count) || reply_integer(count) < 0 ||
        static_cast<size_t>(reply_integer(count)) > (n - i) / 2) {
      return bad("a wrong count of log entries");
    }
    for (auto k = reply_integer(count); k > 0; --k) {
      int64_t tat = 0;
      const std::string_view name = text_of(r.reply.element(i++));
      if (!parse_int(text_of(r.reply.element(i++)), tat)) return bad("a logged time that is not an integer");
      g.learned.emplace_back(std::string(name), tat);
    }
    if (g.epoch.empty() || g.next_cursor.empty()) return bad("no epoch or cursor");
  }
}

}  // namespace

std::vector<RedisLink::Result> ClusterGcra::sync_calls(std::span<const std::span<GroupSync>> calls, std::string_view box,
                                                     std::span<int64_t> redis_now_us, RedisLink::Clock::time_point now) {
  std::vector<RedisLink::Result> out(calls.size());
  std::vector<SyncArgs> args(calls.size());
  std::vector<RedisScript::Call> runs;
  std::vector<size_t> run_of;  // runs[j] is calls[run_of[j]]
  for (size_t c = 0; c < calls.size(); ++c) {
    for (GroupSync& g : calls[c]) {
      g.epoch.clear();
      g.next_cursor.clear();
      g.ahead_us.clear();
      g.learned.clear();
    }
    if (calls[c].empty()) continue;
    sync_args(calls[c], box, redis_.cluster_mode(), args[c]);
    runs.push_back({args[c].key, args[c].args});
    run_of.push_back(c);
  }
  std::vector<RedisLink::Result> answered = sync_script_.run_many(redis_, runs, now);
  for (size_t j = 0; j < runs.size(); ++j) {
    const size_t c = run_of[j];
    out[c] = std::move(answered[j]);
    if (out[c].error == RedisError::kNone) read_sync(out[c], calls[c], redis_now_us[c]);
  }
  return out;
}

RedisLink::Result ClusterGcra::sync_groups(std::span<GroupSync> groups, std::string_view box, int64_t& redis_now_us,
                                           RedisLink::Clock::time_point now) {
  const std::span<GroupSync> one[] = {groups};
  return std::move(sync_calls(one, box, {&redis_now_us, 1}, now).front());
}

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

// See cluster_replica.h.
#include "control/cluster/cluster_replica.h"

#include <hiredis/hiredis.h>

#include <string_view>

namespace sluice::control {
namespace {

// KEYS: the table's hash, the change stream. ARGV: box, table, op, field,
// value, then field/value pairs (replace). The table and the stream change
// together or not at all.
constexpr std::string_view kPublish = R"lua(
local op = ARGV[3]
if ARGV[2] == 'penalties' then
  -- the stream alone: boxes end by themselves
elseif op == 'set' then
  redis.call('HSET', KEYS[1], ARGV[4], ARGV[5])
elseif op == 'del' then
  redis.call('HDEL', KEYS[1], ARGV[4])
elseif op == 'replace' then
  redis.call('DEL', KEYS[1])
  for i = 6, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
end
return redis.call('XADD', KEYS[2], 'MAXLEN', '~', '100000', '*', 'box', ARGV[1], 'table', ARGV[2], 'op', op,
                  'field', ARGV[4], 'value', ARGV[5])
)lua";

constexpr int kMaxReadsPerPoll = 8;  // 8 x kReadBatch changes a poll at most: a backlog takes a few polls

std::string_view table_name(ReplicaChange::Table t) noexcept {
  switch (t) {
    case ReplicaChange::Table::kRuns: return "runs";
    case ReplicaChange::Table::kCredentials: return "credentials";
    case ReplicaChange::Table::kPenalties: return "penalties";
  }
  return "?";
}

std::string_view op_name(ReplicaChange::Op o) noexcept {
  switch (o) {
    case ReplicaChange::Op::kSet: return "set";
    case ReplicaChange::Op::kDelete: return "del";
    case ReplicaChange::Op::kReplace: return "replace";
    case ReplicaChange::Op::kMerge: return "merge";
  }
  return "?";
}

std::string_view text_of(const redisReply* r) noexcept {
  if (r == nullptr || (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_STATUS)) return {};
  return {r->str, r->len};
}

bool is_array(const redisReply* r) noexcept { return r != nullptr && r->type == REDIS_REPLY_ARRAY; }

}  // namespace

ClusterReplica::ClusterReplica(RedisRouter& redis, const std::string& prefix, std::string box, std::string fingerprint,
                               Apply apply)
    : redis_(redis), prefix_(prefix), box_(std::move(box)), fingerprint_(std::move(fingerprint)),
      apply_(std::move(apply)) {}

RedisLink::Result ClusterReplica::command(std::string_view key, std::span<const std::string_view> argv,
                                          RedisLink::Clock::time_point now) {
  RedisLink::Result r = redis_.command(key, argv, now);
  if (r.error != RedisError::kNone) last_error_ = std::string(to_string(r.error)) + ": " + r.detail;
  return r;
}

std::string ClusterReplica::table_key(ReplicaChange::Table t) const {
  return prefix_ + ":{repl}:" + std::string(table_name(t));
}

void ClusterReplica::publish(ReplicaChange change) {
  std::lock_guard lock(queue_mutex_);
  if (queue_.size() >= kMaxQueued) {
    queue_.pop_front();
    counters_.dropped.fetch_add(1, std::memory_order_relaxed);
  }
  queue_.push_back(std::move(change));
  counters_.queued.store(queue_.size(), std::memory_order_relaxed);
}

bool ClusterReplica::poll(RedisLink::Clock::time_point now) {
  now_ = now;
  if (!caught_up_ && !catch_up(now)) return false;
  if (!send_queued(now)) return false;
  if (!read_stream(now)) {
    caught_up_ = false;  // what was missed meanwhile comes from the tables at the next poll
    return false;
  }
  return true;
}

bool ClusterReplica::send_queued(RedisLink::Clock::time_point now) {
  for (;;) {
    ReplicaChange c;
    {
      std::lock_guard lock(queue_mutex_);
      if (queue_.empty()) return true;
      c = queue_.front();
    }
    if (!send(c, now)) return false;
    std::lock_guard lock(queue_mutex_);
    queue_.pop_front();
    counters_.queued.store(queue_.size(), std::memory_order_relaxed);
    counters_.published.fetch_add(1, std::memory_order_relaxed);
  }
}

bool ClusterReplica::send(const ReplicaChange& c, RedisLink::Clock::time_point now) {
  if (c.table == ReplicaChange::Table::kCredentials && !credentials_on_) return true;  // not ours to share
  const std::string table = table_key(c.table), stream = stream_key();
  std::vector<std::string_view> argv = {"EVAL", kPublish, "2", table, stream, box_, table_name(c.table),
                                        op_name(c.op), c.field, c.value};
  for (const auto& [f, v] : c.all) {
    argv.push_back(f);
    argv.push_back(v);
  }
  const RedisLink::Result r = command(stream, argv, now);
  if (r.error == RedisError::kServer) {
    // A change Redis refuses (a script error) is refused for good: dropped,
    // counted, not retried for ever.
    counters_.dropped.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  return r.error == RedisError::kNone;
}

// The fingerprint first (the first box's is the cluster's), then where the
// stream stands, then the tables: a change made between the two is read
// twice, and applying a change twice changes nothing.
bool ClusterReplica::catch_up(RedisLink::Clock::time_point now) {
  const std::string fp_key = prefix_ + ":{repl}:credential-secret";
  const std::string_view set[] = {"SET", fp_key, fingerprint_, "NX"};
  if (command(fp_key, set, now).error != RedisError::kNone) return false;
  const std::string_view get[] = {"GET", fp_key};
  const RedisLink::Result fp = command(fp_key, get, now);
  if (fp.error != RedisError::kNone) return false;
  credentials_on_ = fp.reply.text() == fingerprint_;
  counters_.credentials_off.store(credentials_on_ ? 0 : 1, std::memory_order_relaxed);

  const std::string stream = stream_key();
  const std::string_view last[] = {"XREVRANGE", stream, "+", "-", "COUNT", "1"};
  const RedisLink::Result l = command(stream, last, now);
  if (l.error != RedisError::kNone) return false;
  last_id_ = "0-0";
  if (l.reply.is_array() && l.reply.elements() == 1) {
    const redisReply* entry = l.reply.element(0);
    if (is_array(entry) && entry->elements >= 1) last_id_ = std::string(text_of(entry->element[0]));
  }
  for (ReplicaChange::Table t : {ReplicaChange::Table::kRuns, ReplicaChange::Table::kCredentials}) {
    if (t == ReplicaChange::Table::kCredentials && !credentials_on_) continue;
    ReplicaChange c;
    c.table = t;
    c.op = ReplicaChange::Op::kMerge;
    if (!read_table(t, c, now)) return false;
    if (!c.all.empty() && !apply_(c)) counters_.refused.fetch_add(1, std::memory_order_relaxed);
  }
  caught_up_ = true;
  counters_.catch_ups.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool ClusterReplica::read_table(ReplicaChange::Table t, ReplicaChange& out, RedisLink::Clock::time_point now) {
  const std::string key = table_key(t);
  const std::string_view argv[] = {"HGETALL", key};
  const RedisLink::Result r = command(key, argv, now);
  if (r.error != RedisError::kNone || !r.reply.is_array()) return false;
  for (size_t i = 0; i + 1 < r.reply.elements(); i += 2) {
    out.all.emplace_back(std::string(text_of(r.reply.element(i))), std::string(text_of(r.reply.element(i + 1))));
  }
  return true;
}

bool ClusterReplica::read_stream(RedisLink::Clock::time_point now) {
  const std::string stream = stream_key();
  const std::string count = std::to_string(kReadBatch);
  for (int round = 0; round < kMaxReadsPerPoll; ++round) {
    const std::string_view argv[] = {"XREAD", "COUNT", count, "STREAMS", stream, last_id_};
    const RedisLink::Result r = command(stream, argv, now);
    if (r.error != RedisError::kNone) return false;
    if (r.reply.is_nil() || !r.reply.is_array() || r.reply.elements() == 0) return true;  // nothing new
    const redisReply* only = r.reply.element(0);  // [stream, entries]
    if (!is_array(only) || only->elements != 2 || !is_array(only->element[1])) return false;
    const redisReply* entries = only->element[1];
    for (size_t i = 0; i < entries->elements; ++i) {
      const redisReply* e = entries->element[i];  // [id, [field, value, ...]]
      if (!is_array(e) || e->elements != 2) continue;
      last_id_ = std::string(text_of(e->element[0]));
      if (is_array(e->element[1])) apply_entry(e->element[1]);
    }
    if (entries->elements < kReadBatch) return true;
  }
  return true;
}

void ClusterReplica::apply_entry(const redisReply* fields) {
  std::string_view box, table, op;
  ReplicaChange c;
  for (size_t i = 0; i + 1 < fields->elements; i += 2) {
    const std::string_view name = text_of(fields->element[i]), value = text_of(fields->element[i + 1]);
    if (name == "box") box = value;
    else if (name == "table") table = value;
    else if (name == "op") op = value;
    else if (name == "field") c.field = std::string(value);
    else if (name == "value") c.value = std::string(value);
  }
  if (box == box_) return;  // this box's own change, applied when it was made
  if (table == "runs") c.table = ReplicaChange::Table::kRuns;
  else if (table == "credentials") c.table = ReplicaChange::Table::kCredentials;
  else if (table == "penalties") c.table = ReplicaChange::Table::kPenalties;
  else {
    counters_.refused.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (c.table == ReplicaChange::Table::kCredentials && !credentials_on_) return;
  if (op == "set") c.op = ReplicaChange::Op::kSet;
  else if (op == "del") c.op = ReplicaChange::Op::kDelete;
  else if (op == "replace" && c.table != ReplicaChange::Table::kPenalties) {
    c.op = ReplicaChange::Op::kReplace;
    if (!read_table(c.table, c, now_)) {
      counters_.refused.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  } else {
    counters_.refused.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (apply_(c)) counters_.applied.fetch_add(1, std::memory_order_relaxed);
  else counters_.refused.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace sluice::control

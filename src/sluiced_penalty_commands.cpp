// See sluiced_penalty_commands.h. Arguments are checked before anything
// changes, so a bad one answers a coded error and releases nothing.
#include "sluiced_penalty_commands.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <string>

#include "control/protocol.h"
#include "limiter/bucket_table.h"
#include "sluiced_bucket_keys.h"

namespace sluice::sluiced {

namespace {

using control::ErrorCode;
using control::Json;
using control::refuse;
using control::Reply;
namespace arg = control::arg;

// The most penalty.list answers (the busiest boxes first: ending latest).
constexpr size_t kMaxListed = 1000;

// A shared box's key as the stream names it: the bucket's name, then the
// key with its kind's bits cleared (each box gives the bucket a kind of its
// own): "RULE/penalty:K0K1" in hex.
std::string shared_name(const limiter::CompiledBucket& b, const limiter::BucketKey& k) {
  char hex[33];
  std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(k.k0),
                static_cast<unsigned long long>(k.k1 & ~uint64_t{0xffff}));
  return b.name + ":" + hex;
}

// The bucket and key a stream name gives, under policy `p`; false if it
// names no shared box there.
bool parse_shared_name(const limiter::CompiledPolicy& p, const std::string& name, const limiter::CompiledBucket*& b,
                       limiter::BucketKey& k) {
  const size_t colon = name.rfind(':');
  if (colon == std::string::npos || name.size() - colon - 1 != 32) return false;
  const auto it = std::find_if(p.buckets.begin(), p.buckets.end(), [&](const limiter::CompiledBucket& c) {
    return c.penalty && c.cluster_salt != 0 && c.name == std::string_view(name).substr(0, colon);
  });
  if (it == p.buckets.end()) return false;
  uint64_t words[2] = {0, 0};
  for (int w = 0; w < 2; ++w) {
    const char* from = name.data() + colon + 1 + 16 * w;
    const auto [end, ec] = std::from_chars(from, from + 16, words[w], 16);
    if (ec != std::errc() || end != from + 16) return false;
  }
  if ((words[0] >> 63) == 0) return false;  // not a key: bit 63 is always set
  b = &*it;
  k = {words[0], (words[1] & ~uint64_t{0xffff}) | b->index};
  return true;
}

// Ends a key's box and its refusal pace in the table; whether it was
// boxed at `now`.
bool unbox(limiter::LimiterState& limiter, const limiter::BucketKey& k, time::Nanos now) {
  limiter::BucketSlot* s = limiter.buckets.find(k);
  if (s == nullptr) return false;
  // Both words at once would need a lock the workers do not take: the end
  // first (the key is admitted again from here), then the pace.
  uint64_t until = s->load(1);
  while (until != limiter::BucketTable::kFrozen &&
         !s->word(1).compare_exchange_weak(until, 0, std::memory_order_acq_rel, std::memory_order_acquire)) {
  }
  uint64_t tat = s->load(0);
  while (tat != limiter::BucketTable::kFrozen &&
         !s->word(0).compare_exchange_weak(tat, 0, std::memory_order_acq_rel, std::memory_order_acquire)) {
  }
  return until != limiter::BucketTable::kFrozen && until > now;
}

// When a box's key is boxed until in the table (0: not boxed).
time::Nanos boxed_until(const limiter::LimiterState& limiter, const limiter::BucketKey& key) {
  const limiter::BucketSlot* s = limiter.buckets.find(key);
  if (s == nullptr) return 0;
  const uint64_t until = s->load(1);
  return until == limiter::BucketTable::kFrozen ? 0 : until;
}

Reply list_boxes(const PenaltyCommands::Parts& d, const Json&, Json& w) {
  const time::Nanos now = d.clock.now();
  const std::vector<control::PenaltyBook::Entry> boxes =
      d.book.current(now, [&](const limiter::BucketKey& k) { return boxed_until(d.limiter, k); }, kMaxListed);
  w["boxes"] = Json::array();
  for (const control::PenaltyBook::Entry& e : boxes) {
    Json b = Json::object();
    b["rule"] = e.rule;
    b["key"] = e.key;
    b["boxed_s_ago"] = (now - std::min(now, e.since)) / time::kNanosPerSecond;
    b["left_s"] = (e.until - now + time::kNanosPerSecond - 1) / time::kNanosPerSecond;
    w["boxes"].push_back(std::move(b));
  }
  return std::nullopt;
}

Reply release_box(const PenaltyCommands::Parts& d, const Json& request, Json& w) {
  std::string error;
  const std::optional<std::string> rule_name = control::string_arg(request, arg::kRule, error);
  const std::optional<std::string> key = control::string_arg(request, arg::kKey, error);
  if (!rule_name || !key || !error.empty()) return refuse(ErrorCode::kBadRequest, "penalty.release needs \"rule\" and \"key\"");
  const std::shared_ptr<const dataplane::PolicySnapshot> snapshot = d.publisher.current();
  const limiter::CompiledPolicy& p = snapshot->policy;
  const limiter::CompiledRule* rule = p.rule_named(*rule_name);
  if (rule == nullptr) return refuse(ErrorCode::kNotFound, "no rule named '" + *rule_name + "' in policy " + p.source.name);
  if (rule->penalty_bucket == limiter::CompiledRule::kNoPenalty) {
    return refuse(ErrorCode::kInvalidArgument, "rule " + rule->name + " has no penalty box");
  }
  limiter::BucketKey k{};
  if (const std::string why = key_of(d.limiter, p, p.buckets[rule->penalty_bucket], *key, k); !why.empty()) {
    return refuse(ErrorCode::kInvalidArgument, why);
  }
  const time::Nanos now = d.clock.now();
  const limiter::CompiledBucket& box = p.buckets[rule->penalty_bucket];
  const bool was_boxed = unbox(d.limiter, k, now);
  d.book.forget(k);
  // A shared box is released on every box of the cluster.
  if (d.cluster != nullptr && box.cluster_salt != 0) {
    d.cluster->publish({control::ReplicaChange::Table::kPenalties, control::ReplicaChange::Op::kDelete,
                        shared_name(box, k), {}, {}});
  }
  w["rule"] = rule->name;
  w["key"] = *key;
  w["was_boxed"] = was_boxed;
  w["message"] = was_boxed ? "released " + *key + " from rule " + rule->name + "'s penalty box"
                           : *key + " was not in rule " + rule->name + "'s penalty box";
  return std::nullopt;
}

}  // namespace

void PenaltyCommands::boxed(const limiter::CompiledPolicy& p, const control::PenaltyBook::Entry& e) const {
  if (parts_.cluster == nullptr) return;
  const auto b = std::find_if(p.buckets.begin(), p.buckets.end(),
                              [&](const limiter::CompiledBucket& c) { return c.index == e.box_key.bucket(); });
  if (b == p.buckets.end() || !b->penalty || b->cluster_salt == 0) return;
  parts_.cluster->publish({control::ReplicaChange::Table::kPenalties, control::ReplicaChange::Op::kSet,
                           shared_name(*b, e.box_key), std::to_string(e.until) + "\t" + e.rule + "\t" + e.key, {}});
}

bool PenaltyCommands::apply_replicated(const control::ReplicaChange& c) const {
  const std::shared_ptr<const dataplane::PolicySnapshot> snapshot = parts_.publisher.current();
  const limiter::CompiledBucket* b = nullptr;
  limiter::BucketKey k{};
  if (!parse_shared_name(snapshot->policy, c.field, b, k)) return false;
  const time::Nanos now = parts_.clock.now();
  if (c.op == control::ReplicaChange::Op::kDelete) {
    (void)unbox(parts_.limiter, k, now);
    parts_.book.forget(k);
    return true;
  }
  if (c.op != control::ReplicaChange::Op::kSet) return false;
  // "UNTIL\tRULE\tKEY"
  const size_t t1 = c.value.find('\t'), t2 = t1 == std::string::npos ? t1 : c.value.find('\t', t1 + 1);
  uint64_t until = 0;
  const auto [end, ec] = std::from_chars(c.value.data(), c.value.data() + std::min(t1, c.value.size()), until);
  if (t2 == std::string::npos || ec != std::errc() || end != c.value.data() + t1) return false;
  if (until <= now) return true;  // over already
  limiter::BucketTable::Found f = parts_.limiter.buckets.find_or_claim(k);
  if (f.overflow) return false;  // no slot of its own: a box is a key's, never shared
  // The end moves only later, never back (a worker here may have boxed it
  // a moment ago).
  uint64_t cur = f.slot->load(1);
  if (cur == limiter::BucketTable::kFrozen) return false;
  while (cur < until &&
         !f.slot->word(1).compare_exchange_weak(cur, until, std::memory_order_acq_rel, std::memory_order_acquire)) {
  }
  parts_.book.add({.rule = c.value.substr(t1 + 1, t2 - t1 - 1), .key = c.value.substr(t2 + 1), .box_key = k,
                   .since = now, .until = std::max(cur, until)});
  return true;
}

void PenaltyCommands::register_commands(control::CommandTable& table) const {
  table.add(control::command::kPenaltyList,
            [this](const Json& request, Json& w) { return list_boxes(parts_, request, w); });
  table.add(control::command::kPenaltyRelease,
            [this](const Json& request, Json& w) { return release_box(parts_, request, w); });
}

}  // namespace sluice::sluiced

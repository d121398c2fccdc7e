// See sluiced_penalty_commands.h. Arguments are checked before anything
// changes, so a bad one answers a coded error and releases nothing.
#include "sluiced_penalty_commands.h"

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
  limiter::BucketSlot* s = d.limiter.buckets.find(k);
  bool was_boxed = false;
  if (s != nullptr) {
    // Both words at once would need a lock the workers do not take: the
    // end first (the key is admitted again from here), then the pace.
    uint64_t until = s->load(1);
    while (until != limiter::BucketTable::kFrozen &&
           !s->word(1).compare_exchange_weak(until, 0, std::memory_order_acq_rel, std::memory_order_acquire)) {
    }
    was_boxed = until != limiter::BucketTable::kFrozen && until > now;
    uint64_t tat = s->load(0);
    while (tat != limiter::BucketTable::kFrozen &&
           !s->word(0).compare_exchange_weak(tat, 0, std::memory_order_acq_rel, std::memory_order_acquire)) {
    }
  }
  d.book.forget(k);
  w["rule"] = rule->name;
  w["key"] = *key;
  w["was_boxed"] = was_boxed;
  w["message"] = was_boxed ? "released " + *key + " from rule " + rule->name + "'s penalty box"
                           : *key + " was not in rule " + rule->name + "'s penalty box";
  return std::nullopt;
}

}  // namespace

void PenaltyCommands::register_commands(control::CommandTable& table) const {
  table.add(control::command::kPenaltyList,
            [this](const Json& request, Json& w) { return list_boxes(parts_, request, w); });
  table.add(control::command::kPenaltyRelease,
            [this](const Json& request, Json& w) { return release_box(parts_, request, w); });
}

}  // namespace sluice::sluiced

// See sluiced_bucket_commands.h. Each command checks its arguments first
// and answers a bad one with a coded error, so nothing is half done.
#include "sluiced_bucket_commands.h"

#include <optional>
#include <span>
#include <string>

#include "control/credential_file.h"
#include "control/credential_registry.h"
#include "control/protocol.h"
#include "limiter/charge.h"
#include "limiter/compiled_policy.h"
#include "net/ip_address.h"
#include "sluiced_bucket_keys.h"

namespace sluice::sluiced {

namespace {

using control::ErrorCode;
using control::Json;
using control::refuse;
using control::Reply;
namespace arg = control::arg;


// The name of a calendar window's span, as the policy writes it.
const char* span_name(const limiter::Calendar& c) {
  return c.span_minutes == limiter::Calendar::kDay ? "day" : c.span_minutes == limiter::Calendar::kHour ? "hour" : "minute";
}

// A calendar bucket's window for one key, as bucket.show answers it.
void write_window_state(const limiter::CompiledBucket& b, const std::string& key, const limiter::BucketSlot* slot,
                        time::Nanos now, Json& w) {
  limiter::WindowLimit limit = b.window;
  if (const auto it = b.quotas.find(key); it != b.quotas.end()) limit = it->second;
  const uint64_t window = limit.calendar.window_of(now);
  const uint64_t words[2] = {slot ? slot->load(0) : 0, slot ? slot->load(1) : 0};
  const bool frozen = words[0] == limiter::BucketTable::kFrozen;
  const uint32_t requests = frozen ? 0 : limiter::count_in(words[0], window);
  const uint32_t tokens = frozen ? 0 : limiter::count_in(words[1], window);
  const bool over = (limit.requests != 0 && requests >= limit.requests) ||
                    (limit.tokens != 0 && tokens >= limit.tokens);
  w["window"] = span_name(limit.calendar);
  w["requests"] = requests;
  w["requests_limit"] = limit.requests;
  w["tokens"] = tokens;
  w["tokens_limit"] = limit.tokens;
  w["remaining"] = limit.requests > requests && !over ? limit.requests - requests : 0u;
  w["reset_s"] = limit.calendar.seconds_left(now);
  w["refusing"] = over;
}

// A GCRA bucket's state for one key, as bucket.show answers it. A live run
// with a budget of its own is paced at it, not at the bucket's.
void write_gcra_state(const BucketCommands::Parts& d, const limiter::CompiledPolicy& p, const limiter::CompiledBucket& b,
                      const std::string& key, const limiter::BucketKey& k, time::Nanos now, Json& w) {
  limiter::GcraLimit limit = b.gcra;
  uint32_t per_period = b.header_limit;
  uint32_t period_s = b.header_window_s;
  bool run_keyed = false;
  for (const limiter::CompiledRule& r : p.rules) {
    for (int param : r.live_run_param) run_keyed = run_keyed || (&p.buckets[r.bucket] == &b && param >= 0);
  }
  if (const std::optional<uint32_t> own = run_keyed ? d.runs.budget(key) : std::nullopt; own && *own != 0) {
    if (limiter::GcraLimit::make(*own, time::kNanosPerMinute, *own, limit)) {
      per_period = *own;
      period_s = 60;
    }
  }
  const limiter::GcraDecision g = limiter::peek_gcra(d.limiter.buckets, k, now, limit);
  w["limit"] = per_period;
  w["period_s"] = period_s;
  w["burst"] = limit.burst;
  w["remaining"] = g.admit ? g.remaining + 1 : 0u;
  w["reset_s"] = g.reset_s;
  w["refusing"] = !g.admit;
  if (!g.admit) w["retry_after_s"] = g.retry_after_s;
}

Reply show_bucket(const BucketCommands::Parts& d, const Json& request, Json& w) {
  std::string error;
  const std::optional<std::string> name = control::string_arg(request, arg::kBucket, error);
  const std::optional<std::string> key = control::string_arg(request, arg::kKey, error);
  if (!name || !key || !error.empty()) return refuse(ErrorCode::kBadRequest, "bucket.show needs \"bucket\" and \"key\"");
  const std::shared_ptr<const dataplane::PolicySnapshot> snapshot = d.publisher.current();
  const limiter::CompiledPolicy& p = snapshot->policy;
  const limiter::CompiledBucket* b = p.bucket_named(*name);
  if (b == nullptr) {
    std::string names;
    for (const auto& x : p.buckets) names += (names.empty() ? "" : ", ") + x.name;
    return refuse(ErrorCode::kNotFound, "no bucket named '" + *name + "' in policy " + p.source.name + " (" + names + ")");
  }
  limiter::BucketKey k{};
  if (const std::string why = key_of(d.limiter, p, *b, *key, k); !why.empty()) return refuse(ErrorCode::kInvalidArgument, why);
  const time::Nanos now = d.clock.now();
  const limiter::BucketSlot* slot = d.limiter.buckets.find(k);
  w["bucket"] = b->name;
  w["key"] = *key;
  w["tracked"] = slot != nullptr;
  if (b->calendar) {
    write_window_state(*b, *key, slot, now, w);
  } else {
    write_gcra_state(d, p, *b, *key, k, now, w);
  }
  return std::nullopt;
}

// DQ05: the tokens a finished request used, charged to the deployment's
// current minute; once the minute's total reaches the quota, its next
// request is refused (DQ07).
Reply charge_usage(const BucketCommands::Parts& d, const Json& request, Json& w) {
  std::string error;
  const std::optional<std::string> deployment = control::string_arg(request, arg::kDeployment, error);
  const std::optional<uint64_t> tokens = control::uint_arg(request, arg::kTokens, uint64_t{1} << 32, error);
  const std::optional<std::string> bucket = control::string_arg(request, arg::kBucket, error);
  if (!error.empty()) return refuse(ErrorCode::kBadRequest, error);
  if (!deployment || deployment->empty() || !tokens) {
    return refuse(ErrorCode::kBadRequest, "usage.report needs \"deployment\" and \"tokens\"");
  }
  const std::shared_ptr<const dataplane::PolicySnapshot> snapshot = d.publisher.current();
  const limiter::CompiledPolicy& p = snapshot->policy;
  const limiter::CompiledBucket* b = nullptr;
  if (bucket) {
    b = p.bucket_named(*bucket);
    if (b == nullptr) return refuse(ErrorCode::kNotFound, "no bucket named '" + *bucket + "' in policy " + p.source.name);
    if (!b->calendar) return refuse(ErrorCode::kInvalidArgument, "bucket " + b->name + " counts no tokens (not a calendar window)");
  } else {
    std::string candidates;
    for (const limiter::CompiledBucket& x : p.buckets) {
      if (!x.calendar) continue;
      candidates += (candidates.empty() ? "" : ", ") + x.name;
      if (b != nullptr) {
        return refuse(ErrorCode::kInvalidArgument, "several buckets count tokens (" + candidates + "...); name one with \"bucket\"");
      }
      b = &x;
    }
    if (b == nullptr) return refuse(ErrorCode::kNotFound, "policy " + p.source.name + " has no bucket that counts tokens");
  }
  const std::optional<policy::KeySpec::Kind> kind = key_kind_of(p, *b);
  if (!kind || !text_keyed(*kind)) {
    return refuse(ErrorCode::kInvalidArgument, "bucket " + b->name + " is not keyed by a deployment name");
  }
  limiter::BucketKey k{};
  if (const std::string why = key_of(d.limiter, p, *b, *deployment, k); !why.empty()) {
    return refuse(ErrorCode::kInvalidArgument, why);
  }
  const time::Nanos now = d.clock.now();
  const limiter::Calendar& calendar = b->window.calendar;
  limiter::report_usage(d.limiter, k, calendar, *tokens, now);
  // A shared window's tokens are the other boxes' business too.
  if (b->cluster_salt != 0 && d.cluster != nullptr) {
    d.cluster->record_tokens(k, static_cast<uint32_t>(calendar.window_of(now)), *tokens);
  }
  limiter::WindowLimit limit = b->window;
  if (const auto it = b->quotas.find(*deployment); it != b->quotas.end()) limit = it->second;
  const limiter::BucketSlot* slot = d.limiter.buckets.find(k);
  const uint64_t word = slot ? slot->load(1) : 0;
  const uint32_t total = word == limiter::BucketTable::kFrozen ? 0 : limiter::count_in(word, calendar.window_of(now));
  w["bucket"] = b->name;
  w["deployment"] = *deployment;
  w["tokens"] = *tokens;
  w["window"] = span_name(calendar);
  w["window_tokens"] = total;
  w["tokens_limit"] = limit.tokens;
  w["over"] = limit.tokens != 0 && total >= limit.tokens;
  w["reset_s"] = calendar.seconds_left(now);
  return std::nullopt;
}

}  // namespace

void BucketCommands::register_commands(control::CommandTable& table) const {
  table.add(control::command::kBucketShow,
            [this](const Json& request, Json& w) { return show_bucket(parts_, request, w); });
  table.add(control::command::kUsageReport,
            [this](const Json& request, Json& w) { return charge_usage(parts_, request, w); });
}

}  // namespace sluice::sluiced

// A policy turned into what decide() reads: field ids instead of names,
// compiled path patterns, GCRA and window limits, and every response
// rendered to a template. Immutable once built; the control plane publishes
// a new one by pointer swap (RCU), so a reload never changes a policy a
// worker is reading.
#pragma once

#include <array>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "limiter/bucket_key.h"
#include "limiter/calendar_window.h"
#include "limiter/client_ip.h"
#include "limiter/field_registry.h"
#include "limiter/gcra.h"
#include "limiter/request.h"
#include "limiter/rule_dispatch.h"
#include "policy/path_pattern.h"
#include "policy/policy.h"
#include "policy/policy_loader.h"
#include "policy/response_template.h"

namespace sluice::limiter {

// Methods as a bit per known method plus a list of others.
struct MethodSet {
  bool any = true;
  uint32_t known = 0;
  std::vector<std::string> other;

  [[nodiscard]] bool contains(const Request& r) const noexcept {
    if (any) return true;
    if (r.method_kind != Method::kOther) return (known >> static_cast<unsigned>(r.method_kind)) & 1;
    return contains_other(r.method);
  }

 private:
  [[nodiscard]] bool contains_other(std::string_view method) const noexcept;
};

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

struct CompiledBucket {
  std::string name;
  uint16_t index = 0;  // its kind in the bucket table (its position here unless a reload kept an older kind)
  bool calendar = false;
  GcraLimit gcra;
  WindowLimit window;
  std::unordered_map<std::string, WindowLimit, StringHash, std::equal_to<>> quotas;  // per key (DQ)
  Nanos idle_drop_after = 0;
  uint32_t header_limit = 0;     // RateLimit-Limit / q=
  uint32_t header_window_s = 0;  // w=
  // A rule's penalty box (RULE/penalty, not in the policy's buckets): `gcra`
  // paces the key's refusals (word 0), word 1 holds when its box ends.
  bool penalty = false;
  Nanos box_for = 0;
  // A rule's in-flight count (RULE/concurrency, not in the policy's
  // buckets): word 0 holds the epoch and the count (charge.h).
  bool in_flight = false;
  // `scope: cluster`: mixed into its keys (made with the cluster's
  // shared secret) in place of the kind, so that a key is the same on every
  // box whatever kind the box gave the bucket; 0 for a box bucket.
  uint64_t cluster_salt = 0;
};

// Buckets one rule may charge (layered budgets; policy_loader.cpp's limit).
inline constexpr size_t kMaxRuleBuckets = 4;

// Rule counters (admitted, refused, answered) a worker keeps: one per slot.
// A rule keeps its slot by name across reloads; names past the last slot
// share it.
inline constexpr size_t kRuleCounterSlots = 64;

struct CompiledRule {
  std::string name;
  uint16_t index = 0;
  // Its counters' slot: its position at compile time; the policy publisher
  // gives a reloaded rule the slot its name had, so that a reload that
  // reorders rules never mixes their counts.
  uint8_t counter_slot = 0;
  MethodSet methods;
  std::vector<policy::PathPattern> paths;
  std::vector<FieldId> require;
  // For each path pattern, the index of the run parameter and of the key
  // parameter (-1 if unused).
  std::vector<int> live_run_param;
  std::vector<int> key_param;
  policy::KeySpec::Kind key_kind = policy::KeySpec::Kind::kClientIp;
  FieldId key_field = 0;
  policy::RuleSpec::MissingKey missing_key = policy::RuleSpec::MissingKey::kSkipRule;
  uint16_t bucket = 0;
  // Layered budgets: the other buckets it charges, all or none with
  // `bucket` (the first also_count of `also`), and each one's refusal (a
  // problem-details refusal names the bucket that refused).
  uint8_t also_count = 0;
  std::array<uint16_t, kMaxRuleBuckets - 1> also{};
  std::array<const policy::ResponseTemplate*, kMaxRuleBuckets - 1> also_refusal{};
  // Its penalty box's bucket (CompiledBucket::penalty), kNoPenalty: none.
  static constexpr uint16_t kNoBucket = 0xffff;
  static constexpr uint16_t kNoPenalty = kNoBucket;
  uint16_t penalty_bucket = kNoPenalty;
  // Its in-flight count's bucket (CompiledBucket::in_flight) and limit
  // (`concurrency`), kNoBucket: none.
  uint16_t in_flight_bucket = kNoBucket;
  uint32_t concurrency = 0;
  const policy::ResponseTemplate* in_flight_refusal = nullptr;
  // Delay (policy::RuleSpec::Delay): an over-budget request that a rate
  // bucket admits within delay_max is admitted late; at most delay_per_key
  // of a key's wait at once. 0: off.
  Nanos delay_max = 0;
  uint32_t delay_per_key = 0;
  uint32_t slots_per_ip = 0;  // TB07; 0: no ceiling
  Nanos slots_quiet = 0;
  uint16_t slots_overflow_bucket = 0;
  uint16_t answer_status = 0;
  const policy::ResponseTemplate* answer = nullptr;
  const policy::ResponseTemplate* refusal = nullptr;
  // A refusal counted in the TB07 overflow bucket: the same, but for a
  // problem-details refusal, which names that bucket.
  const policy::ResponseTemplate* overflow_refusal = nullptr;
  policy::HeaderStyle style = policy::HeaderStyle::kSeed;  // of its rate-limit fields (policy::ratelimit_fields)
  // Its refusal framed for its own bucket (a GCRA bucket's: a calendar
  // window's limit is each key's own).
  std::optional<policy::FramedAnswer> framed_refusal;
  bool shadow = false;
};

struct CompiledPolicy {
  // Rules point into `responses`: moving keeps those pointers valid, a copy
  // would not, so there is none.
  CompiledPolicy() = default;
  CompiledPolicy(CompiledPolicy&&) = default;
  CompiledPolicy& operator=(CompiledPolicy&&) = default;
  CompiledPolicy(const CompiledPolicy&) = delete;
  CompiledPolicy& operator=(const CompiledPolicy&) = delete;

  policy::Policy source;
  uint64_t digest = 0;  // of the compiled form's source, shown by `policy show`
  ClientIpRule client_ip;
  FieldId credential_field = 0;
  std::vector<Digest> anonymous;  // RF05, digested with the credential hasher
  policy::CredentialSpec::Unknown unknown_credential = policy::CredentialSpec::Unknown::kAnswer401;
  std::vector<std::string> cors_origins;
  bool cors_any_origin = false;
  std::vector<policy::PathPattern> preflight_paths;
  std::string cors_expose;  // "Access-Control-Expose-Headers: ...\r\n", or empty
  std::string usage_field;  // DQ05: the response field with a request's tokens, lowercase, or empty
  struct Exemption {
    MethodSet methods;
    std::string path;
  };
  std::vector<Exemption> exemptions;
  std::vector<CompiledBucket> buckets;
  std::vector<CompiledRule> rules;
  RuleDispatch dispatch;  // which rules a request's first path segment may match
  bool shadow = false;
  bool keep_alive_answers = true;  // policy::AfterAnswer::kKeepAlive
  policy::AmbiguousPaths ambiguous_paths = policy::AmbiguousPaths::kRefuse;
  uint16_t slot_kind = 0;  // bucket kind of the TB07 records in their own table
  unsigned max_slots = 0;  // the largest ceiling of any rule
  // Some rule admits late (delay_max): only then does the request path
  // look for room to hold a head.
  bool delays = false;

  std::deque<policy::ResponseTemplate> responses;  // stable addresses for rules' pointers
  const policy::ResponseTemplate* refusal = nullptr;
  const policy::ResponseTemplate* unauthorized = nullptr;
  const policy::ResponseTemplate* not_found = nullptr;
  // Answers to heads the parser refused, by status.
  const policy::ResponseTemplate* bad_request = nullptr;       // 400
  const policy::ResponseTemplate* too_large = nullptr;         // 431
  const policy::ResponseTemplate* not_implemented = nullptr;   // 501
  const policy::ResponseTemplate* bad_version = nullptr;       // 505
  const policy::ResponseTemplate* timed_out = nullptr;         // 408: a head past its deadline
  policy::Deadlines deadlines;
  bool syn_proxy = true;
  bool delayed_binding = true;
  bool adoption = true;

  [[nodiscard]] const CompiledBucket* bucket_named(std::string_view name) const noexcept;
  [[nodiscard]] const CompiledRule* rule_named(std::string_view name) const noexcept;
};

// The idle predicate the control thread reclaims buckets with: true if the
// bucket of `kind` holding `words` can be dropped at `now` without changing
// any answer: its minute is over (calendar), or it has been full again for
// the bucket's idle_drop_after (continuous; RF08: 10 minutes). TB07 records
// have their own table and predicate (credential_record_idle).
// An in-flight count is idle at zero under `in_flight_epoch` (this
// process's: LimiterState::in_flight_epoch); a count of another epoch is
// a dead process's, zero too.
[[nodiscard]] bool bucket_idle(const CompiledPolicy& p, uint16_t kind, const uint64_t* words, Nanos now,
                               uint16_t in_flight_epoch) noexcept;

// Builds the compiled form into `out` (a fresh CompiledPolicy, or a
// protocol's policy built on one: it is built where it will live, since its
// rules point into its responses). `fields` gives the ids of the fields it
// tracks; `credential_hasher` digests the anonymous credentials the same way
// the credential map's digests are made. False, with `errors` grown, when the
// policy cannot be compiled.
[[nodiscard]] bool compile_policy(const policy::Policy& p, FieldRegistry& fields, const KeyHasher& credential_hasher,
                                  std::vector<policy::PolicyError>& errors, CompiledPolicy& out);

}  // namespace sluice::limiter

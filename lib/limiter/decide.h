// The decision on one request (limiter/request.h: its meaning, whatever
// protocol carried it): exemptions, the first rule that matches, its key, its
// bucket, and the verdict with everything the protocol side needs to act on
// it: the rate-limit fields' values, and for an answer its status,
// Retry-After, template and body. No protocol's bytes: the HTTP/1 side
// writes them (http/limiter_answer.h). No allocation, lock, system call or
// exception: what a decision computes goes into the caller's scratch space.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "limiter/bucket_table.h"
#include "limiter/compiled_policy.h"
#include "limiter/digest_map.h"
#include "limiter/request.h"
#include "limiter/spend_log.h"
#include "net/ip_address.h"

namespace sluice::limiter {

// The shared state decisions read and charge.
struct LimiterState {
  BucketTable& buckets;             // rate-limit buckets, one kind per policy bucket
  BucketTable& credential_records;  // TB07 records, max_slots words each
  const DigestMap& runs;            // live runs by digest of their token (value: 0, or their own budget per minute)
  const DigestMap& users;           // credential digest -> user id (RF04)
  const KeyHasher& bucket_hasher;      // per process: bucket keys
  const KeyHasher& credential_hasher;  // stable: credential digests, as in the credential file
  // Keys of `scope: cluster` buckets, with the secret every box of
  // the cluster shares (none: those buckets are keyed as the box's own).
  const KeyHasher* cluster_hasher = nullptr;
  // This process's epoch of in-flight counts (in_flight.h).
  uint16_t in_flight_epoch = 0;
};

enum class Verdict : uint8_t {
  kForward,  // no rule applies (RF02): forward as is
  kExempt,   // exempt (TB08, TB18): forward, uncounted, no fields
  kAdmit,    // a rule admitted it: forward, adding `fields` to the response
  kRefuse,   // over budget: answer with `answer` (429), forward nothing
  kAnswer,   // the appliance answers with `answer` (400, 401, 404, ...)
};

// How the request's path was read (policy/path_form.h, ambiguous_paths).
enum class PathReading : uint8_t {
  kNormal,     // normal form: every origin reads it alike, judged as written
  kRefused,    // not in normal form, answered 400 (ambiguous_paths: refuse)
  kStrictest,  // not in normal form, judged by its strictest reading, never exempt (ambiguous_paths: strictest)
};

// What a request was counted by, for the operator's busiest-keys view: the
// key's material (a client address's 16 bytes, a run token, a deployment
// name, a user id's 8 bytes, a credential digest's 16 bytes), cut to 32
// bytes. kText is a path parameter's, a header's or the host's text;
// kDestination the address's 16 bytes and the port's 2 (host order).
struct KeyLabel {
  enum class Kind : uint8_t { kNone, kClientIp, kCredential, kUser, kText, kDestination };
  Kind kind = Kind::kNone;
  uint8_t len = 0;  // of `bytes`
  uint8_t prefix = 0;  // kClientIp: the length of the IPv6 prefix keyed (X03); 0: a whole address
  std::array<uint8_t, 32> bytes{};
  uint64_t key_hash = 0;  // BucketKey::k0, identifies the bucket
};

// A decision's rate-limit fields (TB16), as values: what an admitted
// response gets added, and what a refusal (or a rule's answer) says. Not
// rendered: most are written only when a response is framed, by the
// protocol side (http::write_ratelimit_fields), so decide() does not pay for
// text the caller may never write. Self-contained (the bucket's name is
// copied, the style's template lives as long as the process), so it outlives
// the policy that made it.
// A layered rule's fields list every budget it charged: the one that binds
// (the fields above: the exhausted one with the longest wait, or the one
// with the fewest requests left) first, then the others in `others`.
struct RateLimitFields {
  static constexpr size_t kMaxName = 64;  // bucket names are at most this long (policy_loader.cpp)
  static constexpr size_t kMaxBudgets = kMaxRuleBuckets;
  static constexpr size_t kMaxOtherNames = 96;  // the other budgets' names together (compile_policy)
  // The most the fields may take written as HTTP/1 field lines, in any
  // style: a rule whose budgets could take more is refused (compile_policy),
  // and the data plane keeps this much for an admission's fields.
  static constexpr size_t kMaxText = 255;
  policy::HeaderStyle style = policy::HeaderStyle::kNone;  // kNone: no fields
  uint8_t name_len = 0;
  uint32_t limit = 0;
  uint32_t remaining = 0;
  uint32_t reset = 0;
  uint32_t window = 0;
  // The bucket's (the first name_len bytes): an admission's for the styles
  // that name it, an answer's always (its template's {policy}).
  char name[kMaxName];
  // A layered rule's other budgets, `more` of them; their names are
  // other_names[name_at, name_at + name_len). Only the first `more` are
  // ever read, so they are left unset (a decision is made per request).
  struct Other {
    uint32_t limit;
    uint32_t remaining;
    uint32_t reset;
    uint32_t window;
    uint8_t name_at;
    uint8_t name_len;
  };
  uint8_t more = 0;
  // The binding budget is a count of requests in flight (draft-11's
  // qu="concurrent-requests"): `limit` of them, no window.
  bool concurrent = false;
  std::array<Other, kMaxBudgets - 1> others;
  char other_names[kMaxOtherNames];

  [[nodiscard]] bool none() const noexcept { return style == policy::HeaderStyle::kNone; }
  [[nodiscard]] std::string_view bucket() const noexcept { return {name, name_len}; }
  [[nodiscard]] std::string_view other_bucket(size_t i) const noexcept {
    return {other_names + others[i].name_at, others[i].name_len};
  }
};

// Whether a refusal lets a browser script read it (TB09): the policy grants
// any origin, or the request's Origin.
enum class CorsGrant : uint8_t { kNone, kAnyOrigin, kThisOrigin };

// The appliance's own answer (kRefuse, kAnswer), in no protocol's words: the
// policy's template for it (its status, its fields with {placeholders}, its
// body), and the values only the request gives. Its status, Retry-After and
// rate-limit fields are the decision's.
struct Answer {
  const policy::ResponseTemplate* response = nullptr;  // the policy's; valid while the policy is
  const policy::FramedAnswer* framed = nullptr;        // a refusal's, framed for its rule's bucket (the same)
  std::string_view body;           // as the template renders it (its text, valid while the policy is)
  bool charged = false;            // a bucket was charged: the rate-limit fields and values go in
  CorsGrant cors = CorsGrant::kNone;
  std::string_view origin;         // the request's Origin (a refusal's {origin}), valid while its bytes are
  uint64_t trace_id = 0;           // a refusal's {trace_id}
};

struct Decision {
  Verdict verdict = Verdict::kForward;
  uint16_t status = 0;            // of `answer`
  int16_t rule = -1;              // the rule that applied
  uint8_t rule_counter = 0;       // its counters' slot (CompiledRule::counter_slot), when rule >= 0
  bool shadow_refusal = false;    // X01: would have been refused, forwarded instead
  bool overflow = false;          // charged to an overflow bucket (table full or reclaiming)
  bool over_credential_ceiling = false;  // TB07: counted against the address's budget instead
  uint32_t retry_after_s = 0;     // of a refusal (and a charged answer's {retry_after})
  RateLimitFields fields;         // kAdmit: added to the response; kRefuse, a charged kAnswer: the answer's
  Answer answer;                  // kRefuse, kAnswer
  BucketKey usage_key{};          // where a finished request's tokens are charged (DQ05)
  Calendar usage_calendar{};      // in windows of this span
  bool has_usage_key = false;
  bool usage_shared = false;      // the window is a cluster bucket's (its tokens are recorded for the sync)
  KeyLabel label;                 // set when a bucket was charged (kAdmit, kRefuse, a rule's kAnswer)
  // The rule's penalty box: kBoxed, refused (or, in shadow, would have
  // been) because the key is boxed, its bucket not consulted; kBoxedNow,
  // this refusal boxed it, until `boxed_until`.
  enum class Penalty : uint8_t { kNone, kBoxed, kBoxedNow } penalty = Penalty::kNone;
  Nanos boxed_until = 0;
  BucketKey penalty_key{};        // kBoxedNow: the box's key (sluicectl penalty release)
  // Admitted under a rule's `concurrency`: the request holds a slot of
  // `in_flight_key` until its response ends (the data plane gives it back).
  bool holds_in_flight = false;
  bool refused_in_flight = false;  // refused because every slot was taken
  BucketKey in_flight_key{};
  // A live run's own budget that was charged (requests per minute, TB17's
  // shape), 0: the bucket's own limit.
  uint32_t run_budget = 0;
  // kAdmit under a rule's delay: the request conforms this long from now,
  // and must not reach the origin before (0: at once). Set in shadow mode
  // too: the data plane then forwards it at once.
  Nanos delay = 0;
  PathReading path_reading = PathReading::kNormal;  // the data plane counts the other two
};

// Per-worker space decisions write into; reused for every request.
struct DecisionScratch {
  char path[64 * 1024 + 16];  // the longest head a policy allows
  char credential[8192];
  char material[512];
  uint64_t trace_seed = 0x9e3779b97f4a7c15ull;  // set per worker
  uint64_t trace_counter = 0;
  // Where this worker records what it admits on cluster buckets
  // (none: not recorded).
  SpendLog* spends = nullptr;
  // Whether a rule's delay may admit a request late: the data plane says
  // no while it has no room to hold another request (such a request is
  // refused as if the rule had no delay).
  bool may_delay = true;
};

[[nodiscard]] Decision decide(const CompiledPolicy& policy, LimiterState& state, const Request& request, Nanos now,
                              DecisionScratch& scratch) noexcept;

// decide() in two halves, for a burst of requests: plan() finds the rule and
// computes the bucket key without touching the bucket; the caller prefetches
// every planned bucket, then finishes each one, so the cache misses of a
// large table overlap instead of adding up. A plan refers to its request
// (and so to the request's bytes), which must stay valid until finish(). A
// plan that needs no charge is already the decision.
// What a plan leaves to do: the bucket and key a request is charged to.
struct Charge {
  bool due = false;  // a bucket must still be charged
  const CompiledRule* rule = nullptr;
  const CompiledBucket* bucket = nullptr;
  BucketKey key{};
  WindowLimit window{};     // calendar buckets: this key's quotas
  uint32_t run_budget = 0;  // a live run's own budget (requests per minute), 0: the bucket's
  const Request* request = nullptr;
  // A layered rule's other buckets, charged with the first, all or none
  // (only the first also_count are set).
  struct Layer {
    const CompiledBucket* bucket;
    BucketKey key;
    WindowLimit window;
  };
  uint8_t also_count = 0;
  std::array<Layer, RateLimitFields::kMaxBudgets - 1> also;
  // The rule's penalty box: the key in its bucket (CompiledRule::penalty_bucket).
  bool penalty = false;
  BucketKey penalty_key;
  // The rule's in-flight count: the key in its bucket (CompiledRule::in_flight_bucket).
  bool in_flight = false;
  BucketKey in_flight_key;
};

struct Plan {
  Decision decision;  // final unless charge.due
  Charge charge;
};

[[nodiscard]] Plan plan(const CompiledPolicy& policy, LimiterState& state, const Request& request, Nanos now,
                        DecisionScratch& scratch) noexcept;
inline void prefetch(LimiterState& state, const Plan& p) noexcept {
  if (!p.charge.due) return;
  state.buckets.prefetch(p.charge.key);
  if (p.charge.penalty) state.buckets.prefetch(p.charge.penalty_key);
  for (uint8_t i = 0; i < p.charge.also_count; ++i) state.buckets.prefetch(p.charge.also[i].key);
}
// The decision, made in `p` (a Decision is some 200 bytes: not copied).
const Decision& finish(const CompiledPolicy& policy, LimiterState& state, Plan& p, Nanos now,
                       DecisionScratch& scratch) noexcept;

// The answer to a request the protocol side could not read, by the status
// it calls for (431, 501, 505; any other: 400).
[[nodiscard]] Decision answer_unreadable(const CompiledPolicy& policy, uint16_t status) noexcept;

// The answer to a request still incomplete at its deadline (policy
// deadlines: head): 408.
[[nodiscard]] Decision answer_timeout(const CompiledPolicy& policy) noexcept;

// The key `material` (an address's 16 bytes, a user id's 8, a parameter's
// text) has in bucket `b`, as a request would be charged: the operator's
// commands (bucket.show, usage.report) look keys up with it.
[[nodiscard]] BucketKey material_key(const LimiterState& state, const CompiledBucket& b,
                                     std::span<const uint8_t> material) noexcept;
// DQ05: `tokens` charged to the key's window (of the bucket's calendar)
// holding `now`; recorded in `spends` too when the window is shared by the
// cluster.
void report_usage(LimiterState& state, const BucketKey& usage_key, const Calendar& calendar, uint64_t tokens,
                  Nanos now, SpendLog* spends = nullptr) noexcept;

}  // namespace sluice::limiter

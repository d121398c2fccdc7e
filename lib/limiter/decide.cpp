// See decide.h. First the path's form (policy/path_form.h): an ambiguous
// path is refused or read strictly. Then the design brief's order:
// exemptions (health, CORS preflight), the first rule that matches (class,
// route family or deployment), its key (client address, credential, user,
// run, deployment), the bucket, the verdict, and the answer's template and
// values (the protocol side writes it).
#include "limiter/decide.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "net/authority.h"
#include "limiter/charge.h"
#include "limiter/credential.h"
#include "limiter/credential_slots.h"
#include "limiter/in_flight.h"
#include "policy/path_form.h"

namespace sluice::limiter {

namespace {

using policy::KeySpec;
using policy::PathPattern;

std::span<const uint8_t> bytes_of(std::string_view s) noexcept {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

std::span<const uint8_t> bytes_of(const net::IpAddress& a) noexcept { return {a.bytes.data(), a.bytes.size()}; }

// An answer from template `t`, as `d`'s: the protocol side writes it.
void respond(Decision& d, Verdict verdict, const policy::ResponseTemplate& t) noexcept {
  d.verdict = verdict;
  d.status = t.status();
  d.answer.response = &t;
  d.answer.body = t.body();
}

uint64_t next_trace_id(DecisionScratch& scratch) noexcept {
  uint64_t x = scratch.trace_seed + ++scratch.trace_counter * 0x9e3779b97f4a7c15ull;
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 29;
  return x;
}

bool origin_granted(const CompiledPolicy& p, std::string_view origin) noexcept {
  if (p.cors_any_origin) return true;
  for (const std::string& o : p.cors_origins) {
    if (o == origin) return true;
  }
  return false;
}

// TB09: a refusal to a granted origin lets the script read it.
CorsGrant cors_grant(const CompiledPolicy& p, const Request& request) noexcept {
  if (p.cors_any_origin) return CorsGrant::kAnyOrigin;
  if (!request.has(field::kOrigin) || !origin_granted(p, request.value(field::kOrigin))) return CorsGrant::kNone;
  return CorsGrant::kThisOrigin;
}

// The fields' values; the bucket's name copied where they will be written
// with it (`named`: the IETF style's fields, an answer's {policy}).
RateLimitFields ratelimit_values(policy::HeaderStyle style, const policy::TemplateValues& v, bool named) noexcept {
  RateLimitFields f;
  f.style = style;
  f.limit = v.limit;
  f.remaining = v.remaining;
  f.reset = v.reset;
  f.window = v.window;
  if (named) {
    f.name_len = static_cast<uint8_t>(std::min(v.policy.size(), RateLimitFields::kMaxName));
    std::memcpy(f.name, v.policy.data(), f.name_len);
  }
  return f;
}

// The operator's copy of what a request was counted by: at most 32 bytes,
// into the decision itself, so labelling costs no allocation.
KeyLabel label_of(KeyLabel::Kind kind, std::span<const uint8_t> material, const std::optional<Digest>& credential,
                  const BucketKey& key) noexcept {
  KeyLabel l;
  l.kind = kind;
  l.key_hash = key.k0;
  if (credential) {
    std::memcpy(l.bytes.data(), &credential->lo, sizeof credential->lo);
    std::memcpy(l.bytes.data() + sizeof credential->lo, &credential->hi, sizeof credential->hi);
    l.len = sizeof credential->lo + sizeof credential->hi;
    return l;
  }
  const size_t n = std::min(material.size(), l.bytes.size());
  if (n == sizeof(net::IpAddress::bytes)) {
    std::memcpy(l.bytes.data(), material.data(), sizeof(net::IpAddress::bytes));  // an address: one move, no call
  } else if (n != 0) {
    std::memcpy(l.bytes.data(), material.data(), n);
  }
  l.len = static_cast<uint8_t>(n);
  return l;
}

// The client address a rule keys on, resolved (trusted proxies, forwarding
// fields) the first time a rule asks for it: most requests never need it.
class LazyClientIp {
 public:
  LazyClientIp(const CompiledPolicy& policy, const Request& request) noexcept : policy_(policy), request_(request) {}
  const net::IpAddress& get() noexcept {
    if (!have_) {
      ip_ = resolve_client_ip(policy_.client_ip, request_.fields, request_.conn.peer);
      have_ = true;
    }
    return ip_;
  }

 private:
  const CompiledPolicy& policy_;
  const Request& request_;
  bool have_ = false;
  net::IpAddress ip_;
};

// TB18 (method and exact path) and TB08 (a real CORS preflight on a
// browser-reachable path, where an origin is granted): exempt before any rule.
bool exempt(const CompiledPolicy& policy, const Request& request, std::string_view path,
            std::span<std::string_view, PathPattern::kMaxParams> params) noexcept {
  for (const CompiledPolicy::Exemption& e : policy.exemptions) {
    if (e.methods.contains(request) && path == e.path) return true;
  }
  if ((policy.cors_any_origin || !policy.cors_origins.empty()) && request.method_kind == Method::kOptions &&
      request.has(field::kOrigin)) {
    for (const PathPattern& p : policy.preflight_paths) {
      if (p.match(path, params)) return true;
    }
  }
  return false;
}

// Whether `rule` applies to the request: its methods, a path (`matched`: its
// index, -1 for a rule without paths; `params` filled by it), its required
// fields, and a live run where it names one (TB12, TB13; `run_budget`: the
// run's own budget).
// (These three are forced inline: every request takes them once, from the
// normal-form loop in plan_into(), and a call each costs it measurably;
// the strictest reading's plan_rules() takes them too.)
[[gnu::always_inline]] inline bool rule_applies(const CompiledRule& rule, LimiterState& state,
                                                const Request& request, std::string_view path,
                                                std::span<std::string_view, PathPattern::kMaxParams> params,
                                                int& matched, uint64_t& run_budget) noexcept {
  if (!rule.methods.contains(request)) return false;
  matched = -1;
  if (!rule.paths.empty()) {
    for (size_t i = 0; i < rule.paths.size() && matched < 0; ++i) {
      if (rule.paths[i].may_match(path) && rule.paths[i].match(path, params)) matched = static_cast<int>(i);
    }
    if (matched < 0) return false;
  }
  for (FieldId f : rule.require) {
    if (!request.has(f)) return false;
  }
  run_budget = 0;
  if (matched >= 0 && rule.live_run_param[static_cast<size_t>(matched)] >= 0) {
    const std::string_view token = params[static_cast<size_t>(rule.live_run_param[static_cast<size_t>(matched)])];
    const std::optional<uint64_t> run = state.runs.find(state.credential_hasher.digest(bytes_of(token)));
    if (!run) return false;
    run_budget = *run;
  }
  return true;
}

// What a request is counted by: bytes, or a credential digest.
struct KeyMaterial {
  std::span<const uint8_t> bytes;
  std::optional<Digest> credential;
  bool missing = false;
  KeyLabel::Kind label = KeyLabel::Kind::kText;  // path parameters, fields, the host
};

KeyMaterial bytes_key(std::span<const uint8_t> bytes, KeyLabel::Kind label) noexcept {
  KeyMaterial k;
  k.bytes = bytes;
  k.label = label;
  return k;
}

KeyMaterial missing_key() noexcept {
  KeyMaterial k;
  k.missing = true;
  return k;
}

// kCredential and kUser (RF05, RF10): the normalised credential's digest, or
// the user it belongs to; an anonymous one counts by client address.
KeyMaterial credential_key(const CompiledPolicy& policy, LimiterState& state, const CompiledRule& rule,
                           const Request& request, LazyClientIp& client, DecisionScratch& scratch) noexcept {
  const std::string_view norm = request.has(policy.credential_field)
                                    ? normalize_credential(request.value(policy.credential_field), scratch.credential)
                                    : std::string_view();
  if (norm.empty()) return missing_key();
  const Digest credential = state.credential_hasher.digest(bytes_of(norm));
  if (rule.key_kind == KeySpec::Kind::kCredential) {
    KeyMaterial k;
    k.credential = credential;
    k.bytes = bytes_of(norm);  // for cluster buckets: the digest is keyed per box (cluster_key)
    k.label = KeyLabel::Kind::kCredential;
    return k;
  }
  for (const Digest& a : policy.anonymous) {
    if (a == credential) return bytes_key(bytes_of(client.get()), KeyLabel::Kind::kClientIp);
  }
  const std::optional<uint64_t> user = state.users.find(credential);
  if (!user) return missing_key();
  std::memcpy(scratch.material, &*user, sizeof *user);
  return bytes_key({reinterpret_cast<const uint8_t*>(scratch.material), sizeof *user}, KeyLabel::Kind::kUser);
}

[[gnu::always_inline]] inline KeyMaterial key_material(const CompiledPolicy& policy, LimiterState& state,
                                                       const CompiledRule& rule, int matched,
                                                       std::span<const std::string_view, PathPattern::kMaxParams> params,
                                                       const Request& request,
                                                       LazyClientIp& client, DecisionScratch& scratch) noexcept {
  switch (rule.key_kind) {
    case KeySpec::Kind::kClientIp:
      return bytes_key(bytes_of(client.get()), KeyLabel::Kind::kClientIp);
    case KeySpec::Kind::kCredential:
    case KeySpec::Kind::kUser:
      return credential_key(policy, state, rule, request, client, scratch);
    case KeySpec::Kind::kPathParam: {
      const int idx = matched >= 0 ? rule.key_param[static_cast<size_t>(matched)] : -1;
      if (idx < 0 || params[static_cast<size_t>(idx)].empty()) return missing_key();
      return bytes_key(bytes_of(params[static_cast<size_t>(idx)]), KeyLabel::Kind::kText);
    }
    case KeySpec::Kind::kHeader:
      if (!request.has(rule.key_field) || request.value(rule.key_field).empty()) return missing_key();
      return bytes_key(bytes_of(request.value(rule.key_field)), KeyLabel::Kind::kText);
    case KeySpec::Kind::kHost: {
      const std::string_view host = request.host();
      // Every spelling the origin treats as one host is one bucket: case,
      // a trailing dot, the default port written out or left empty.
      const size_t n = net::normalise_authority(host, request.default_port, scratch.material);
      if (n == 0) return missing_key();
      return bytes_key({reinterpret_cast<const uint8_t*>(scratch.material), n}, KeyLabel::Kind::kText);
    }
    case KeySpec::Kind::kDestination:
      std::memcpy(scratch.material, request.conn.destination.bytes.data(), 16);
      std::memcpy(scratch.material + 16, &request.conn.destination_port, 2);
      return bytes_key({reinterpret_cast<const uint8_t*>(scratch.material), 18}, KeyLabel::Kind::kDestination);
  }
  return missing_key();
}

// A rule whose key the request lacks: RF10's 401 (or forward) for a user
// key, a 400 where the rule says so. False: the rule does not apply.
bool answer_missing_key(const CompiledPolicy& policy, const CompiledRule& rule, Decision& d) noexcept {
  if (rule.key_kind == KeySpec::Kind::kUser) {
    // RF10: no credential, or one nobody owns: answered before any rate
    // check and spends no token, or forwarded uncounted.
    if (policy.unknown_credential == policy::CredentialSpec::Unknown::kForward) {
      d.verdict = Verdict::kForward;
      return true;
    }
    respond(d, Verdict::kAnswer, *policy.unauthorized);
    return true;
  }
  if (rule.missing_key == policy::RuleSpec::MissingKey::kAnswer400) {
    respond(d, Verdict::kAnswer, *policy.bad_request);
    return true;
  }
  return false;
}

// A `scope: cluster` bucket's key, the same on every box: made
// with the cluster's shared secret from the material itself (a credential's
// digest is keyed with the box's own secret), the bucket told apart by its
// name's salt rather than its kind, which each box gives as it likes; the
// kind goes in the low bits as ever.
BucketKey cluster_key(const KeyHasher& cluster, const CompiledBucket& b, std::span<const uint8_t> material) noexcept {
  const BucketKey k = cluster.key(0, material);
  return {(k.k0 ^ b.cluster_salt) | (uint64_t{1} << 63), ((k.k1 ^ b.cluster_salt) & ~uint64_t{0xffff}) | b.index};
}

// A layered rule's other buckets, each keyed by the rule's key as its first
// is (a live run's own budget applies to the first alone).
[[gnu::noinline]] void plan_layers(const CompiledPolicy& policy, LimiterState& state, const CompiledRule& rule,
                                   const KeyMaterial& key, Charge& out) noexcept {
  for (uint8_t i = 0; i < rule.also_count; ++i) {
    Charge::Layer& l = out.also[out.also_count++];
    const CompiledBucket& b = policy.buckets[rule.also[i]];
    l.bucket = &b;
    if (b.cluster_salt != 0 && state.cluster_hasher != nullptr) {
      l.key = cluster_key(*state.cluster_hasher, b, key.bytes);
    } else {
      l.key = key.credential ? state.bucket_hasher.key(b.index, *key.credential) : state.bucket_hasher.key(b.index, key.bytes);
    }
    l.window = b.window;
    if (b.calendar && !b.quotas.empty()) {
      const std::string_view k(reinterpret_cast<const char*>(key.bytes.data()), key.bytes.size());
      if (const auto it = b.quotas.find(k); it != b.quotas.end()) l.window = it->second;
    }
  }
}

// The bucket and key a request is charged to. TB07: past the ceiling, a
// credential the address has not been using is counted against the
// address's own budget.
[[gnu::always_inline]] inline void plan_charge(const CompiledPolicy& policy, LimiterState& state,
                                               const CompiledRule& rule, KeyMaterial key, uint64_t run_budget,
                                               LazyClientIp& client, Nanos now, Decision& d, Charge& out) noexcept {
  uint16_t bucket = rule.bucket;
  if (rule.slots_per_ip != 0 && key.credential) {
    const net::IpAddress& ip = client.get();
    const BucketKey record = state.bucket_hasher.key(policy.slot_kind, bytes_of(ip));
    if (!take_credential_slot(state.credential_records, record, credential_tag(key.credential->lo ^ key.credential->hi),
                              rule.slots_per_ip, rule.slots_quiet, now)) {
      bucket = rule.slots_overflow_bucket;
      key = bytes_key(bytes_of(ip), KeyLabel::Kind::kClientIp);
      d.over_credential_ceiling = true;
    }
  }
  out.rule = &rule;
  out.bucket = &policy.buckets[bucket];
  // Keyed by the bucket's kind, not its position in this policy: a reload
  // that keeps a bucket keeps its kind, and so its state.
  const uint16_t kind = out.bucket->index;
  if (out.bucket->cluster_salt != 0 && state.cluster_hasher != nullptr) {
    out.key = cluster_key(*state.cluster_hasher, *out.bucket, key.bytes);
  } else {
    out.key = key.credential ? state.bucket_hasher.key(kind, *key.credential) : state.bucket_hasher.key(kind, key.bytes);
  }
  d.label = label_of(key.label, key.bytes, key.credential, out.key);
  if (key.label == KeyLabel::Kind::kClientIp && policy.client_ip.spec.ipv6_prefix < 128) [[unlikely]] {
    net::IpAddress a;
    std::memcpy(a.bytes.data(), d.label.bytes.data(), a.bytes.size());
    if (!a.is_v4()) d.label.prefix = static_cast<uint8_t>(policy.client_ip.spec.ipv6_prefix);
  }
  out.due = true;
  out.run_budget = static_cast<uint32_t>(std::min<uint64_t>(run_budget, UINT32_MAX));
  if (out.bucket->calendar) {
    out.window = out.bucket->window;
    if (!out.bucket->quotas.empty()) {
      const std::string_view k(reinterpret_cast<const char*>(key.bytes.data()), key.bytes.size());
      if (const auto it = out.bucket->quotas.find(k); it != out.bucket->quotas.end()) out.window = it->second;
    }
    // A run's own budget is per minute: a longer window holds as many
    // minutes' worth.
    if (out.run_budget != 0) {
      out.window.requests = static_cast<uint32_t>(
          std::min<uint64_t>(uint64_t{out.run_budget} * out.window.calendar.span_minutes, UINT32_MAX));
    }
  }
  // Layered budgets: the rule's other buckets, by the same key (a
  // credential past its TB07 ceiling is counted in the overflow bucket
  // alone).
  out.also_count = 0;
  if (rule.also_count != 0 && !d.over_credential_ceiling) [[unlikely]] plan_layers(policy, state, rule, key, out);
  // The penalty box, by the key charged; a cluster rule's box is keyed as
  // the cluster keys it, so that every box names it alike (its boxings are
  // replicated).
  out.penalty = rule.penalty_bucket != CompiledRule::kNoPenalty;
  if (out.penalty) [[unlikely]] {
    const CompiledBucket& pb = policy.buckets[rule.penalty_bucket];
    if (pb.cluster_salt != 0 && state.cluster_hasher != nullptr) {
      out.penalty_key = cluster_key(*state.cluster_hasher, pb, key.bytes);
    } else {
      out.penalty_key =
          key.credential ? state.bucket_hasher.key(pb.index, *key.credential) : state.bucket_hasher.key(pb.index, key.bytes);
    }
  }
  // The in-flight count, likewise the box's own.
  out.in_flight = rule.in_flight_bucket != CompiledRule::kNoBucket;
  if (out.in_flight) [[unlikely]] {
    const uint16_t ik = policy.buckets[rule.in_flight_bucket].index;
    out.in_flight_key = key.credential ? state.bucket_hasher.key(ik, *key.credential) : state.bucket_hasher.key(ik, key.bytes);
  }
}

// The first rule from `from` on that applies to `path`; rules.size(): none.
size_t first_applying(const CompiledPolicy& policy, LimiterState& state, const Request& request,
                      std::string_view path, size_t from, std::span<std::string_view, PathPattern::kMaxParams> params,
                      int& matched, uint64_t& run_budget) noexcept {
  for (size_t i = from; i < policy.rules.size(); ++i) {
    if (rule_applies(policy.rules[i], state, request, path, params, matched, run_budget)) return i;
  }
  return policy.rules.size();
}

// How long a bucket takes, at its steady rate, to admit one more request:
// the longer, the fewer it admits. A continuous bucket's emission interval;
// a calendar bucket's minute over its request quota. 0: no request limit at
// all (a calendar bucket with only a token quota), which admits the most.
Nanos one_request_per(const CompiledBucket& b) noexcept {
  if (!b.calendar) return b.gcra.interval;
  return b.window.requests == 0 ? 0 : b.window.calendar.span() / b.window.requests;
}

// How many requests it admits back to back from full.
uint32_t back_to_back(const CompiledBucket& b) noexcept {
  return b.calendar ? b.window.requests : b.gcra.burst;
}

// ambiguous_paths: strictest: whether rule `a`'s bucket admits fewer
// requests than rule `b`'s: the lower steady rate, then the smaller burst.
// An unlimited calendar bucket admits more than any other (0 sorts first).
bool admits_fewer(const CompiledPolicy& policy, const CompiledRule& a, const CompiledRule& b) noexcept {
  const CompiledBucket& x = policy.buckets[a.bucket];
  const CompiledBucket& y = policy.buckets[b.bucket];
  const Nanos xi = one_request_per(x), yi = one_request_per(y);
  if (xi != yi) return xi == 0 ? false : (yi == 0 ? true : xi > yi);
  const uint32_t xb = back_to_back(x), yb = back_to_back(y);
  if (xb != yb) return xb == 0 ? false : (yb == 0 ? true : xb < yb);
  return false;
}

// The first rule that applies to `path`, its key and its bucket, planned into
// `d` and `out`. With `raw` (ambiguous_paths: strictest, `path` then the
// normalised reading), the rule the raw bytes match competes at each step,
// and the one that admits fewer wins; a rule wins over no rule.
// `params` and `raw_params` are filled by the pattern that matches each
// reading; only its own parameters are read.
void plan_rules(const CompiledPolicy& policy, LimiterState& state, const Request& request,
                Nanos now, DecisionScratch& scratch, std::string_view path,
                std::span<std::string_view, PathPattern::kMaxParams> params, const std::string_view* raw,
                std::span<std::string_view, PathPattern::kMaxParams> raw_params, Decision& d, Charge& out) noexcept {
  LazyClientIp client(policy, request);
  const size_t none = policy.rules.size();
  size_t from = 0;
  while (from < none) {
    int matched = -1;
    uint64_t run_budget = 0;
    size_t at = first_applying(policy, state, request, path, from, params, matched, run_budget);
    std::span<const std::string_view, PathPattern::kMaxParams> use = params;
    if (raw != nullptr) [[unlikely]] {
      int raw_matched = -1;
      uint64_t raw_budget = 0;
      const size_t raw_at = first_applying(policy, state, request, *raw, from, raw_params, raw_matched, raw_budget);
      if (raw_at != at && raw_at != none &&
          (at == none || admits_fewer(policy, policy.rules[raw_at], policy.rules[at]))) {
        at = raw_at;
        matched = raw_matched;
        run_budget = raw_budget;
        use = raw_params;
      }
    }
    if (at == none) break;
    const CompiledRule& rule = policy.rules[at];
    const KeyMaterial key = key_material(policy, state, rule, matched, use, request, client, scratch);
    d.rule = static_cast<int16_t>(rule.index);
    d.rule_counter = rule.counter_slot;
    if (key.missing) {
      if (answer_missing_key(policy, rule, d)) return;
      d.rule = -1;
      from = at + 1;
      continue;  // the rule does not apply to this request
    }
    plan_charge(policy, state, rule, key, run_budget, client, now, d, out);
    return;
  }
  d.verdict = Verdict::kForward;
}

// plan() into the caller's decision and charge (decide()'s are its own
// locals, returned without a copy).
void plan_into(const CompiledPolicy& policy, LimiterState& state, const Request& request, Nanos now,
               DecisionScratch& scratch, Decision& d, Charge& out) noexcept {
  out.request = &request;
  // Filled by the pattern that matches; only its own parameters are read.
  std::array<std::string_view, PathPattern::kMaxParams> params;
  // Normal form (most paths, told in a few vector compares): every origin
  // reads the path as written, so it is judged as written, exemptions
  // included, and the normaliser has nothing to do.
  if (policy::classify_path(request.path).normal()) [[likely]] {
    const std::string_view path = request.path;
    if (exempt(policy, request, path, params)) {
      d.verdict = Verdict::kExempt;
      return;
    }
    // The first rule that applies, written out here rather than through
    // plan_rules(): every request takes this loop, and inlined it costs
    // about a hundred instructions less (callgrind, packet_rate admitted).
    LazyClientIp client(policy, request);
    for (const uint16_t i : policy.dispatch.candidates(path)) {
      const CompiledRule& rule = policy.rules[i];
      int matched = -1;
      uint64_t run_budget = 0;
      if (!rule_applies(rule, state, request, path, params, matched, run_budget)) continue;
      const KeyMaterial key = key_material(policy, state, rule, matched, params, request, client, scratch);
      d.rule = static_cast<int16_t>(rule.index);
      d.rule_counter = rule.counter_slot;
      if (key.missing) {
        if (answer_missing_key(policy, rule, d)) return;
        d.rule = -1;
        continue;  // the rule does not apply to this request
      }
      plan_charge(policy, state, rule, key, run_budget, client, now, d, out);
      return;
    }
    d.verdict = Verdict::kForward;
    return;
  }
  // Origins read this path differently, and which reading this origin takes
  // the appliance cannot know: it never guesses in the client's favour.
  if (policy.ambiguous_paths == policy::AmbiguousPaths::kRefuse) {
    d.path_reading = PathReading::kRefused;
    respond(d, Verdict::kAnswer, *policy.bad_request);
    return;
  }
  // Strictest: no exemption of any kind, and of the raw and the normalised
  // readings, the rule that admits fewer.
  d.path_reading = PathReading::kStrictest;
  const std::string_view normalised =
      policy::normalize_path(request.path, std::span<char>(scratch.path, request.path.size() + 1));
  std::array<std::string_view, PathPattern::kMaxParams> raw_params;
  plan_rules(policy, state, request, now, scratch, normalised, params, &request.path, raw_params, d, out);
}

// What a charged rule decides, once its buckets have spoken: forward
// (with fields), answer with the rule's answer, or refuse with `refusal`.
// `d.fields` are the caller's (named as an answer needs them).
void conclude(const CompiledPolicy& policy, const CompiledRule& rule, const Request& request, bool admit,
              const policy::ResponseTemplate& refusal, const policy::FramedAnswer* framed, DecisionScratch& scratch,
              Decision& d) noexcept {
  if (admit || rule.shadow || policy.shadow) {
    d.shadow_refusal = !admit;
    if (rule.answer_status != 0 && rule.answer != nullptr) {
      d.answer.charged = true;
      respond(d, Verdict::kAnswer, *rule.answer);
    } else {
      d.verdict = Verdict::kAdmit;
    }
    return;
  }
  d.answer.charged = true;
  d.answer.trace_id = next_trace_id(scratch);
  d.answer.origin = request.value(field::kOrigin);
  d.answer.cors = cors_grant(policy, request);
  d.answer.framed = framed;
  respond(d, Verdict::kRefuse, refusal);
}

// Whether the rule's request is forwarded (admitted, or refused in shadow)
// rather than answered: its fields then go on the origin's response.
bool forwards(const CompiledPolicy& policy, const CompiledRule& rule, bool admit) noexcept {
  return (admit || rule.shadow || policy.shadow) && !(rule.answer_status != 0 && rule.answer != nullptr);
}

// How long a rule's over-budget request may wait for a rate bucket of
// `interval` (0: not at all). Waits of one key are one interval apart, so
// capping them at delay_per_key intervals lets at most that many wait.
Nanos delay_allowance(const CompiledRule& rule, Nanos interval, const DecisionScratch& scratch) noexcept {
  if (rule.delay_max == 0 || !scratch.may_delay) return 0;
  if (interval > rule.delay_max / rule.delay_per_key) return rule.delay_max;
  return interval * rule.delay_per_key;
}

// One bucket of a layered rule: charged (or only looked at), and what it
// takes to take the charge back.
struct LayerOutcome {
  bool admit = false;
  bool overflow = false;
  bool wrote = false;       // a window counted the request
  uint64_t window = 0;      // a window's first minute
  Nanos interval = 0;       // a GCRA admission's step
  Nanos wait = 0;           // a GCRA admission's delay
  GcraLimit gcra;           // the limit it was charged at
  policy::TemplateValues v;
};

LayerOutcome charge_layer(LimiterState& state, const CompiledBucket& b, const BucketKey& key, const WindowLimit& w,
                          uint32_t run_budget, Nanos now, bool peek, const CompiledRule* delaying = nullptr,
                          const DecisionScratch* scratch = nullptr) noexcept {
  LayerOutcome o;
  o.v.limit = b.header_limit;
  o.v.window = b.header_window_s;
  o.v.policy = b.name;
  if (b.calendar) {
    const WindowDecision c = peek ? peek_window(state.buckets, key, now, w) : [&] {
      const WindowCharge wc = charge_window(state.buckets, key, now, w);
      o.overflow = wc.overflow;
      return wc.decision;
    }();
    o.admit = c.admit;
    o.wrote = !peek && c.write;
    o.window = w.calendar.window_of(now);
    o.v.limit = w.requests;
    o.v.remaining = c.remaining;
    o.v.reset = c.reset_s;
    o.v.retry_after = c.retry_after_s;
    return o;
  }
  GcraLimit run_limit;
  const bool own = run_budget != 0 && GcraLimit::make(run_budget, time::kNanosPerMinute, run_budget, run_limit);
  if (own) {
    o.v.limit = run_budget;
    o.v.window = 60;
  }
  const GcraLimit& limit = own ? run_limit : b.gcra;
  GcraDecision c;
  if (peek) {
    c = peek_gcra(state.buckets, key, now, limit);
  } else {
    const Nanos max_wait = delaying != nullptr ? delay_allowance(*delaying, limit.interval, *scratch) : 0;
    const GcraCharge gc = charge_gcra(state.buckets, key, now, limit, max_wait);
    c = gc.decision;
    o.overflow = gc.overflow;
    o.wait = c.wait;
  }
  o.admit = c.admit;
  o.interval = limit.interval;
  o.gcra = limit;
  o.v.remaining = c.remaining;
  o.v.reset = c.reset_s;
  o.v.retry_after = c.retry_after_s;
  return o;
}

// Layered budgets (a rule with several buckets), all or none: each bucket
// charged in turn; at the first that refuses, the ones before are taken
// back and the ones after only looked at, so that the refusal names every
// exhausted budget and waits for the longest. A window that refuses counts
// the request as a single window's refusal does (DQ04). The fields list
// every budget, the binding one first: the exhausted one with the longest
// wait, or the one with the fewest requests left.
[[gnu::noinline]] void finish_layered(const CompiledPolicy& policy, LimiterState& state, const Charge& p, Nanos now,
                                      DecisionScratch& scratch, Decision& d) noexcept {
  const CompiledRule& rule = *p.rule;
  const size_t n = size_t{1} + p.also_count;
  std::array<const CompiledBucket*, kMaxRuleBuckets> buckets{p.bucket};
  std::array<const BucketKey*, kMaxRuleBuckets> keys{&p.key};
  std::array<const WindowLimit*, kMaxRuleBuckets> windows{&p.window};
  for (size_t i = 1; i < n; ++i) {
    buckets[i] = p.also[i - 1].bucket;
    keys[i] = &p.also[i - 1].key;
    windows[i] = &p.also[i - 1].window;
  }
  std::array<LayerOutcome, kMaxRuleBuckets> out;
  size_t refused_at = n;
  for (size_t i = 0; i < n; ++i) {
    out[i] = charge_layer(state, *buckets[i], *keys[i], *windows[i], i == 0 ? p.run_budget : 0, now,
                          refused_at != n, &rule, &scratch);
    if (!out[i].admit && refused_at == n) refused_at = i;
  }
  const bool admit = refused_at == n;
  size_t binding = 0;
  for (size_t i = 0; i < n; ++i) {
    LayerOutcome& o = out[i];
    if (!admit && i < refused_at && o.admit) {
      if (buckets[i]->calendar) {
        if (o.wrote) uncharge_window(state.buckets, *keys[i], o.overflow, o.window);
      } else {
        uncharge_gcra(state.buckets, *keys[i], o.overflow, o.interval);
      }
      o.wrote = false;
    }
    // A refused request's fields show each bucket that would have admitted
    // it as it stands, without it.
    if (!admit && o.admit) {
      if (buckets[i]->calendar) {
        o.v = charge_layer(state, *buckets[i], *keys[i], *windows[i], 0, now, true).v;
        ++o.v.remaining;
      } else {
        const GcraStanding g = peek_gcra_standing(state.buckets, *keys[i], now, o.gcra);
        o.v.remaining = g.available;
        o.v.reset = g.reset_s;
      }
    }
    const LayerOutcome& best = out[binding];
    if (admit ? o.v.remaining < best.v.remaining
              : !o.admit && (best.admit || o.v.retry_after > best.v.retry_after)) {
      binding = i;
    }
  }
  d.overflow = out[binding].overflow;
  // Delayed: until every budget admits it.
  for (size_t i = 0; i < n && admit; ++i) d.delay = std::max(d.delay, out[i].wait);
  // What the other boxes must hear of: what stays charged.
  for (size_t i = 0; i < n && scratch.spends != nullptr; ++i) {
    const CompiledBucket& b = *buckets[i];
    if (b.cluster_salt == 0 || out[i].overflow || i > refused_at) continue;
    if (b.calendar) {
      if (out[i].wrote && (admit || i == refused_at)) {
        scratch.spends->record_window(*keys[i], static_cast<uint32_t>(out[i].window), 1, 0);
      }
    } else if (admit) {
      scratch.spends->record(*keys[i], out[i].interval);
    }
  }
  // DQ05: a request's tokens go to the window that counts them (at most
  // one a rule: compile_policy), else to its first window.
  for (size_t i = 0; i < n; ++i) {
    const CompiledBucket& b = *buckets[i];
    if (!b.calendar || (d.has_usage_key && windows[i]->tokens == 0)) continue;
    d.usage_key = *keys[i];
    d.usage_calendar = windows[i]->calendar;
    d.usage_shared = b.cluster_salt != 0;
    d.has_usage_key = true;
  }
  RateLimitFields& f = d.fields;
  f = ratelimit_values(rule.style, out[binding].v, true);
  size_t at = 0;
  for (size_t i = 0; i < n; ++i) {
    if (i == binding) continue;
    RateLimitFields::Other& o = f.others[f.more++];
    const policy::TemplateValues& v = out[i].v;
    o.limit = v.limit;
    o.remaining = v.remaining;
    o.reset = v.reset;
    o.window = v.window;
    o.name_len = static_cast<uint8_t>(std::min(v.policy.size(), RateLimitFields::kMaxOtherNames - at));
    o.name_at = static_cast<uint8_t>(at);
    std::memcpy(f.other_names + at, v.policy.data(), o.name_len);
    at += o.name_len;
  }
  if (!forwards(policy, rule, admit)) d.retry_after_s = out[binding].v.retry_after;
  conclude(policy, rule, *p.request, admit, binding == 0 ? *rule.refusal : *rule.also_refusal[binding - 1], nullptr,
           scratch, d);
  if (d.verdict != Verdict::kAdmit) d.delay = 0;  // answered: nothing to hold
}

void finish_into(const CompiledPolicy& policy, LimiterState& state, const Charge& p, Nanos now,
                 DecisionScratch& scratch, Decision& d) noexcept;

// A rule with a penalty box. A boxed key is refused until its box ends,
// its buckets not consulted (and the refusal not counted again: the box
// does not grow while it holds). Otherwise the rule decides as ever; each
// refusal is paced in the box's bucket, and the one that finds it empty
// (`after` refusals faster than `after` per `within`) boxes the key for
// `box_for`. Only requests on connections that completed a handshake reach
// a decision, so a spoofed address cannot box a victim's.
[[gnu::noinline]] void finish_penalised(const CompiledPolicy& policy, LimiterState& state, const Charge& p, Nanos now,
                                        DecisionScratch& scratch, Decision& d) noexcept {
  const CompiledRule& rule = *p.rule;
  const CompiledBucket& box = policy.buckets[rule.penalty_bucket];
  const BucketSlot* held = state.buckets.find(p.penalty_key);
  const uint64_t until = held != nullptr ? held->load(1) : 0;
  if (until != BucketTable::kFrozen && until > now) {
    const CompiledBucket& b = *p.bucket;
    policy::TemplateValues v;
    v.limit = b.header_limit;
    v.window = b.header_window_s;
    v.policy = b.name;
    v.retry_after = ceil_seconds(until - now);
    v.reset = v.retry_after;
    d.penalty = Decision::Penalty::kBoxed;
    d.boxed_until = until;
    d.fields = ratelimit_values(rule.style, v, true);
    if (!forwards(policy, rule, false)) d.retry_after_s = v.retry_after;
    conclude(policy, rule, *p.request, false, *rule.refusal, nullptr, scratch, d);
    return;
  }
  Charge plain = p;
  plain.penalty = false;
  finish_into(policy, state, plain, now, scratch, d);
  if (d.verdict != Verdict::kRefuse && !d.shadow_refusal) return;
  BucketTable::Found f = state.buckets.find_or_claim(p.penalty_key);
  for (;;) {
    uint64_t tat = f.slot->load(0);
    if (tat == BucketTable::kFrozen || f.overflow) return;  // no slot of its own: a box is a key's, never shared
    const GcraDecision g = gcra_decide(tat, now, box.gcra);
    const uint64_t next = g.admit ? g.new_tat : tat;
    if (next != tat && !f.slot->word(0).compare_exchange_weak(tat, next, std::memory_order_acq_rel,
                                                               std::memory_order_acquire)) {
      continue;
    }
    if (g.admit && g.remaining != 0) return;
    break;
  }
  // Boxed: the end moves only later, never back (another worker may have
  // boxed it a moment ago).
  const uint64_t end = now + box.box_for;
  uint64_t cur = f.slot->load(1);
  if (cur == BucketTable::kFrozen) return;  // being reclaimed: the key has no slot to hold a box
  while (cur < end && !f.slot->word(1).compare_exchange_weak(cur, end, std::memory_order_acq_rel,
                                                             std::memory_order_acquire)) {
  }
  d.penalty = Decision::Penalty::kBoxedNow;
  d.boxed_until = std::max(cur, end);
  d.penalty_key = p.penalty_key;
}

// A rule with a `concurrency`: a slot of the key's in-flight count is taken
// before any bucket is charged (a request that cannot run spends no
// budget); every slot taken, it is refused (Retry-After 1: a slot may come
// free at any moment) with draft-11's concurrent-requests fields. A request
// its buckets refuse, or that is answered rather than forwarded, gives the
// slot back at once; one forwarded keeps it until its response ends.
[[gnu::noinline]] void finish_in_flight(const CompiledPolicy& policy, LimiterState& state, const Charge& p, Nanos now,
                                        DecisionScratch& scratch, Decision& d) noexcept {
  const CompiledRule& rule = *p.rule;
  const bool shadow = rule.shadow || policy.shadow;
  if (!take_in_flight(state.buckets, p.in_flight_key, state.in_flight_epoch, rule.concurrency, shadow)) {
    const CompiledBucket& b = policy.buckets[rule.in_flight_bucket];
    policy::TemplateValues v;
    v.limit = rule.concurrency;
    v.window = 0;
    v.policy = b.name;
    v.retry_after = 1;
    v.reset = 1;
    d.refused_in_flight = true;
    d.fields = ratelimit_values(rule.style, v, true);
    d.fields.concurrent = true;
    if (!forwards(policy, rule, false)) d.retry_after_s = v.retry_after;
    conclude(policy, rule, *p.request, false, *rule.in_flight_refusal, nullptr, scratch, d);
    return;
  }
  Charge plain = p;
  plain.in_flight = false;
  finish_into(policy, state, plain, now, scratch, d);
  if (d.verdict == Verdict::kAdmit) {
    d.holds_in_flight = true;
    d.in_flight_key = p.in_flight_key;
  } else {
    release_in_flight(state.buckets, p.in_flight_key, state.in_flight_epoch);
  }
}

// The charge a plan left, made, and what it decides written into `d`.
void finish_into(const CompiledPolicy& policy, LimiterState& state, const Charge& p, Nanos now,
                 DecisionScratch& scratch, Decision& d) noexcept {
  if (p.penalty) [[unlikely]] return finish_penalised(policy, state, p, now, scratch, d);
  if (p.in_flight) [[unlikely]] return finish_in_flight(policy, state, p, now, scratch, d);
  if (p.also_count != 0) [[unlikely]] return finish_layered(policy, state, p, now, scratch, d);
  const CompiledRule& rule = *p.rule;
  const CompiledBucket& b = *p.bucket;
  policy::TemplateValues v;
  v.limit = b.header_limit;
  v.window = b.header_window_s;
  v.policy = b.name;
  bool admit;
  if (b.calendar) {
    const WindowCharge c = charge_window(state.buckets, p.key, now, p.window);
    admit = c.decision.admit;
    d.overflow = c.overflow;
    v.limit = p.window.requests;
    v.remaining = c.decision.remaining;
    v.reset = c.decision.reset_s;
    v.retry_after = c.decision.retry_after_s;
    d.usage_key = p.key;
    d.usage_calendar = p.window.calendar;
    d.has_usage_key = true;
    d.usage_shared = b.cluster_salt != 0;
    // A request counted in a shared window is the other boxes'
    // business too (a refusal past the quota counts nothing more).
    if (c.decision.write && !c.overflow && b.cluster_salt != 0 && scratch.spends != nullptr) {
      scratch.spends->record_window(p.key, static_cast<uint32_t>(p.window.calendar.window_of(now)), 1, 0);
    }
  } else {
    // A run started with a budget of its own: N per minute, refilled
    // continuously, N back to back from full (the TB17 shape).
    GcraLimit run_limit;
    const bool own = p.run_budget != 0 && GcraLimit::make(p.run_budget, time::kNanosPerMinute, p.run_budget, run_limit);
    if (own) {
      v.limit = p.run_budget;
      v.window = 60;
      d.run_budget = p.run_budget;
    }
    const GcraLimit& limit = own ? run_limit : b.gcra;
    const GcraCharge c = charge_gcra(state.buckets, p.key, now, limit, delay_allowance(rule, limit.interval, scratch));
    admit = c.decision.admit;
    d.overflow = c.overflow;
    d.delay = c.decision.wait;
    // What the other boxes must hear of at the next sync (a
    // charge to the shared overflow bucket is this box's own).
    if (admit && !c.overflow && b.cluster_salt != 0 && scratch.spends != nullptr) {
      scratch.spends->record(p.key, own ? run_limit.interval : b.gcra.interval);
    }
    v.remaining = c.decision.remaining;
    v.reset = c.decision.reset_s;
    v.retry_after = c.decision.retry_after_s;
  }

  const bool forwarded = forwards(policy, rule, admit);
  d.fields = ratelimit_values(rule.style, v, !forwarded || rule.style == policy::HeaderStyle::kIetf);
  if (!forwarded) d.retry_after_s = v.retry_after;
  conclude(policy, rule, *p.request, admit, d.over_credential_ceiling ? *rule.overflow_refusal : *rule.refusal,
           rule.framed_refusal ? &*rule.framed_refusal : nullptr, scratch, d);
  if (d.delay != 0 && d.verdict != Verdict::kAdmit) [[unlikely]] d.delay = 0;  // answered: nothing to hold
}

}  // namespace

Plan plan(const CompiledPolicy& policy, LimiterState& state, const Request& request, Nanos now,
          DecisionScratch& scratch) noexcept {
  Plan out;
  plan_into(policy, state, request, now, scratch, out.decision, out.charge);
  return out;
}

const Decision& finish(const CompiledPolicy& policy, LimiterState& state, Plan& p, Nanos now,
                       DecisionScratch& scratch) noexcept {
  if (p.charge.due) finish_into(policy, state, p.charge, now, scratch, p.decision);
  return p.decision;
}

Decision decide(const CompiledPolicy& policy, LimiterState& state, const Request& request, Nanos now,
                DecisionScratch& scratch) noexcept {
  // Made in place: a Decision is some 200 bytes.
  Decision d;
  Charge charge;
  plan_into(policy, state, request, now, scratch, d, charge);
  if (charge.due) finish_into(policy, state, charge, now, scratch, d);
  return d;
}

Decision answer_unreadable(const CompiledPolicy& policy, uint16_t status) noexcept {
  const policy::ResponseTemplate* t = policy.bad_request;
  switch (status) {
    case 431: t = policy.too_large; break;
    case 501: t = policy.not_implemented; break;
    case 505: t = policy.bad_version; break;
    default: break;
  }
  Decision d;
  respond(d, Verdict::kAnswer, *t);
  return d;
}

Decision answer_timeout(const CompiledPolicy& policy) noexcept {
  Decision d;
  respond(d, Verdict::kAnswer, *policy.timed_out);
  return d;
}

BucketKey material_key(const LimiterState& state, const CompiledBucket& b, std::span<const uint8_t> material) noexcept {
  if (b.cluster_salt != 0 && state.cluster_hasher != nullptr) return cluster_key(*state.cluster_hasher, b, material);
  return state.bucket_hasher.key(b.index, material);
}

void report_usage(LimiterState& state, const BucketKey& usage_key, const Calendar& calendar, uint64_t tokens,
                  Nanos now, SpendLog* spends) noexcept {
  charge_tokens(state.buckets, usage_key, tokens, now, calendar);
  if (spends != nullptr) spends->record_window(usage_key, static_cast<uint32_t>(calendar.window_of(now)), 0, tokens);
}

}  // namespace sluice::limiter

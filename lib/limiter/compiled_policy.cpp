// See compiled_policy.h.
#include "limiter/compiled_policy.h"

#include <algorithm>
#include <cctype>

#include "limiter/credential.h"
#include "limiter/decide.h"
#include "limiter/in_flight.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace sluice::limiter {

namespace {

using policy::PolicyError;

Method method_of(std::string_view m) {
  static constexpr std::pair<std::string_view, Method> kMethods[] = {
      {"GET", Method::kGet},         {"HEAD", Method::kHead},       {"POST", Method::kPost},
      {"PUT", Method::kPut},         {"DELETE", Method::kDelete},   {"OPTIONS", Method::kOptions},
      {"PATCH", Method::kPatch},     {"CONNECT", Method::kConnect}, {"TRACE", Method::kTrace}};
  for (const auto& [name, method] : kMethods) {
    if (name == m) return method;
  }
  return Method::kOther;
}

MethodSet method_set(const std::vector<std::string>& methods) {
  MethodSet s;
  s.any = methods.empty();
  for (const std::string& m : methods) {
    const Method k = method_of(m);
    if (k == Method::kOther) s.other.push_back(m);
    else s.known |= 1u << static_cast<unsigned>(k);
  }
  return s;
}

// Digest of everything that decides behaviour, for `policy show`.
uint64_t policy_digest(const policy::Policy& p) {
  std::string s = p.name;
  auto add = [&](std::string_view v) {
    s += '\x1f';
    s += v;
  };
  for (const auto& b : p.buckets) {
    add(b.name);
    add(std::to_string(b.count) + "/" + std::to_string(b.period) + "/" + std::to_string(b.burst) + "/" +
        std::to_string(b.requests) + "/" + std::to_string(b.tokens));
    // Only where not a UTC minute, so that the digests of policies written
    // before hour and day windows stay what they were.
    if (b.window_minutes != 1 || b.utc_offset_minutes != 0) {
      add(std::to_string(b.window_minutes) + "@" + std::to_string(b.utc_offset_minutes));
    }
    for (const auto& o : b.overrides) add(o.key + std::to_string(o.requests) + "/" + std::to_string(o.tokens));
  }
  for (const auto& r : p.rules) {
    add(r.name);
    add(r.bucket);
    for (const auto& b : r.also_buckets) add("+" + b);
    if (r.concurrency != 0) add("concurrency " + std::to_string(r.concurrency));
    if (r.delay.max != 0) add("delay " + std::to_string(r.delay.max) + "/" + std::to_string(r.delay.per_key));
    if (r.penalty.after != 0) {
      add("penalty " + std::to_string(r.penalty.after) + "/" + std::to_string(r.penalty.within) + "/" +
          std::to_string(r.penalty.box_for));
    }
    for (const auto& path : r.paths) add(path);
    for (const auto& m : r.methods) add(m);
    add(std::to_string(static_cast<int>(r.key.kind)) + r.key.name);
  }
  add(p.usage.response_field);
  // Only where it is not the default, so that the digests of policies
  // written before the setting existed stay as they were.
  if (p.ambiguous_paths == policy::AmbiguousPaths::kStrictest) add("ambiguous_paths: strictest");
  return XXH3_64bits(s.data(), s.size());
}

// Fills one CompiledPolicy in place, section by section. Rules point at the
// responses it holds, so it is built where it will live (a move keeps those
// addresses; a copy would not). Errors carry the policy's file and go to the
// caller's list; a section with errors is still compiled, so all are found.
class PolicyCompiler {
 public:
  PolicyCompiler(const policy::Policy& p, FieldRegistry& fields, CompiledPolicy& c, std::vector<PolicyError>& errors)
      : p_(p), fields_(fields), c_(c), errors_(errors), top_{p.file, 0, 0} {}

  // What applies to every request: mode, parser limits, the usage field.
  void settings() {
    c_.source = p_;
    c_.digest = policy_digest(p_);
    for (const char ch : p_.usage.response_field) {
      c_.usage_field += (ch >= 'A' && ch <= 'Z') ? static_cast<char>(ch | 0x20) : ch;
    }
    c_.shadow = p_.shadow;
    c_.keep_alive_answers = p_.after_answer == policy::AfterAnswer::kKeepAlive;
    c_.ambiguous_paths = p_.ambiguous_paths;
    c_.deadlines = p_.deadlines;
    c_.syn_proxy = p_.syn_proxy;
    c_.adoption = p_.adoption;
    c_.delayed_binding = p_.syn_proxy && p_.delayed_binding;
  }

  // Where a request's client address and credential are read from.
  void client_identity(const KeyHasher& credential_hasher) {
    c_.client_ip.spec = p_.client_ip;
    for (const std::string& h : p_.client_ip.headers) c_.client_ip.fields.push_back(track(h, top_));
    c_.credential_field = track(p_.credentials.header, top_);
    c_.unknown_credential = p_.credentials.unknown;
    for (const std::string& a : p_.credentials.anonymous) {
      char buf[4096];
      const std::string_view norm = normalize_credential(a, buf);
      c_.anonymous.push_back(credential_hasher.digest(
          std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(norm.data()), norm.size())));
    }
  }

  void cors_and_exemptions() {
    for (const std::string& o : p_.cors.allow_origins) {
      if (o == "*") c_.cors_any_origin = true;
      else c_.cors_origins.push_back(o);
    }
    for (const std::string& path : p_.cors.preflight_paths) {
      c_.preflight_paths.push_back(*policy::PathPattern::compile(path, nullptr));
    }
    if (!p_.cors.expose_headers.empty()) {
      c_.cors_expose = "Access-Control-Expose-Headers: ";
      for (size_t i = 0; i < p_.cors.expose_headers.size(); ++i) {
        c_.cors_expose += (i ? ", " : "") + p_.cors.expose_headers[i];
      }
      c_.cors_expose += "\r\n";
    }
    for (const policy::Exemption& e : p_.exemptions) c_.exemptions.push_back({method_set(e.methods), e.path});
  }

  void buckets() {
    for (const policy::BucketSpec& b : p_.buckets) {
      CompiledBucket cb;
      if (bucket(b, cb)) c_.buckets.push_back(std::move(cb));
    }
    c_.slot_kind = static_cast<uint16_t>(c_.buckets.size());
  }

  // The policy's own answers, and those to heads the parser refused.
  void answers() {
    c_.refusal = response(p_.refusal, top_, true);
    c_.unauthorized = response(p_.unauthorized, top_, false);
    c_.not_found = response(p_.not_found, top_, false);
    c_.bad_request = simple(400, "bad_request");
    c_.too_large = simple(431, "request_header_fields_too_large");
    c_.not_implemented = simple(501, "not_implemented");
    c_.bad_version = simple(505, "http_version_not_supported");
    c_.timed_out = simple(408, "request_timeout");
  }

  // After buckets() and answers(): rules name buckets and share answers.
  void rules() {
    for (const policy::RuleSpec& r : p_.rules) {
      CompiledRule cr;
      rule_match(r, cr);
      if (!rule_budget(r, cr)) continue;
      rule_answers(r, cr);
      c_.rules.push_back(std::move(cr));
    }
    std::vector<const std::vector<policy::PathPattern>*> patterns;
    for (const CompiledRule& cr : c_.rules) patterns.push_back(&cr.paths);
    c_.dispatch.build(patterns);
  }

 private:
  void fail(const policy::Mark& m, std::string message) {
    errors_.push_back({p_.file, m.line, m.column, std::move(message)});
  }

  FieldId track(const std::string& name, const policy::Mark& m) {
    const std::optional<FieldId> id = fields_.track(name);
    if (!id) {
      fail(m, "cannot track field " + name + " (more than 32 tracked fields, or a name over 64 bytes)");
      return 0;
    }
    return *id;
  }

  // False (and an error) if its rate cannot be represented.
  bool bucket(const policy::BucketSpec& b, CompiledBucket& cb) {
    cb.name = b.name;
    cb.index = static_cast<uint16_t>(c_.buckets.size());
    cb.idle_drop_after = b.idle_drop_after;
    if (b.scope == policy::BucketSpec::Scope::kCluster) {
      cb.cluster_salt = XXH3_64bits_withSeed(b.name.data(), b.name.size(), 0x736c756963652d63ull) | 1;  // "sluice-c"
    }
    if (b.kind == policy::BucketSpec::Kind::kCalendar) {
      cb.calendar = true;
      const Calendar calendar{b.window_minutes, b.utc_offset_minutes};
      if (!calendar.valid()) {
        fail(b.mark, "bucket " + b.name + ": the window's span or UTC offset cannot be represented");
        return false;
      }
      cb.window = {b.requests, b.tokens, calendar};
      for (const auto& o : b.overrides) {
        cb.quotas.emplace(o.key, WindowLimit{o.requests, o.tokens, calendar});
      }
      cb.header_limit = b.requests;
      cb.header_window_s = calendar.span_seconds();
      return true;
    }
    if (!GcraLimit::make(b.count, b.period, b.burst, cb.gcra)) {
      fail(b.mark, "bucket " + b.name + ": rate and burst cannot be represented");
      return false;
    }
    cb.header_limit = static_cast<uint32_t>(std::min<uint64_t>(b.count, UINT32_MAX));
    cb.header_window_s = static_cast<uint32_t>(b.period / time::kNanosPerSecond);
    return true;
  }

  // Renders `spec` into a template kept in the policy; nullptr (and an error)
  // if it cannot be rendered.
  // A problem-details refusal names `budget` in its body.
  const policy::ResponseTemplate* response(const policy::ResponseSpec& spec, const policy::Mark& m, bool refusal,
                                           std::string_view budget = {}) {
    policy::ResponseSpec s = spec;
    if (s.problem) s.body = policy::problem_body(s.status, budget);
    if (refusal) {
      // Every refusal says when to come back (TB15, RF09, DQ07, X05).
      bool has = false;
      for (const auto& [name, value] : s.headers) {
        std::string lower = name;
        std::transform(lower.begin(), lower.end(), lower.begin(),
                       [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
        has = has || lower == "retry-after";
      }
      if (!has) s.headers.insert(s.headers.begin(), {"Retry-After", "{retry_after}"});
    }
    std::string why;
    auto t = policy::ResponseTemplate::compile(s, &why);
    if (!t) {
      fail(m, why);
      return nullptr;
    }
    c_.responses.push_back(std::move(*t));
    return &c_.responses.back();
  }

  const policy::ResponseTemplate* simple(uint16_t status, std::string_view message) {
    policy::ResponseSpec s;
    s.status = status;
    s.headers = {{"Content-Type", "application/json"}};
    s.body = "{\"error\":{\"code\":\"" + std::string(message) + "\"}}";
    return response(s, top_, false);
  }

  // Which requests the rule applies to, and what its key is read from.
  void rule_match(const policy::RuleSpec& r, CompiledRule& cr) {
    cr.name = r.name;
    cr.index = static_cast<uint16_t>(c_.rules.size());
    cr.counter_slot = static_cast<uint8_t>(std::min<size_t>(cr.index, kRuleCounterSlots - 1));
    cr.methods = method_set(r.methods);
    for (const std::string& path : r.paths) {
      cr.paths.push_back(*policy::PathPattern::compile(path, nullptr));
      cr.live_run_param.push_back(r.live_run_param.empty() ? -1 : cr.paths.back().param_index(r.live_run_param));
      cr.key_param.push_back(r.key.kind == policy::KeySpec::Kind::kPathParam ? cr.paths.back().param_index(r.key.name)
                                                                             : -1);
    }
    for (const std::string& f : r.require_fields) cr.require.push_back(track(f, r.mark));
    cr.key_kind = r.key.kind;
    if (r.key.kind == policy::KeySpec::Kind::kHeader) cr.key_field = track(r.key.name, r.mark);
    if (r.key.kind == policy::KeySpec::Kind::kHost) cr.key_field = field::kHost;
    cr.missing_key = r.missing_key;
  }

  // The bucket the rule counts in and its credential ceiling (TB07); false
  // (and an error) if a bucket it names is not there.
  bool rule_budget(const policy::RuleSpec& r, CompiledRule& cr) {
    const CompiledBucket* b = c_.bucket_named(r.bucket);
    if (!b) {
      fail(r.mark, "rule " + r.name + ": no bucket named " + r.bucket);
      return false;
    }
    cr.bucket = b->index;
    // Layered budgets: the other buckets, charged with the first.
    size_t names = 0;
    bool tokens = b->calendar && b->window.tokens != 0;
    for (const std::string& name : r.also_buckets) {
      const CompiledBucket* o = c_.bucket_named(name);
      if (!o) {
        fail(r.mark, "rule " + r.name + ": no bucket named " + name);
        return false;
      }
      if (cr.also_count == cr.also.size()) {
        fail(r.mark, "rule " + r.name + ": more than " + std::to_string(cr.also.size() + 1) + " buckets");
        return false;
      }
      // A request's tokens are charged, when its response ends, to one
      // window (Decision::usage_key).
      if (o->calendar && o->window.tokens != 0) {
        if (tokens) {
          fail(r.mark, "rule " + r.name + ": only one of a rule's buckets may count tokens (" + name + " is the second)");
          return false;
        }
        tokens = true;
      }
      names += name.size();
      cr.also[cr.also_count++] = o->index;
    }
    if (names > RateLimitFields::kMaxOtherNames) {
      fail(r.mark, "rule " + r.name + ": the names of its buckets after the first take " + std::to_string(names) +
                       " characters, more than " + std::to_string(RateLimitFields::kMaxOtherNames));
      return false;
    }
    if (r.penalty.after != 0 && !penalty_box(r, cr, b->cluster_salt != 0)) return false;
    if (r.concurrency != 0) in_flight(r, cr);
    cr.delay_max = r.delay.max;
    cr.delay_per_key = r.delay.per_key;
    c_.delays = c_.delays || cr.delay_max != 0;
    if (r.credential_slots.per_client_ip == 0) return true;
    const CompiledBucket* ob = c_.bucket_named(r.credential_slots.overflow_bucket);
    if (!ob) {
      fail(r.mark, "rule " + r.name + ": no bucket named " + r.credential_slots.overflow_bucket);
      return false;
    }
    cr.slots_per_ip = r.credential_slots.per_client_ip;
    cr.slots_quiet = r.credential_slots.quiet;
    cr.slots_overflow_bucket = ob->index;
    c_.max_slots = std::max<unsigned>(c_.max_slots, cr.slots_per_ip);
    return true;
  }

  // A bucket of the rule's own, not in the policy's buckets: named
  // RULE/WHAT, which no policy bucket can be ('/' is not in a plain name),
  // after the policy's buckets; its index.
  uint16_t synthetic_bucket(const policy::RuleSpec& r, std::string_view what, CompiledBucket b) {
    b.name = r.name + "/" + std::string(what);
    b.index = static_cast<uint16_t>(c_.buckets.size());
    c_.buckets.push_back(std::move(b));
    return c_.buckets.back().index;
  }

  // The rule's penalty box (RULE/penalty), whose first word paces the key's
  // refusals and whose second holds when its box ends. A rule whose bucket
  // the cluster shares (`shared`) keys its box as the cluster does, so that
  // a boxing on one box names the same key on all.
  bool penalty_box(const policy::RuleSpec& r, CompiledRule& cr, bool shared) {
    CompiledBucket pb;
    pb.penalty = true;
    pb.box_for = r.penalty.box_for;
    if (!GcraLimit::make(r.penalty.after, r.penalty.within, r.penalty.after, pb.gcra)) {
      fail(r.mark, "rule " + r.name + ": penalty after and within cannot be represented");
      return false;
    }
    if (shared) {
      const std::string name = r.name + "/penalty";
      pb.cluster_salt = XXH3_64bits_withSeed(name.data(), name.size(), 0x736c756963652d63ull) | 1;  // as bucket()'s
    }
    cr.penalty_bucket = synthetic_bucket(r, "penalty", std::move(pb));
    return true;
  }

  // The rule's in-flight count (RULE/concurrency), whose first word counts
  // the key's requests admitted and not yet answered, under this process's
  // epoch (in_flight.h).
  void in_flight(const policy::RuleSpec& r, CompiledRule& cr) {
    CompiledBucket ib;
    ib.in_flight = true;
    ib.header_limit = r.concurrency;
    cr.in_flight_bucket = synthetic_bucket(r, "concurrency", std::move(ib));
    cr.concurrency = r.concurrency;
  }

  // What an admitted request gets, what a refused one gets, and the
  // rate-limit fields both carry.
  void rule_answers(const policy::RuleSpec& r, CompiledRule& cr) {
    cr.answer_status = r.answer_status;
    if (r.answer_status != 0) {
      if (r.answer) {
        cr.answer = response(*r.answer, r.mark, false);
      } else if (r.answer_status == 404) {
        cr.answer = c_.not_found;
      } else {
        policy::ResponseSpec s;
        s.status = r.answer_status;
        cr.answer = response(s, r.mark, false);
      }
    }
    const CompiledBucket* b = c_.bucket_named(r.bucket);
    // A problem-details refusal is written for each bucket it may name:
    // the rule's, and the TB07 overflow bucket's.
    const policy::ResponseSpec& spec = r.refusal ? *r.refusal : p_.refusal;
    if (spec.problem) {
      cr.refusal = response(spec, r.mark, true, b != nullptr ? std::string_view(b->name) : std::string_view());
      const CompiledBucket* o = c_.bucket_named(r.credential_slots.overflow_bucket);
      cr.overflow_refusal = o != nullptr ? response(spec, r.mark, true, o->name) : cr.refusal;
      for (uint8_t i = 0; i < cr.also_count; ++i) {
        cr.also_refusal[i] = response(spec, r.mark, true, c_.buckets[cr.also[i]].name);
      }
      cr.in_flight_refusal = cr.in_flight_bucket != CompiledRule::kNoBucket
                                 ? response(spec, r.mark, true, c_.buckets[cr.in_flight_bucket].name)
                                 : cr.refusal;
    } else {
      cr.refusal = r.refusal ? response(*r.refusal, r.mark, true) : c_.refusal;
      cr.overflow_refusal = cr.refusal;
      for (uint8_t i = 0; i < cr.also_count; ++i) cr.also_refusal[i] = cr.refusal;
      cr.in_flight_refusal = cr.refusal;
    }
    cr.style = r.header_style.value_or(p_.header_style);
    // The styles' templates are made on first use: here, off the hot path.
    (void)policy::ratelimit_fields(cr.style);
    if (cr.refusal != nullptr && b != nullptr && !b->calendar) {
      cr.framed_refusal.emplace(*cr.refusal, cr.style, b->header_limit, b->header_window_s, b->name);
    }
    cr.shadow = r.shadow;
  }

  const policy::Policy& p_;
  FieldRegistry& fields_;
  CompiledPolicy& c_;
  std::vector<PolicyError>& errors_;
  const policy::Mark top_;
};

}  // namespace

bool MethodSet::contains_other(std::string_view method) const noexcept {
  for (const std::string& m : other) {
    if (m == method) return true;
  }
  return false;
}

const CompiledBucket* CompiledPolicy::bucket_named(std::string_view name) const noexcept {
  for (const CompiledBucket& b : buckets) {
    if (b.name == name) return &b;
  }
  return nullptr;
}

const CompiledRule* CompiledPolicy::rule_named(std::string_view name) const noexcept {
  for (const CompiledRule& r : rules) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

bool bucket_idle(const CompiledPolicy& p, uint16_t kind, const uint64_t* words, Nanos now,
                 uint16_t in_flight_epoch) noexcept {
  const CompiledBucket* found = nullptr;
  for (const CompiledBucket& b : p.buckets) {
    if (b.index == kind) found = &b;
  }
  if (found == nullptr) return false;
  const CompiledBucket& b = *found;
  if (b.calendar) return window_idle(words[0], words[1], now, b.window.calendar);
  if (b.penalty) return words[1] <= now && gcra_full(words[0], now);
  if (b.in_flight) return in_flight_count(words[0], in_flight_epoch) == 0;
  return gcra_full(words[0], now) && now - words[0] >= b.idle_drop_after;
}

bool compile_policy(const policy::Policy& p, FieldRegistry& fields, const KeyHasher& credential_hasher,
                    std::vector<PolicyError>& errors, CompiledPolicy& out) {
  const size_t errors_before = errors.size();
  // The order matters: field ids are given out as fields are tracked, and
  // errors are reported in the order they are found.
  PolicyCompiler k(p, fields, out, errors);
  k.settings();
  k.client_identity(credential_hasher);
  k.cors_and_exemptions();
  k.buckets();
  k.answers();
  k.rules();
  return errors.size() == errors_before;
}

}  // namespace sluice::limiter

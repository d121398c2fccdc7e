// See decide.h. The order is the design brief's: exemptions (health, CORS
// preflight), the first rule that matches (class, route family or
// deployment), its key (client address, credential, user, run, deployment),
// the bucket, the verdict, and the response rendered from its template.
#include "limiter/decide.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "http/host_name.h"
#include "http/response_stream.h"
#include "limiter/charge.h"
#include "limiter/credential.h"
#include "limiter/credential_slots.h"

namespace sluice::limiter {

namespace {

using policy::KeySpec;
using policy::PathPattern;

std::span<const uint8_t> bytes_of(std::string_view s) noexcept {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

std::span<const uint8_t> bytes_of(const net::IpAddress& a) noexcept { return {a.bytes.data(), a.bytes.size()}; }

bool append(std::span<char> out, size_t& pos, std::string_view s) noexcept {
  if (out.size() - pos < s.size()) return false;
  if (s.empty()) return true;
  std::memcpy(out.data() + pos, s.data(), s.size());
  pos += s.size();
  return true;
}

// Renders a response into scratch; falls back to the bare status if the
// template does not fit (it always does for the shipped ones).
Decision respond(Decision d, Verdict verdict, const policy::ResponseTemplate& t, const policy::TemplateValues& v,
                 std::span<const std::string_view> fields, DecisionScratch& scratch, bool keep_alive) noexcept {
  const size_t n = t.render(v, fields, scratch.response, keep_alive);
  d.keep_alive = keep_alive;
  d.verdict = verdict;
  d.status = t.status();
  d.response = std::string_view(scratch.response, n);
  return d;
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
std::string_view cors_fields(const CompiledPolicy& p, const http::RequestHead& head, DecisionScratch& scratch,
                             size_t& used) noexcept {
  if (!head.has(http::KnownField::kOrigin) && !p.cors_any_origin) return {};
  const std::string_view origin = head.value(http::KnownField::kOrigin);
  if (!p.cors_any_origin && !origin_granted(p, origin)) return {};
  const size_t start = used;
  std::span<char> out(scratch.fields);
  const bool ok = append(out, used, "Access-Control-Allow-Origin: ") &&
                  append(out, used, p.cors_any_origin ? std::string_view("*") : origin) && append(out, used, "\r\n") &&
                  append(out, used, p.cors_expose) &&
                  (p.cors_any_origin || append(out, used, "Vary: Origin\r\n"));
  if (!ok) {
    used = start;
    return {};
  }
  return {scratch.fields + start, used - start};
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
  if (n != 0) std::memcpy(l.bytes.data(), material.data(), n);
  l.len = static_cast<uint8_t>(n);
  return l;
}

}  // namespace

Plan plan(const CompiledPolicy& policy, LimiterState& state, const http::RequestHead& head,
          const ConnectionFacts& conn, Nanos now, DecisionScratch& scratch) noexcept {
  Plan out;
  out.head = &head;
  Decision& d = out.decision;
  const std::string_view path = policy::normalize_path(head.path, std::span<char>(scratch.path, head.path.size() + 1));

  // Exemptions: method and exact path (TB18).
  for (const CompiledPolicy::Exemption& e : policy.exemptions) {
    if (e.methods.contains(head) && path == e.path) {
      d.verdict = Verdict::kExempt;
      return out;
    }
  }
  // A real CORS preflight on a browser-reachable path, where an origin is granted (TB08).
  // Filled by the pattern that matches; only its own parameters are read.
  std::array<std::string_view, PathPattern::kMaxParams> params;
  if ((policy.cors_any_origin || !policy.cors_origins.empty()) && head.method_kind == http::Method::kOptions &&
      head.has(http::KnownField::kOrigin)) {
    for (const PathPattern& p : policy.preflight_paths) {
      if (p.match(path, params)) {
        d.verdict = Verdict::kExempt;
        return out;
      }
    }
  }

  bool have_client = false;
  net::IpAddress client;
  auto client_ip = [&]() -> const net::IpAddress& {
    if (!have_client) {
      client = resolve_client_ip(policy.client_ip, head, conn.peer);
      have_client = true;
    }
    return client;
  };

  for (const CompiledRule& rule : policy.rules) {
    if (!rule.methods.contains(head)) continue;
    int matched = -1;
    if (!rule.paths.empty()) {
      for (size_t i = 0; i < rule.paths.size(); ++i) {
        if (rule.paths[i].match(path, params)) {
          matched = static_cast<int>(i);
          break;
        }
      }
      if (matched < 0) continue;
    }
    bool present = true;
    for (http::FieldId f : rule.require) present = present && head.has(f);
    if (!present) continue;
    uint64_t run_budget = 0;
    if (matched >= 0 && rule.live_run_param[static_cast<size_t>(matched)] >= 0) {
      const std::string_view token = params[static_cast<size_t>(rule.live_run_param[static_cast<size_t>(matched)])];
      const std::optional<uint64_t> run = state.runs.find(state.credential_hasher.digest(bytes_of(token)));
      if (!run) continue;  // not live (TB12, TB13)
      run_budget = *run;
    }

    // The key's material: bytes, or a credential digest.
    std::span<const uint8_t> material;
    std::optional<Digest> credential;
    bool missing = false;
    KeyLabel::Kind label = KeyLabel::Kind::kText;  // path parameters, fields, the host
    switch (rule.key_kind) {
      case KeySpec::Kind::kClientIp:
        material = bytes_of(client_ip());
        label = KeyLabel::Kind::kClientIp;
        break;
      case KeySpec::Kind::kCredential:
      case KeySpec::Kind::kUser: {
        const std::string_view norm =
            head.has(policy.credential_field)
                ? normalize_credential(head.value(policy.credential_field), scratch.credential)
                : std::string_view();
        if (norm.empty()) {
          missing = true;
          break;
        }
        credential = state.credential_hasher.digest(bytes_of(norm));
        label = KeyLabel::Kind::kCredential;
        if (rule.key_kind == KeySpec::Kind::kCredential) break;
        bool anonymous = false;
        for (const Digest& a : policy.anonymous) anonymous = anonymous || a == *credential;
        if (anonymous) {  // RF05: no user; counted by client address
          credential.reset();
          material = bytes_of(client_ip());
          label = KeyLabel::Kind::kClientIp;
          break;
        }
        const std::optional<uint64_t> user = state.users.find(*credential);
        if (!user) {
          credential.reset();
          missing = true;
          break;
        }
        std::memcpy(scratch.material, &*user, sizeof *user);
        credential.reset();
        material = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(scratch.material), sizeof *user);
        label = KeyLabel::Kind::kUser;
        break;
      }
      case KeySpec::Kind::kPathParam: {
        const int idx = matched >= 0 ? rule.key_param[static_cast<size_t>(matched)] : -1;
        if (idx < 0 || params[static_cast<size_t>(idx)].empty()) missing = true;
        else material = bytes_of(params[static_cast<size_t>(idx)]);
        break;
      }
      case KeySpec::Kind::kHeader:
        if (!head.has(rule.key_field) || head.value(rule.key_field).empty()) missing = true;
        else material = bytes_of(head.value(rule.key_field));
        break;
      case KeySpec::Kind::kHost: {
        const std::string_view host = head.authority.empty() ? head.value(http::KnownField::kHost) : head.authority;
        // Every spelling the origin treats as one host is one bucket: case,
        // a trailing dot, the default port written out or left empty.
        const size_t n = http::normalise_host(host, http::default_port(head), scratch.material);
        if (n == 0) {
          missing = true;
          break;
        }
        material = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(scratch.material), n);
        break;
      }
      case KeySpec::Kind::kDestination:
        std::memcpy(scratch.material, conn.destination.bytes.data(), 16);
        std::memcpy(scratch.material + 16, &conn.destination_port, 2);
        material = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(scratch.material), 18);
        label = KeyLabel::Kind::kDestination;
        break;
    }
    d.rule = static_cast<int16_t>(rule.index);
    if (missing) {
      if (rule.key_kind == KeySpec::Kind::kUser) {
        // RF10: no credential, or one nobody owns: answered before any rate
        // check and spends no token, or forwarded uncounted.
        if (policy.unknown_credential == policy::CredentialSpec::Unknown::kForward) {
          d.verdict = Verdict::kForward;
          return out;
        }
        d = respond(d, Verdict::kAnswer, *policy.unauthorized, {}, {}, scratch, answer_keeps_connection(policy, head));
        return out;
      }
      if (rule.missing_key == policy::RuleSpec::MissingKey::kAnswer400) {
        d = respond(d, Verdict::kAnswer, *policy.bad_request, {}, {}, scratch, answer_keeps_connection(policy, head));
        return out;
      }
      d.rule = -1;
      continue;  // the rule does not apply to this request
    }

    // TB07: past the ceiling, a credential the address has not been using is
    // counted against the address's own budget.
    uint16_t bucket = rule.bucket;
    if (rule.slots_per_ip != 0 && credential) {
      const net::IpAddress& ip = client_ip();
      const BucketKey record = state.bucket_hasher.key(policy.slot_kind, bytes_of(ip));
      if (!take_credential_slot(state.credential_records, record, credential_tag(credential->lo ^ credential->hi),
                                rule.slots_per_ip, rule.slots_quiet, now)) {
        bucket = rule.slots_overflow_bucket;
        credential.reset();
        material = bytes_of(ip);
        label = KeyLabel::Kind::kClientIp;
        d.over_credential_ceiling = true;
      }
    }
    out.rule = &rule;
    out.bucket = &policy.buckets[bucket];
    // Keyed by the bucket's kind, not its position in this policy: a reload
    // that keeps a bucket keeps its kind, and so its state.
    const uint16_t kind = out.bucket->index;
    out.key = credential ? state.bucket_hasher.key(kind, *credential) : state.bucket_hasher.key(kind, material);
    d.label = label_of(label, material, credential, out.key);
    out.charge = true;
    out.run_budget = static_cast<uint32_t>(std::min<uint64_t>(run_budget, UINT32_MAX));
    if (out.bucket->calendar) {
      out.window = out.bucket->window;
      if (!out.bucket->quotas.empty()) {
        const std::string_view k(reinterpret_cast<const char*>(material.data()), material.size());
        if (const auto it = out.bucket->quotas.find(k); it != out.bucket->quotas.end()) out.window = it->second;
      }
      if (out.run_budget != 0) out.window.requests_per_minute = out.run_budget;
    }
    return out;
  }
  d.verdict = Verdict::kForward;
  return out;
}

Decision finish(const CompiledPolicy& policy, LimiterState& state, const Plan& p, Nanos now,
                DecisionScratch& scratch) noexcept {
  Decision d = p.decision;
  if (!p.charge) return d;
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
    v.limit = p.window.requests_per_minute;
    v.remaining = c.decision.remaining;
    v.reset = c.decision.reset_s;
    v.retry_after = c.decision.retry_after_s;
    d.usage_key = p.key;
    d.has_usage_key = true;
  } else {
    // A run started with a budget of its own: N per minute, refilled
    // continuously, N back to back from full (the TB17 shape).
    GcraLimit run_limit;
    const bool own = p.run_budget != 0 && GcraLimit::make(p.run_budget, time::kNanosPerMinute, p.run_budget, run_limit);
    if (own) {
      v.limit = p.run_budget;
      v.window = 60;
    }
    const GcraCharge c = charge_gcra(state.buckets, p.key, now, own ? run_limit : b.gcra);
    admit = c.decision.admit;
    d.overflow = c.overflow;
    v.remaining = c.decision.remaining;
    v.reset = c.decision.reset_s;
    v.retry_after = c.decision.retry_after_s;
  }

  size_t used = 0;
  const bool plain_admit = admit && !(rule.answer_status != 0 && rule.answer != nullptr);
  if (!plain_admit || scratch.render_admitted_fields) {
    const size_t n = rule.fields.render(v, scratch.fields, 0);
    if (n != SIZE_MAX) used = n;
  }
  const std::string_view fields(scratch.fields, used);
  d.fields = fields;
  if (admit || rule.shadow || policy.shadow) {
    d.shadow_refusal = !admit;
    if (rule.answer_status != 0 && rule.answer != nullptr) {
      const std::array<std::string_view, 1> f{fields};
      return respond(d, Verdict::kAnswer, *rule.answer, v, f, scratch, answer_keeps_connection(policy, *p.head));
    }
    d.verdict = Verdict::kAdmit;
    return d;
  }
  const http::RequestHead& head = *p.head;
  v.trace_id = next_trace_id(scratch);
  v.origin = head.value(http::KnownField::kOrigin);
  const std::string_view cors = cors_fields(policy, head, scratch, used);
  const std::array<std::string_view, 2> f{fields, cors};
  d.retry_after_s = v.retry_after;
  return respond(d, Verdict::kRefuse, *rule.refusal, v, f, scratch, answer_keeps_connection(policy, head));
}

bool answer_keeps_connection(const CompiledPolicy& policy, const http::RequestHead& head) noexcept {
  return policy.keep_alive_answers && head.keep_alive && !head.expect_continue &&
         http::request_kind(head) == http::RequestKind::kOrdinary;
}

Decision decide(const CompiledPolicy& policy, LimiterState& state, const http::RequestHead& head,
                const ConnectionFacts& conn, Nanos now, DecisionScratch& scratch) noexcept {
  return finish(policy, state, plan(policy, state, head, conn, now, scratch), now, scratch);
}

Decision closing_answer(Decision d, DecisionScratch& scratch) noexcept {
  static constexpr std::string_view kClose = "Connection: close\r\n";
  if (!d.keep_alive || d.response.empty()) return d;
  const size_t head_end = d.response.find("\r\n\r\n");
  const size_t n = d.response.size();
  if (head_end == std::string_view::npos || n + kClose.size() > sizeof scratch.response) return d;
  // In the scratch, the field goes in after the head's last line: the rest
  // (the empty line and the body) moves up to make room.
  const size_t at = head_end + 2;
  if (d.response.data() != scratch.response) std::memmove(scratch.response, d.response.data(), n);
  std::memmove(scratch.response + at + kClose.size(), scratch.response + at, n - at);
  std::memcpy(scratch.response + at, kClose.data(), kClose.size());
  d.response = std::string_view(scratch.response, n + kClose.size());
  d.keep_alive = false;
  return d;
}

Decision answer_parse_error(const CompiledPolicy& policy, http::ParseError error, DecisionScratch& scratch) noexcept {
  const policy::ResponseTemplate* t = policy.bad_request;
  switch (http::status_for(error)) {
    case 431: t = policy.too_large; break;
    case 501: t = policy.not_implemented; break;
    case 505: t = policy.bad_version; break;
    default: break;
  }
  return respond(Decision{}, Verdict::kAnswer, *t, {}, {}, scratch, false);
}

void report_usage(LimiterState& state, const BucketKey& usage_key, uint64_t tokens, Nanos now) noexcept {
  charge_tokens(state.buckets, usage_key, tokens, now);
}

}  // namespace sluice::limiter

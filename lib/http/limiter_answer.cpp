// See limiter_answer.h. An answer is its template's head, the extra fields
// written straight after it, and its template's tail: no intermediate copy.
#include "http/limiter_answer.h"

#include <cstring>
#include <string_view>

namespace sluice::http {

namespace {

// The room the rate-limit and CORS fields of one answer may take together:
// a CORS grant that would not fit (a very long Origin) is left out.
constexpr size_t kExtraFieldsRoom = 512;

bool append(std::span<char> out, size_t& pos, std::string_view s) noexcept {
  if (out.size() - pos < s.size()) return false;
  if (!s.empty()) std::memcpy(out.data() + pos, s.data(), s.size());
  pos += s.size();
  return true;
}

// The template's values: a charged answer's from its bucket, the others'
// the defaults (TemplateValues{}).
policy::TemplateValues values_of(const limiter::Decision& d) noexcept {
  policy::TemplateValues v;
  if (!d.answer.charged) return v;
  v.retry_after = d.retry_after_s;
  v.limit = d.fields.limit;
  v.remaining = d.fields.remaining;
  v.reset = d.fields.reset;
  v.window = d.fields.window;
  v.policy = d.fields.bucket();
  v.origin = d.answer.origin;
  v.trace_id = d.answer.trace_id;
  return v;
}

// TB09: a refusal to a granted origin lets the script read it.
bool append_cors(const limiter::CompiledPolicy& p, const limiter::Answer& a, std::span<char> out, size_t& pos,
                 size_t used) noexcept {
  static constexpr std::string_view kAllow = "Access-Control-Allow-Origin: ";
  static constexpr std::string_view kVary = "Vary: Origin\r\n";
  const bool any = a.cors == limiter::CorsGrant::kAnyOrigin;
  const std::string_view origin = any ? std::string_view("*") : a.origin;
  const size_t n = kAllow.size() + origin.size() + 2 + p.cors_expose.size() + (any ? 0 : kVary.size());
  if (used + n > kExtraFieldsRoom) return true;  // left out, not a failure
  return append(out, pos, kAllow) && append(out, pos, origin) && append(out, pos, "\r\n") &&
         append(out, pos, p.cors_expose) && (any || append(out, pos, kVary));
}

}  // namespace

bool answer_keeps_connection(const limiter::CompiledPolicy& policy, const RequestHead& head) noexcept {
  return policy.keep_alive_answers && head.keep_alive && !head.expect_continue &&
         request_kind(head) == RequestKind::kOrdinary;
}

size_t write_answer(const limiter::CompiledPolicy& policy, const limiter::Decision& d, bool keep_alive,
                    std::span<char> out) noexcept {
  const limiter::Answer& a = d.answer;
  if (a.response == nullptr) return 0;
  const policy::TemplateValues v = values_of(d);
  // The usual refusal: its rule's bucket, no CORS grant, framed at load.
  if (a.framed != nullptr && a.charged && a.cors == limiter::CorsGrant::kNone && a.framed->fits(d.fields.style, v)) {
    return a.framed->render(v, out, keep_alive);
  }
  size_t pos = a.response->render_head(v, out);
  if (pos == SIZE_MAX) return 0;
  if (a.charged) {
    const size_t start = pos;
    pos = policy::ratelimit_fields(d.fields.style).render(v, out, pos);
    if (pos == SIZE_MAX) return 0;
    if (a.cors != limiter::CorsGrant::kNone && !append_cors(policy, a, out, pos, pos - start)) return 0;
  }
  if (!append(out, pos, a.response->tail(keep_alive))) return 0;
  return pos;
}

size_t write_ratelimit_fields(const limiter::RateLimitFields& f, std::span<char> out) noexcept {
  if (f.none()) return 0;
  policy::TemplateValues v;
  v.limit = f.limit;
  v.remaining = f.remaining;
  v.reset = f.reset;
  v.window = f.window;
  v.policy = f.bucket();
  return policy::ratelimit_fields(f.style).render(v, out, 0);
}

}  // namespace sluice::http

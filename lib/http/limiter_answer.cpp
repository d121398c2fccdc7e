// See limiter_answer.h. An answer is its template's head, the extra fields
// written straight after it, and its template's tail: no intermediate copy.
#include "http/limiter_answer.h"

#include <algorithm>
#include <cstring>
#include <string_view>

namespace sluice::http {

namespace {

// The room the rate-limit and CORS fields of one answer may take together:
// a CORS grant that would not fit (a very long Origin) is left out.
constexpr size_t kExtraFieldsRoom = 512;

using policy::append_number;
using policy::append_text;

// A layered rule's fields (f.more != 0) at out[pos...]: the new position,
// or SIZE_MAX if they do not fit.
size_t write_layered_fields(const limiter::RateLimitFields& f, std::span<char> out, size_t pos) noexcept;

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
  return append_text(out, pos, kAllow) && append_text(out, pos, origin) && append_text(out, pos, "\r\n") &&
         append_text(out, pos, p.cors_expose) && (any || append_text(out, pos, kVary));
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
  if (a.framed != nullptr && a.charged && a.cors == limiter::CorsGrant::kNone && d.fields.more == 0 && !d.fields.concurrent &&
      a.framed->fits(d.fields.style, v)) {
    return a.framed->render(v, out, keep_alive);
  }
  size_t pos = a.response->render_head(v, out);
  if (pos == SIZE_MAX) return 0;
  if (a.charged) {
    const size_t start = pos;
    pos = d.fields.more == 0 && !d.fields.concurrent ? policy::ratelimit_fields(d.fields.style).render(v, out, pos)
                                                     : write_layered_fields(d.fields, out, pos);
    if (pos == SIZE_MAX) return 0;
    if (a.cors != limiter::CorsGrant::kNone && !append_cors(policy, a, out, pos, pos - start)) return 0;
  }
  if (!append_text(out, pos, a.response->tail(keep_alive))) return 0;
  return pos;
}

namespace {

// One budget of a list: `"name";q=L;w=W` (draft-11's RateLimit-Policy
// item), `"name";r=R;t=T` (its RateLimit item), or `L;w=W` (the seed's
// RateLimit-Policy item).
enum class Item : uint8_t { kIetfPolicy, kIetfLimit, kSeedPolicy, kIetfConcurrentPolicy, kIetfConcurrentLimit };
bool append_item(std::span<char> out, size_t& pos, Item item, std::string_view name, uint32_t limit,
                 uint32_t remaining, uint32_t reset, uint32_t window) noexcept {
  switch (item) {
    case Item::kIetfPolicy:
      return append_text(out, pos, "\"") && append_text(out, pos, name) && append_text(out, pos, "\";q=") &&
             append_number(out, pos, limit) && append_text(out, pos, ";w=") && append_number(out, pos, window);
    case Item::kIetfLimit:
      return append_text(out, pos, "\"") && append_text(out, pos, name) && append_text(out, pos, "\";r=") &&
             append_number(out, pos, remaining) && append_text(out, pos, ";t=") && append_number(out, pos, reset);
    case Item::kSeedPolicy:
      return append_number(out, pos, limit) && append_text(out, pos, ";w=") && append_number(out, pos, window);
    // A count of requests in flight: a quota with no window, nothing to reset.
    case Item::kIetfConcurrentPolicy:
      return append_text(out, pos, "\"") && append_text(out, pos, name) && append_text(out, pos, "\";q=") &&
             append_number(out, pos, limit) && append_text(out, pos, ";qu=\"concurrent-requests\"");
    case Item::kIetfConcurrentLimit:
      return append_text(out, pos, "\"") && append_text(out, pos, name) && append_text(out, pos, "\";r=") &&
             append_number(out, pos, remaining);
  }
  return false;
}

// `Name: item, item...\r\n`, the binding budget first.
bool append_list(std::span<char> out, size_t& pos, std::string_view name, Item item,
                 const limiter::RateLimitFields& f) noexcept {
  Item first = item;
  if (f.concurrent) first = item == Item::kIetfPolicy ? Item::kIetfConcurrentPolicy : Item::kIetfConcurrentLimit;
  if (!append_text(out, pos, name) ||
      !append_item(out, pos, first, f.bucket(), f.limit, f.remaining, f.reset, f.window)) {
    return false;
  }
  for (uint8_t i = 0; i < f.more; ++i) {
    const limiter::RateLimitFields::Other& o = f.others[i];
    if (!append_text(out, pos, ", ") ||
        !append_item(out, pos, item, f.other_bucket(i), o.limit, o.remaining, o.reset, o.window)) {
      return false;
    }
  }
  return append_text(out, pos, "\r\n");
}

size_t write_layered_fields(const limiter::RateLimitFields& f, std::span<char> out, size_t pos) noexcept {
  switch (f.style) {
    case policy::HeaderStyle::kSeed:
      // The seed's RateLimit-Policy has a window for every item: a count
      // of requests in flight has none, and is given by the first three.
      if (!append_text(out, pos, "RateLimit-Limit: ") || !append_number(out, pos, f.limit) ||
          !append_text(out, pos, "\r\nRateLimit-Remaining: ") || !append_number(out, pos, f.remaining) ||
          !append_text(out, pos, "\r\nRateLimit-Reset: ") || !append_number(out, pos, f.reset) ||
          !append_text(out, pos, "\r\n") ||
          (!f.concurrent && !append_list(out, pos, "RateLimit-Policy: ", Item::kSeedPolicy, f))) {
        return SIZE_MAX;
      }
      return pos;
    case policy::HeaderStyle::kIetf:
      if (!append_list(out, pos, "RateLimit-Policy: ", Item::kIetfPolicy, f) ||
          !append_list(out, pos, "RateLimit: ", Item::kIetfLimit, f)) {
        return SIZE_MAX;
      }
      return pos;
    case policy::HeaderStyle::kNone: break;
  }
  return pos;
}

}  // namespace

size_t ratelimit_fields_bound(policy::HeaderStyle style, std::span<const std::string_view> buckets) noexcept {
  // Every number at its widest (10 digits), every name as long as it is.
  limiter::RateLimitFields f;
  f.style = style;
  f.limit = f.remaining = f.reset = f.window = 4'000'000'000u;
  if (!buckets.empty()) {
    f.name_len = static_cast<uint8_t>(std::min(buckets[0].size(), sizeof f.name));
    std::memcpy(f.name, buckets[0].data(), f.name_len);
  }
  size_t at = 0;
  for (size_t i = 1; i < buckets.size() && f.more < f.others.size(); ++i) {
    limiter::RateLimitFields::Other& o = f.others[f.more++];
    o.limit = o.remaining = o.reset = o.window = 4'000'000'000u;
    o.name_at = static_cast<uint8_t>(at);
    o.name_len = static_cast<uint8_t>(std::min(buckets[i].size(), sizeof f.other_names - at));
    std::memcpy(f.other_names + at, buckets[i].data(), o.name_len);
    at += o.name_len;
  }
  char room[2048];
  const size_t n = f.more != 0 ? write_layered_fields(f, room, 0) : write_ratelimit_fields(f, room);
  return n == SIZE_MAX ? sizeof room : n;
}

size_t write_ratelimit_fields(const limiter::RateLimitFields& f, std::span<char> out) noexcept {
  if (f.none()) return 0;
  if (f.more != 0 || f.concurrent) [[unlikely]] return write_layered_fields(f, out, 0);
  policy::TemplateValues v;
  v.limit = f.limit;
  v.remaining = f.remaining;
  v.reset = f.reset;
  v.window = f.window;
  v.policy = f.bucket();
  return policy::ratelimit_fields(f.style).render(v, out, 0);
}

}  // namespace sluice::http

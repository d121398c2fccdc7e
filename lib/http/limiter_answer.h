// The limiter's decisions in HTTP/1's words: an answer (a refusal, a 401, a
// 404, the answer to an unparsable head) as a complete response, the
// rate-limit fields an admitted response gets as field lines, and whether an
// answer may leave the connection open, which is HTTP/1's business
// (keep-alive, HEAD, Upgrade, CONNECT, Expect), not the limiter's.
// No allocation, lock, system call or exception: every byte goes into the
// caller's buffer.
#pragma once

#include <cstddef>
#include <span>

#include "http/parse_error.h"
#include "http/request_head.h"
#include "limiter/compiled_policy.h"
#include "limiter/decide.h"

namespace sluice::http {

// The longest answer written; one that does not fit is not sent.
inline constexpr size_t kMaxAnswerBytes = 4096;

// Whether the appliance's own answer to `head` (a refusal, a 401, a 404)
// leaves the connection open: the policy keeps connections after answers,
// the client did not ask to close, and nothing makes the request's end
// uncertain (Expect: 100-continue, whose body may or may not follow) or its
// answer special (HEAD, whose answer has no body; Upgrade, CONNECT).
[[nodiscard]] bool answer_keeps_connection(const limiter::CompiledPolicy& policy, const RequestHead& head) noexcept;

// The answer of `d` (kRefuse, kAnswer) as a response at the start of `out`:
// status line, the template's fields, a charged answer's rate-limit fields
// (and a refusal's CORS fields, TB09), Content-Length, `Connection: close`
// unless `keep_alive`, the body. Its length; 0 when it does not fit (or `d`
// answers nothing). `policy` is the one that decided `d` (its CORS
// exposure). An answer sent with FIN must not be written keep-alive (issue
// 14): the client's next request would meet the close with no answer.
[[nodiscard]] size_t write_answer(const limiter::CompiledPolicy& policy, const limiter::Decision& d, bool keep_alive,
                                  std::span<char> out) noexcept;

// The rate-limit fields (TB16) as field lines at the start of `out`: their
// length, or SIZE_MAX if they do not fit (0: none). A layered rule's list
// every budget: `seed` gives the binding one's RateLimit-Limit, -Remaining
// and -Reset and every one's limit and window in RateLimit-Policy, `ietf`
// every one in both RateLimit-Policy and RateLimit, the binding one first.
[[nodiscard]] size_t write_ratelimit_fields(const limiter::RateLimitFields& f, std::span<char> out) noexcept;

// The most write_ratelimit_fields() writes for a rule whose buckets are
// named `buckets`, in `style`, at any values.
[[nodiscard]] size_t ratelimit_fields_bound(policy::HeaderStyle style, std::span<const std::string_view> buckets) noexcept;

// The answer to a head the parser refused (400, 431, 501, 505); it closes
// the connection.
[[nodiscard]] inline limiter::Decision answer_parse_error(const limiter::CompiledPolicy& policy,
                                                         ParseError error) noexcept {
  return limiter::answer_unreadable(policy, status_for(error));
}

}  // namespace sluice::http

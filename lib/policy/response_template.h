// Responses the appliance writes itself (429s, and 400/401/404/431/501/505),
// and the rate-limit fields it adds to admitted responses: rendered to text
// once when the policy loads, with slots for the few values that change per
// request, so answering costs a few copies and number formats, no allocation.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "policy/policy.h"

namespace sluice::policy {

// The per-request values a template may hold, as {name} placeholders.
struct TemplateValues {
  uint32_t retry_after = 0;    // {retry_after}
  uint32_t limit = 0;          // {limit}: requests per window
  uint32_t remaining = 0;      // {remaining}
  uint32_t reset = 0;          // {reset}
  uint32_t window = 60;        // {window}: seconds
  std::string_view policy;     // {policy}: the bucket's name
  std::string_view origin;     // {origin}: the request's granted Origin
  uint64_t trace_id = 0;       // {trace_id}: 16 hex digits
};

// Text with placeholders, split at load into literal runs and slots.
class TextTemplate {
 public:
  [[nodiscard]] static std::optional<TextTemplate> compile(std::string_view text, std::string* why);
  // Writes the text at out[pos...]; returns the new position, or SIZE_MAX if
  // it does not fit.
  [[nodiscard]] size_t render(const TemplateValues& v, std::span<char> out, size_t pos) const noexcept;
  [[nodiscard]] bool empty() const noexcept { return pieces_.empty(); }

  // The slots a joined template may write in as text.
  struct Bound {
    bool limit = false;
    bool window = false;
    bool policy = false;
  };
  // `parts` one after another, then the literal `tail`; the slots `bound`
  // names written as their values in `v`, the rest left as slots.
  [[nodiscard]] static TextTemplate joined(std::span<const TextTemplate* const> parts, std::string_view tail,
                                           const TemplateValues& v, Bound bound);

 private:
  enum class Slot : uint8_t { kLiteral, kRetryAfter, kLimit, kRemaining, kReset, kWindow, kPolicy, kOrigin, kTraceId };
  struct Piece {
    Slot slot;
    uint32_t offset;  // of a literal in text_
    uint32_t length;
  };
  void add_literal(std::string_view text);
  void finish();

  std::vector<Piece> pieces_;
  std::vector<char> text_;  // every literal, then 16 bytes of padding so copies can run in whole vectors
  // The most render() writes, whole 16-byte literal moves and 20-digit
  // numbers included, not counting {policy} and {origin}, which it writes
  // this many times each: with that much room it writes without checks.
  size_t most_ = 0;
  uint8_t policy_slots_ = 0;
  uint8_t origin_slots_ = 0;
};

// A complete response: status line, the policy's fields, optionally the
// rate-limit and CORS fields, Content-Length, `Connection: close` unless the
// connection stays open after it, body.
class ResponseTemplate {
 public:
  [[nodiscard]] static std::optional<ResponseTemplate> compile(const ResponseSpec& spec, std::string* why);
  // A header value may hold only visible characters, spaces and tabs, and
  // known {placeholders}.
  [[nodiscard]] static bool check_header_value(std::string_view value, std::string* why);

  // Renders into `out`; returns the bytes written, 0 if `out` is too small.
  // `fields` are extra header lines (rate-limit, CORS), already rendered.
  [[nodiscard]] size_t render(const TemplateValues& v, std::span<const std::string_view> fields,
                              std::span<char> out, bool keep_alive = false) const noexcept;
  // render() in its two parts, for a caller that writes the extra fields
  // between them straight into `out`: the status line and the policy's
  // fields at its start (their length, SIZE_MAX if they do not fit), and
  // what follows the fields.
  [[nodiscard]] size_t render_head(const TemplateValues& v, std::span<char> out) const noexcept {
    return head_.render(v, out, 0);
  }
  [[nodiscard]] std::string_view tail(bool keep_alive) const noexcept { return keep_alive ? tail_keep_alive_ : tail_; }
  [[nodiscard]] const TextTemplate& head() const noexcept { return head_; }
  [[nodiscard]] uint16_t status() const noexcept { return status_; }
  // The body, as written in the policy (it has no placeholders).
  [[nodiscard]] std::string_view body() const noexcept {
    return std::string_view(tail_).substr(tail_.size() - body_size_);
  }

 private:
  uint16_t status_ = 0;
  uint32_t body_size_ = 0;
  TextTemplate head_;   // status line and the policy's fields
  std::string tail_;             // Content-Length, Connection: close, blank line, body
  std::string tail_keep_alive_;  // the same without Connection
};

// The rate-limit fields of a header style (TB16 / X02), as a template.
// The rate-limit fields of a header style (TB16): one template per style,
// for the life of the process (a decision may refer to it after its policy
// is gone).
[[nodiscard]] const TextTemplate& ratelimit_fields(HeaderStyle style);

// A refusal's whole text for one bucket, framed when the policy loads: the
// response's head, the rate-limit fields of a style and the tail in one
// template, with the bucket's constant values (limit, window, name) written
// in as text. A refusal then costs one run of copies and three numbers
// instead of three templates and eight numbers. It serves only values that
// carry exactly those constants (fits()): a live run's own budget, or a
// refusal counted in an overflow bucket, takes the general path.
class FramedAnswer {
 public:
  FramedAnswer(const ResponseTemplate& response, HeaderStyle style, uint32_t limit, uint32_t window,
               std::string_view policy);
  [[nodiscard]] bool fits(HeaderStyle style, const TemplateValues& v) const noexcept {
    return style == style_ && v.limit == limit_ && v.window == window_ && v.policy == policy_;
  }
  // Writes the answer at the start of `out`; its length, or 0 if it does
  // not fit (as the general path).
  [[nodiscard]] size_t render(const TemplateValues& v, std::span<char> out, bool keep_alive) const noexcept;

 private:
  TextTemplate text_[2];  // closing, keep-alive
  HeaderStyle style_;
  uint32_t limit_;
  uint32_t window_;
  std::string policy_;
};

[[nodiscard]] std::string_view reason_phrase(uint16_t status) noexcept;

// Appending into a fixed buffer at `pos` (answers and rate-limit fields
// are written so, without allocation): false, and nothing written, when it
// does not fit.
[[nodiscard]] bool append_text(std::span<char> out, size_t& pos, std::string_view s) noexcept;
[[nodiscard]] bool append_number(std::span<char> out, size_t& pos, uint64_t v) noexcept;

// A refusal's body as RFC 9457 problem details (`style: problem`), of the
// rate-limit fields draft's problem type
// https://iana.org/assignments/http-problem-types#quota-exceeded, its
// `violated-policies` naming `budget` (none: an empty list).
[[nodiscard]] std::string problem_body(uint16_t status, std::string_view budget);

}  // namespace sluice::policy

// See response_template.h.
#include "policy/response_template.h"

#include <bit>
#include <cstring>

namespace sluice::policy {

namespace {

struct Name {
  std::string_view text;
  int slot;
};

constexpr Name kNames[] = {{"retry_after", 1}, {"limit", 2},  {"remaining", 3}, {"reset", 4},
                           {"window", 5},      {"policy", 6}, {"origin", 7},    {"trace_id", 8}};

// A template literal: its source is padded, so with 16 bytes of room left in
// `out` it is copied in whole 16-byte moves (no call, no byte loop).
bool append_padded(std::span<char> out, size_t& pos, const char* src, size_t n) noexcept {
  if (pos > out.size() || out.size() - pos < n) return false;
  char* d = out.data() + pos;
  if (out.size() - pos >= n + 16) {
    for (size_t i = 0; i < n; i += 16) std::memcpy(d + i, src + i, 16);
  } else if (n != 0) {
    std::memcpy(d, src, n);
  }
  pos += n;
  return true;
}

constexpr char kDigitPairs[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

// The decimal digits of `v` (the count from the bit width, 1233/4096 ~
// log10(2)), written two at a time straight into place from the end.
size_t digits(uint64_t v) noexcept {
  static constexpr uint64_t kPow10[20] = {1ull,
                                          10ull,
                                          100ull,
                                          1000ull,
                                          10000ull,
                                          100000ull,
                                          1000000ull,
                                          10000000ull,
                                          100000000ull,
                                          1000000000ull,
                                          10000000000ull,
                                          100000000000ull,
                                          1000000000000ull,
                                          10000000000000ull,
                                          100000000000000ull,
                                          1000000000000000ull,
                                          10000000000000000ull,
                                          100000000000000000ull,
                                          1000000000000000000ull,
                                          10000000000000000000ull};
  const unsigned t = static_cast<unsigned>(std::bit_width(v | 1) * 1233) >> 12;
  return t + ((v | 1) >= kPow10[t] ? 1 : 0);
}

char* write_number(char* d, uint64_t v, size_t n) noexcept {
  char* end = d + n;
  char* p = end;
  // Four digits per 64-bit division, then two per 32-bit one.
  while (v >= 10000) {
    const auto r = static_cast<uint32_t>(v % 10000);
    v /= 10000;
    p -= 4;
    std::memcpy(p, kDigitPairs + 2 * (r / 100), 2);
    std::memcpy(p + 2, kDigitPairs + 2 * (r % 100), 2);
  }
  while (v >= 100) {
    p -= 2;
    std::memcpy(p, kDigitPairs + 2 * (v % 100), 2);
    v /= 100;
  }
  if (v >= 10) {
    std::memcpy(p - 2, kDigitPairs + 2 * v, 2);
  } else {
    p[-1] = static_cast<char>('0' + v);
  }
  return end;
}

bool append_hex16(std::span<char> out, size_t& pos, uint64_t v) noexcept {
  static constexpr char kDigits[] = "0123456789abcdef";
  char buf[16];
  for (int i = 15; i >= 0; --i, v >>= 4) buf[i] = kDigits[v & 15];
  return append_text(out, pos, std::string_view(buf, 16));
}

}  // namespace

bool append_text(std::span<char> out, size_t& pos, std::string_view s) noexcept {
  if (pos > out.size() || out.size() - pos < s.size()) return false;
  if (!s.empty()) std::memcpy(out.data() + pos, s.data(), s.size());
  pos += s.size();
  return true;
}

bool append_number(std::span<char> out, size_t& pos, uint64_t v) noexcept {
  const size_t n = digits(v);
  if (pos > out.size() || out.size() - pos < n) return false;
  write_number(out.data() + pos, v, n);
  pos += n;
  return true;
}

std::optional<TextTemplate> TextTemplate::compile(std::string_view text, std::string* why) {
  TextTemplate t;
  std::string literal;
  auto flush = [&] {
    if (literal.empty()) return;
    t.pieces_.push_back({Slot::kLiteral, static_cast<uint32_t>(t.text_.size()), static_cast<uint32_t>(literal.size())});
    t.text_.insert(t.text_.end(), literal.begin(), literal.end());
    literal.clear();
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '{' && i + 1 < text.size() && text[i + 1] == '{') {  // "{{" is a literal '{'
      literal += '{';
      ++i;
      continue;
    }
    if (c != '{') {
      literal += c;
      continue;
    }
    const size_t close = text.find('}', i);
    if (close == std::string_view::npos) {
      if (why) *why = "'{' without '}' (write {{ for a literal brace)";
      return std::nullopt;
    }
    const std::string_view name = text.substr(i + 1, close - i - 1);
    int slot = 0;
    for (const Name& n : kNames) {
      if (n.text == name) slot = n.slot;
    }
    if (slot == 0) {
      if (why) {
        *why = "unknown placeholder {" + std::string(name) +
               "} (known: retry_after, limit, remaining, reset, window, policy, origin, trace_id)";
      }
      return std::nullopt;
    }
    flush();
    t.pieces_.push_back({static_cast<Slot>(slot), 0, 0});
    i = close;
  }
  flush();
  t.finish();
  return t;
}

void TextTemplate::add_literal(std::string_view text) {
  if (text.empty()) return;
  // Joined to the literal before it, so that a run of text is one copy.
  if (!pieces_.empty() && pieces_.back().slot == Slot::kLiteral &&
      pieces_.back().offset + pieces_.back().length == text_.size()) {
    pieces_.back().length += static_cast<uint32_t>(text.size());
  } else {
    pieces_.push_back({Slot::kLiteral, static_cast<uint32_t>(text_.size()), static_cast<uint32_t>(text.size())});
  }
  text_.insert(text_.end(), text.begin(), text.end());
}

void TextTemplate::finish() {
  text_.resize(text_.size() + 16, '\0');
  most_ = 0;
  policy_slots_ = origin_slots_ = 0;
  for (const Piece& p : pieces_) {
    switch (p.slot) {
      case Slot::kLiteral: most_ += (p.length + 15) / 16 * 16; break;
      case Slot::kPolicy: ++policy_slots_; break;
      case Slot::kOrigin: ++origin_slots_; break;
      case Slot::kTraceId: most_ += 16; break;
      default: most_ += 20; break;  // a number
    }
  }
}

TextTemplate TextTemplate::joined(std::span<const TextTemplate* const> parts, std::string_view tail,
                                  const TemplateValues& v, Bound bound) {
  TextTemplate t;
  char digits_buf[20];
  auto number = [&](uint64_t n) {
    const size_t len = digits(n);
    write_number(digits_buf, n, len);
    return std::string_view(digits_buf, len);
  };
  for (const TextTemplate* part : parts) {
    for (const Piece& p : part->pieces_) {
      if (p.slot == Slot::kLiteral) {
        t.add_literal(std::string_view(part->text_.data() + p.offset, p.length));
      } else if (p.slot == Slot::kLimit && bound.limit) {
        t.add_literal(number(v.limit));
      } else if (p.slot == Slot::kWindow && bound.window) {
        t.add_literal(number(v.window));
      } else if (p.slot == Slot::kPolicy && bound.policy) {
        t.add_literal(v.policy);
      } else {
        t.pieces_.push_back(p);
      }
    }
  }
  t.add_literal(tail);
  t.finish();
  return t;
}

FramedAnswer::FramedAnswer(const ResponseTemplate& response, HeaderStyle style, uint32_t limit, uint32_t window,
                           std::string_view policy)
    : style_(style), limit_(limit), window_(window), policy_(policy) {
  TemplateValues v;
  v.limit = limit_;
  v.window = window_;
  v.policy = policy_;
  const TextTemplate* parts[] = {&response.head(), &ratelimit_fields(style)};
  for (bool keep_alive : {false, true}) {
    text_[keep_alive ? 1 : 0] = TextTemplate::joined(parts, response.tail(keep_alive), v, {true, true, true});
  }
}

size_t FramedAnswer::render(const TemplateValues& v, std::span<char> out, bool keep_alive) const noexcept {
  const size_t n = text_[keep_alive ? 1 : 0].render(v, out, 0);
  return n == SIZE_MAX ? 0 : n;
}

size_t TextTemplate::render(const TemplateValues& v, std::span<char> out, size_t pos) const noexcept {
  if (pos <= out.size() &&
      out.size() - pos >= most_ + policy_slots_ * v.policy.size() + origin_slots_ * v.origin.size()) {
    // Room for the most it can write: no check per piece.
    char* d = out.data() + pos;
    for (const Piece& p : pieces_) {
      switch (p.slot) {
        case Slot::kLiteral: {
          // Held in locals: a store through `d` could alias the template's
          // own fields, which the loop would otherwise load again each move.
          const char* src = text_.data() + p.offset;
          const size_t n = p.length;
          for (size_t i = 0; i < n; i += 16) std::memcpy(d + i, src + i, 16);
          d += n;
          break;
        }
        case Slot::kRetryAfter: d = write_number(d, v.retry_after, digits(v.retry_after)); break;
        case Slot::kLimit: d = write_number(d, v.limit, digits(v.limit)); break;
        case Slot::kRemaining: d = write_number(d, v.remaining, digits(v.remaining)); break;
        case Slot::kReset: d = write_number(d, v.reset, digits(v.reset)); break;
        case Slot::kWindow: d = write_number(d, v.window, digits(v.window)); break;
        case Slot::kPolicy:
          if (!v.policy.empty()) std::memcpy(d, v.policy.data(), v.policy.size());
          d += v.policy.size();
          break;
        case Slot::kOrigin:
          if (!v.origin.empty()) std::memcpy(d, v.origin.data(), v.origin.size());
          d += v.origin.size();
          break;
        case Slot::kTraceId: {
          static constexpr char kHex[] = "0123456789abcdef";
          uint64_t x = v.trace_id;
          for (int i = 15; i >= 0; --i, x >>= 4) d[i] = kHex[x & 15];
          d += 16;
          break;
        }
      }
    }
    return static_cast<size_t>(d - out.data());
  }
  bool ok = true;
  for (const Piece& p : pieces_) {
    switch (p.slot) {
      case Slot::kLiteral: ok = append_padded(out, pos, text_.data() + p.offset, p.length); break;
      case Slot::kRetryAfter: ok = append_number(out, pos, v.retry_after); break;
      case Slot::kLimit: ok = append_number(out, pos, v.limit); break;
      case Slot::kRemaining: ok = append_number(out, pos, v.remaining); break;
      case Slot::kReset: ok = append_number(out, pos, v.reset); break;
      case Slot::kWindow: ok = append_number(out, pos, v.window); break;
      case Slot::kPolicy: ok = append_text(out, pos, v.policy); break;
      case Slot::kOrigin: ok = append_text(out, pos, v.origin); break;
      case Slot::kTraceId: ok = append_hex16(out, pos, v.trace_id); break;
    }
    if (!ok) return SIZE_MAX;
  }
  return pos;
}

bool ResponseTemplate::check_header_value(std::string_view value, std::string* why) {
  for (char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && u != '\t') || u == 0x7f) {
      if (why) *why = "a header value may not hold control characters or line breaks";
      return false;
    }
  }
  return TextTemplate::compile(value, why).has_value();
}

std::optional<ResponseTemplate> ResponseTemplate::compile(const ResponseSpec& spec, std::string* why) {
  ResponseTemplate r;
  r.status_ = spec.status;
  std::string head = "HTTP/1.1 " + std::to_string(spec.status) + " " +
                     (spec.reason.empty() ? std::string(reason_phrase(spec.status)) : spec.reason) + "\r\n";
  // Escape braces of the fixed parts so only header values carry placeholders.
  std::string escaped;
  for (char c : head) escaped += c == '{' ? std::string("{{") : std::string(1, c);
  for (const auto& [name, value] : spec.headers) escaped += name + ": " + value + "\r\n";
  auto compiled = TextTemplate::compile(escaped, why);
  if (!compiled) return std::nullopt;
  r.head_ = std::move(*compiled);
  const std::string length = "Content-Length: " + std::to_string(spec.body.size()) + "\r\n";
  r.tail_ = length + "Connection: close\r\n\r\n" + spec.body;
  r.tail_keep_alive_ = length + "\r\n" + spec.body;
  r.body_size_ = static_cast<uint32_t>(spec.body.size());
  return r;
}

size_t ResponseTemplate::render(const TemplateValues& v, std::span<const std::string_view> fields,
                                std::span<char> out, bool keep_alive) const noexcept {
  size_t pos = head_.render(v, out, 0);
  if (pos == SIZE_MAX) return 0;
  for (std::string_view f : fields) {
    if (!append_text(out, pos, f)) return 0;
  }
  if (!append_text(out, pos, keep_alive ? tail_keep_alive_ : tail_)) return 0;
  return pos;
}

const TextTemplate& ratelimit_fields(HeaderStyle style) {
  static const TextTemplate kNone = *TextTemplate::compile("", nullptr);
  static const TextTemplate kSeed = *TextTemplate::compile(
      "RateLimit-Limit: {limit}\r\nRateLimit-Remaining: {remaining}\r\nRateLimit-Reset: {reset}\r\n"
      "RateLimit-Policy: {limit};w={window}\r\n",
      nullptr);
  static const TextTemplate kIetf = *TextTemplate::compile(
      "RateLimit-Policy: \"{policy}\";q={limit};w={window}\r\nRateLimit: \"{policy}\";r={remaining};t={reset}\r\n",
      nullptr);
  switch (style) {
    case HeaderStyle::kSeed: return kSeed;
    case HeaderStyle::kIetf: return kIetf;
    case HeaderStyle::kNone: break;
  }
  return kNone;
}

std::string_view reason_phrase(uint16_t status) noexcept {
  switch (status) {
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 413: return "Content Too Large";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Status";
  }
}

}  // namespace sluice::policy

namespace sluice::policy {

// Bucket names are plain (letters, digits, '_', '-', '.', ':': the
// loader's rule), so the name needs no JSON escaping.
std::string problem_body(uint16_t status, std::string_view budget) {
  std::string out = R"({"type":"https://iana.org/assignments/http-problem-types#quota-exceeded",)"
                    R"("title":"Quota exceeded","status":)";
  out += std::to_string(status);
  out += R"(,"violated-policies":[)";
  if (!budget.empty()) {
    out += '"';
    out += budget;
    out += '"';
  }
  out += "]}";
  return out;
}

}  // namespace sluice::policy

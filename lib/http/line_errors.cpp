// The byte-at-a-time side of the head scan: when the fast path sees that a
// line breaks a rule, these walk the line once more and name the first thing
// wrong with it, left to right. They run only on bad input.
#include "http/head_scan.h"
#include "http/token_chars.h"

namespace sluice::http {

namespace {

struct Line {
  std::string_view text;  // through the LF
  size_t cr;              // index of the CR that ends the line, or npos

  explicit Line(std::string_view t) noexcept
      : text(t), cr(t.size() >= 2 && t[t.size() - 2] == '\r' ? t.size() - 2 : std::string_view::npos) {}

  unsigned char at(size_t i) const noexcept { return static_cast<unsigned char>(text[i]); }
  bool is_end(size_t i) const noexcept { return i == cr || (cr == std::string_view::npos && i == text.size() - 1); }

  // What an unexpected CR or LF at i means, if it is one.
  ParseError line_ending_error(size_t i) const noexcept {
    if (text[i] == '\r' && i != cr) return ParseError::kBareCR;
    if (text[i] == '\n' && cr == std::string_view::npos) return ParseError::kBareLF;
    return ParseError::kNone;
  }

  // First control byte at or after i that is not the line's own CRLF.
  ParseError control_error(size_t i, ParseError otherwise) const noexcept {
    for (; i < text.size(); ++i) {
      if (!is_ctl(at(i))) continue;
      if (i == cr || (i == text.size() - 1 && cr != std::string_view::npos)) return ParseError::kNone;
      const ParseError e = line_ending_error(i);
      return e != ParseError::kNone ? e : otherwise;
    }
    return ParseError::kNone;
  }
};

}  // namespace

ParseError classify_request_line_error(std::string_view text) noexcept {
  const Line line(text);
  // method SP
  size_t i = 0;
  while (is_tchar(line.at(i))) ++i;
  if (line.at(i) != ' ' || i == 0) {
    if (const ParseError e = line.line_ending_error(i); e != ParseError::kNone) return e;
    if (i > 0 && line.is_end(i)) return ParseError::kBadTarget;  // "GET\r\n": no target
    return ParseError::kBadMethod;
  }
  // request-target SP
  const size_t target = ++i;
  while (is_vchar(line.at(i))) ++i;
  if (line.at(i) != ' ' || i == target) {
    if (const ParseError e = line.line_ending_error(i); e != ParseError::kNone) return e;
    if (i > target && line.is_end(i)) return ParseError::kBadVersion;  // "GET /\r\n": no version
    return ParseError::kBadTarget;
  }
  // HTTP-version CRLF
  const size_t version = ++i;
  if (const ParseError e = line.control_error(version, ParseError::kBadVersion); e != ParseError::kNone) return e;
  if (line.cr == std::string_view::npos) return ParseError::kBareLF;
  const std::string_view v = text.substr(version, line.cr - version);
  if (v.size() == 8 && v.substr(0, 5) == "HTTP/" && v[5] >= '0' && v[5] <= '9' && v[6] == '.' && v[7] >= '0' &&
      v[7] <= '9') {
    return (v == "HTTP/1.1" || v == "HTTP/1.0") ? ParseError::kNone : ParseError::kUnsupportedVersion;
  }
  return ParseError::kBadVersion;
}

ParseError classify_field_line_error(std::string_view text) noexcept {
  const Line line(text);
  if (line.at(0) == ' ' || line.at(0) == '\t') return ParseError::kObsFold;
  size_t i = 0;
  while (is_tchar(line.at(i))) ++i;
  if (line.at(i) != ':') {
    if (const ParseError e = line.line_ending_error(i); e != ParseError::kNone) return e;
    if (line.is_end(i)) return ParseError::kMissingColon;
    if (i > 0 && is_ows(line.at(i))) {
      size_t j = i;
      while (is_ows(line.at(j))) ++j;
      if (line.at(j) == ':') return ParseError::kWhitespaceBeforeColon;
    }
    return ParseError::kBadFieldName;
  }
  if (i == 0) return ParseError::kBadFieldName;  // ": value"
  if (const ParseError e = line.control_error(i + 1, ParseError::kBadFieldValue); e != ParseError::kNone) return e;
  if (line.cr == std::string_view::npos) return ParseError::kBareLF;
  return ParseError::kNone;
}

}  // namespace sluice::http

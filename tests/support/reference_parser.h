// An independent, deliberately plain reading of the request-head grammar
// (RFC 9112 2-5), byte by byte and line by line, for the fuzz target and the
// tests to hold the SIMD head scan to. It shares no scanning code with
// lib/http: it splits lines itself and checks every byte itself. For the
// *kind* of error in a broken line it defers to the library's line
// classifiers, and for framing semantics to FieldSemantics, so what it
// checks independently is which bytes are accepted, where the head ends,
// and what the fields are.
#pragma once

#include <string>
#include <string_view>

#include "head_harness.h"
#include "http/field_set.h"
#include "http/field_semantics.h"
#include "http/head_scan.h"
#include "http/token_chars.h"

namespace sluice::test {

inline HeadOutcome reference_parse(std::string_view in, http::HeadLimits limits = {}) {
  using namespace sluice::http;
  static const FieldSet fields;
  HeadOutcome o;
  const size_t limit = std::min<size_t>(in.size(), limits.max_head_bytes);
  auto fail = [&](ParseError e) {
    o.fields.clear();
    o.status = HeadStatus::kError;
    o.error = e;
    return o;
  };
  auto incomplete = [&] {
    if (in.size() > limits.max_head_bytes) return fail(ParseError::kHeadTooLarge);
    o.fields.clear();
    o.status = HeadStatus::kIncomplete;
    return o;
  };

  size_t pos = 0;
  // Empty lines before the request line.
  while (true) {
    if (pos >= limit) return incomplete();
    if (in[pos] == '\n') return fail(classify_request_line_error(in.substr(pos, 1)));
    if (in[pos] != '\r') break;
    if (pos + 1 >= limit) return incomplete();
    if (in[pos + 1] != '\n') {
      const size_t lf = in.find('\n', pos);
      if (lf == std::string_view::npos || lf >= limit) return incomplete();
      return fail(classify_request_line_error(in.substr(pos, lf - pos + 1)));
    }
    pos += 2;
  }

  RequestHead head;
  ScanCursor cursor{&fields, &head, nullptr, 0, limits.max_fields, false, FieldSemantics{}};
  bool request_line = true;
  uint16_t count = 0;
  while (true) {
    const size_t lf = in.find('\n', pos);
    if (lf == std::string_view::npos || lf >= limit) return incomplete();
    const std::string_view line = in.substr(pos, lf - pos + 1);  // through the LF
    const bool crlf = line.size() >= 2 && line[line.size() - 2] == '\r';
    const std::string_view body = crlf ? line.substr(0, line.size() - 2) : line.substr(0, line.size() - 1);
    if (request_line) {
      // method SP target SP version, each byte checked by class.
      size_t i = 0;
      while (i < body.size() && is_tchar(static_cast<unsigned char>(body[i]))) ++i;
      const size_t sp1 = i;
      bool ok = crlf && sp1 > 0 && sp1 < body.size() && body[sp1] == ' ';
      size_t sp2 = 0;
      if (ok) {
        i = sp1 + 1;
        while (i < body.size() && is_vchar(static_cast<unsigned char>(body[i]))) ++i;
        sp2 = i;
        ok = sp2 > sp1 + 1 && sp2 < body.size() && body[sp2] == ' ';
      }
      if (ok) {
        for (size_t k = sp2 + 1; k < body.size(); ++k) ok = ok && !is_ctl(static_cast<unsigned char>(body[k]));
      }
      if (!ok) return fail(classify_request_line_error(line));
      const std::string_view target = body.substr(sp1 + 1, sp2 - sp1 - 1);
      // Read here, not left to finish_request_line: which bytes a target
      // may hold is what this reading holds the library to.
      if (target.find('#') != std::string_view::npos) return fail(ParseError::kFragmentInTarget);
      const size_t q = target.find('?');
      if (const ParseError e = finish_request_line(cursor, body.substr(0, sp1), target, q == std::string_view::npos ? SIZE_MAX : q,
                                                   body.substr(sp2 + 1));
          e != ParseError::kNone) {
        return fail(e);
      }
      request_line = false;
      pos = lf + 1;
      continue;
    }
    if (line == "\r\n") {
      pos = lf + 1;
      break;
    }
    // name ":" OWS value OWS
    size_t colon = body.find(':');
    bool ok = crlf && colon != std::string_view::npos && colon > 0;
    for (size_t k = 0; ok && k < colon; ++k) ok = is_tchar(static_cast<unsigned char>(body[k]));
    for (size_t k = colon + 1; ok && k < body.size(); ++k) ok = !is_ctl(static_cast<unsigned char>(body[k]));
    if (!ok) return fail(classify_field_line_error(line));
    if (count == limits.max_fields) return fail(ParseError::kTooManyFields);
    ++count;
    std::string_view value = body.substr(colon + 1);
    while (!value.empty() && is_ows(static_cast<unsigned char>(value.front()))) value.remove_prefix(1);
    while (!value.empty() && is_ows(static_cast<unsigned char>(value.back()))) value.remove_suffix(1);
    const std::string_view name = body.substr(0, colon);
    o.fields.emplace_back(name, value);
    if (const int id = fields.find(name); id >= 0) {
      uint8_t& n = head.tracked_count[id];
      if (n == 0) head.tracked[id] = value;
      else if (id < 32 && ((FieldSemantics::kSingletons >> id) & 1)) return fail(ParseError::kDuplicateField);
      if (n != 255) ++n;
      if (id < 32 && ((FieldSemantics::kFraming >> id) & 1)) {
        if (const ParseError e = cursor.semantics.on_field(static_cast<KnownField>(id), value); e != ParseError::kNone) {
          return fail(e);
        }
      }
    }
    pos = lf + 1;
  }
  head.field_count = count;
  if (head.version == Version::kHttp20Preface && count != 0) return fail(ParseError::kUnsupportedVersion);
  if (const ParseError e = cursor.semantics.finish(head); e != ParseError::kNone) return fail(e);
  o.status = HeadStatus::kComplete;
  o.consumed = pos;
  head.head_bytes = static_cast<uint32_t>(pos);
  copy_request_head(o, head, fields);
  return o;
}

}  // namespace sluice::test

// Reading the values of the framing fields, the same way on both sides of a
// connection: the request head's (field_semantics.cpp) and the response
// stream's. Each is short and runs once per framing field line, so each
// reads the usual value (one number, one option) without walking a list.
#pragma once

#include <cstdint>
#include <string_view>

#include "http/ascii_case.h"
#include "http/token_chars.h"

namespace sluice::http {

// `s` without leading and trailing optional whitespace (SP, HTAB).
[[nodiscard]] inline std::string_view trim_ows(std::string_view s) noexcept {
  while (!s.empty() && is_ows(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && is_ows(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// True, with `n` set, if `s` is 1*DIGIT of at most 18 digits: below 10^18,
// far beyond any body and clear of overflow. No sign, no whitespace.
[[nodiscard]] inline bool read_decimal(std::string_view s, uint64_t& n) noexcept {
  if (s.empty() || s.size() > 18) return false;
  uint64_t v = 0;
  for (const char d : s) {
    if (d < '0' || d > '9') return false;
    v = v * 10 + static_cast<uint64_t>(d - '0');
  }
  n = v;
  return true;
}

// Calls f(element) for each non-empty element of a comma-separated list
// (RFC 9110 5.6.1), with surrounding whitespace removed.
template <typename F>
void for_each_element(std::string_view list, F&& f) noexcept {
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view element = trim_ows(list.substr(0, comma));
    if (!element.empty()) f(element);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
}

// The options of a Connection field value that framing reads.
struct ConnectionOptions {
  bool close = false;
  bool keep_alive = false;
  bool upgrade = false;
};

[[nodiscard]] inline ConnectionOptions connection_options(std::string_view value) noexcept {
  ConnectionOptions o;
  // The two values nearly every peer sends, without splitting a list.
  if (iequals_lower(value, "keep-alive")) {
    o.keep_alive = true;
  } else if (iequals_lower(value, "close")) {
    o.close = true;
  } else {
    for_each_element(value, [&o](std::string_view option) {
      if (iequals_lower(option, "close")) o.close = true;
      else if (iequals_lower(option, "keep-alive")) o.keep_alive = true;
      else if (iequals_lower(option, "upgrade")) o.upgrade = true;
    });
  }
  return o;
}

}  // namespace sluice::http

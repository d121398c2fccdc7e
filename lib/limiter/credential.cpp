// See credential.h.
#include "limiter/credential.h"

#include <cstring>

namespace sluice::limiter {

std::string_view normalize_credential(std::string_view v, std::span<char> out) noexcept {
  auto ows = [](char c) { return c == ' ' || c == '\t'; };
  while (!v.empty() && ows(v.front())) v.remove_prefix(1);
  while (!v.empty() && ows(v.back())) v.remove_suffix(1);
  if (v.empty() || v.size() > out.size()) return {};
  size_t space = 0;
  while (space < v.size() && !ows(v[space])) ++space;
  if (space == v.size()) {  // a bare token
    std::memcpy(out.data(), v.data(), v.size());
    return {out.data(), v.size()};
  }
  // scheme, one space, token (RFC 9110 11.4: the scheme is case-insensitive).
  size_t n = 0;
  for (size_t i = 0; i < space; ++i) {
    const char c = v[i];
    out[n++] = (c >= 'A' && c <= 'Z') ? static_cast<char>(c | 0x20) : c;
  }
  size_t t = space;
  while (t < v.size() && ows(v[t])) ++t;
  out[n++] = ' ';
  std::memcpy(out.data() + n, v.data() + t, v.size() - t);
  n += v.size() - t;
  return {out.data(), n};
}

}  // namespace sluice::limiter

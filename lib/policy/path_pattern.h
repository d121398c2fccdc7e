// Path patterns of rules and preflight paths: literal segments, `{name}`
// segments that match one segment and capture it, and a trailing `*` that
// means "this path and every path under it" (`/api/claims*` matches
// /api/claims and /api/claims/7, not /api/claimsX; `/v1/*` matches
// everything under /v1/). Matching runs on a normalised path (see
// normalize_path), so a request cannot leave its family by spelling its path
// differently.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::policy {

class PathPattern {
 public:
  static constexpr size_t kMaxParams = 8;

  [[nodiscard]] static std::optional<PathPattern> compile(std::string_view pattern, std::string* why);

  // True if `path` (normalised) matches; params[i] then holds the i-th
  // parameter's segment, a view into `path`.
  [[nodiscard]] bool match(std::string_view path, std::span<std::string_view, kMaxParams> params) const noexcept;
  // False if `path` cannot match: it does not begin as every match does.
  // Inline, for the many patterns a request is not for.
  [[nodiscard]] bool may_match(std::string_view path) const noexcept { return path.starts_with(lead_); }
  // The literal every matching path's first segment equals (between the
  // leading '/' and the next '/' or the end), if the pattern begins with one;
  // nullopt for a pattern that begins with a {param}, or "/*".
  [[nodiscard]] std::optional<std::string_view> first_segment() const noexcept {
    if (segments_.empty() || segments_.front().param >= 0) return std::nullopt;
    return std::string_view(segments_.front().literal);
  }
  [[nodiscard]] int param_index(std::string_view name) const noexcept;
  [[nodiscard]] const std::string& text() const noexcept { return text_; }

 private:
  struct Segment {
    std::string literal;
    int param = -1;  // >= 0: a {param} segment
  };
  std::string text_;
  std::string lead_;  // what every path it matches begins with ("/" at least)
  std::vector<Segment> segments_;
  enum class Tail : uint8_t { kExact, kSubtreeOfLast, kAnyUnder } tail_ = Tail::kExact;
  std::vector<std::string> params_;
};

// Normalises a request path for matching, into `out` (at least path.size()
// bytes): percent-encoded unreserved characters are decoded, an encoded or
// literal backslash or an encoded slash reads as '/', runs of '/' collapse,
// and "." and ".." segments are resolved (RFC 3986 5.2.4). Returns the
// normalised path, a view into `out`; a path in normal form (path_form.h)
// comes back as it is. This is one reading among several an origin may take
// (IIS's, roughly), not the reading: the limiter judges a path that is not in
// normal form by it only beside the raw path, and never exempts it
// (ambiguous_paths in config/README.md, docs/paths.md).
[[nodiscard]] std::string_view normalize_path(std::string_view path, std::span<char> out) noexcept;

}  // namespace sluice::policy

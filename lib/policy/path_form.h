// Whether a request path is in normal form: spelled so that every common
// origin (nginx, Apache httpd, IIS, Node/Express, Go net/http, Python) reads
// the same path from it. A path that is not holds at least one class of
// bytes those origins read differently (a backslash, an encoded slash, a dot
// segment, ...; docs/paths.md has the table). The limiter judges a path by
// what the origin will execute; where it cannot know which reading the
// origin takes, it must not pick the one that grants the client more, so it
// needs to know when a path is ambiguous at all.
#pragma once

#include <cstdint>
#include <string_view>

namespace sluice::policy {

// Classes of bytes origins disagree on. Each is a bit of PathForm.
enum class PathClass : uint8_t {
  kRawBackslash,       // '\': a byte on Linux nginx/Apache/Python, a '/' to IIS (and nginx/Apache on Windows)
  kEncodedBackslash,   // %5C: decoded to '\' by most, read as a separator by IIS
  kEncodedSlash,       // %2F: a separator to nginx and Express routers after decoding, kept or refused by others
  kEncodedDot,         // a dot segment spelled with %2E (%2e, .%2e, %2e%2e): resolved by some, a name to others
  kDotSegment,         // a raw "." or ".." segment: resolved, redirected, kept or dropped
  kRepeatedSlash,      // "//": merged by nginx, Apache, Python; kept by Express; redirected by Go
  kSemicolon,          // ';': Tomcat/Spring path parameters ("..;/"), a plain byte elsewhere
  kEncodedControl,     // %00-%1F, %7F: refused, cut at, or kept
  kBadPercent,         // '%' not followed by two hex digits: refused by some, kept by others
  kNonUtf8,            // bytes >= 0x80 (encoded) that are not valid UTF-8, overlong forms (%C0%AF) included
  kEncodedUnreserved,  // %41, %2D, %7E, ...: decoded by nginx before routing, not by Express
};
inline constexpr int kPathClasses = 11;

// The classes a path holds; none: normal form.
class PathForm {
 public:
  [[nodiscard]] bool normal() const noexcept { return bits_ == 0; }
  [[nodiscard]] bool has(PathClass c) const noexcept { return (bits_ >> static_cast<unsigned>(c)) & 1u; }
  [[nodiscard]] uint16_t bits() const noexcept { return bits_; }
  void add(PathClass c) noexcept { bits_ = static_cast<uint16_t>(bits_ | (1u << static_cast<unsigned>(c))); }

 private:
  uint16_t bits_ = 0;
};

// The classes `path` (a request's path, without its query) holds. A path
// that is not origin-form ("*", a CONNECT authority) is normal: nothing is
// resolved in it, and no exemption or pattern (all begin with '/') can match
// it. No allocation; a short plain path costs a few vector compares.
[[nodiscard]] PathForm classify_path(std::string_view path) noexcept;

// True for most paths at a glance: at most 64 bytes, no '%', '\\' or ';',
// and no '/' followed by '/' or '.'. False says nothing: look closer.
[[nodiscard]] bool plainly_normal(std::string_view path) noexcept;

// The class's name as docs/paths.md and the tests spell it (e.g. "raw_backslash").
[[nodiscard]] std::string_view path_class_name(PathClass c) noexcept;

}  // namespace sluice::policy

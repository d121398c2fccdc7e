// What the head parser yields for one request: views into the bytes the
// caller fed (or into the parser's spill buffer when a line was split across
// segments), plus the framing facts the body tracker and the limiter need.
// Nothing here owns memory.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

namespace sluice::http {

// Fields the limiter and the framing logic always need. Their ids are fixed;
// names a policy asks for at load time get ids after these (see FieldSet).
enum class KnownField : uint8_t {
  kAuthorization,
  kOrigin,
  kHost,
  kXForwardedFor,
  kXRealIp,
  kCfConnectingIp,
  kContentLength,
  kTransferEncoding,
  kConnection,
  kUpgrade,
  kExpect,
  kCount,
};

using FieldId = uint8_t;
inline constexpr size_t kMaxTrackedFields = 32;
inline constexpr FieldId id_of(KnownField f) noexcept { return static_cast<FieldId>(f); }

enum class Method : uint8_t {
  kOther, kGet, kHead, kPost, kPut, kDelete, kOptions, kPatch, kConnect, kTrace, kPri,
};

enum class Version : uint8_t { kHttp10, kHttp11, kHttp20Preface };

enum class BodyKind : uint8_t { kNone, kLength, kChunked };

struct FieldLine {
  std::string_view name;
  std::string_view value;  // optional whitespace trimmed on both sides
};

struct RequestHead {
  std::string_view method;
  Method method_kind = Method::kOther;
  std::string_view target;     // as sent
  std::string_view path;       // path of origin- or absolute-form, without query; "*"; or the CONNECT authority
  std::string_view query;      // after '?', without it
  bool has_query = false;
  std::string_view authority;  // host[:port] from an absolute-form or CONNECT target
  Version version = Version::kHttp11;

  uint16_t field_count = 0;  // every field line, tracked or not
  uint32_t head_bytes = 0;   // request line through the final CRLF, leading empty lines included

  // First value of each tracked field and how many lines carried it
  // (saturating at 255). A field is present iff its count is non-zero.
  std::array<std::string_view, kMaxTrackedFields> tracked{};
  std::array<uint8_t, kMaxTrackedFields> tracked_count{};

  // Framing, derived from Content-Length, Transfer-Encoding and Connection.
  BodyKind body = BodyKind::kNone;
  uint64_t content_length = 0;
  bool keep_alive = true;       // false after "Connection: close", or HTTP/1.0 without keep-alive
  bool upgrade = false;         // Upgrade present and Connection lists "upgrade"
  bool expect_continue = false; // Expect: 100-continue

  [[nodiscard]] bool has(FieldId id) const noexcept { return tracked_count[id] != 0; }
  [[nodiscard]] bool has(KnownField f) const noexcept { return has(id_of(f)); }
  [[nodiscard]] std::string_view value(FieldId id) const noexcept {
    return tracked_count[id] ? tracked[id] : std::string_view{};
  }
  [[nodiscard]] std::string_view value(KnownField f) const noexcept { return value(id_of(f)); }
};

// What the response to a request may be, as far as framing goes: what the
// response framer expects, and what decides whether the appliance's own
// answer may leave the connection open.
enum class RequestKind : uint8_t {
  kOrdinary,
  kHead,     // the response has no body, whatever its fields say
  kConnect,  // a 2xx answer turns the connection into a tunnel
  kUpgrade,  // the request asked to upgrade: a 101 answer switches the connection
};

// The kind of a parsed request. A HEAD that also asks to upgrade is kHead: if
// the origin does not switch, its response has no body, and framing a body
// that never comes would lose the stream; if it does switch, the 101 is
// reported as an error and the flow is bridged, which is safe.
[[nodiscard]] inline RequestKind request_kind(const RequestHead& head) noexcept {
  if (head.method_kind == Method::kHead) return RequestKind::kHead;
  if (head.method_kind == Method::kConnect) return RequestKind::kConnect;
  if (head.upgrade) return RequestKind::kUpgrade;
  return RequestKind::kOrdinary;
}

}  // namespace sluice::http

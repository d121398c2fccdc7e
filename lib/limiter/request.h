// What the limiter judges: a request's meaning, whatever protocol carried it
// (method, path, query, authority, the fields a policy tracks) and the
// connection's facts (who sent it, to where). The protocol side builds one
// (for HTTP/1: http/limiter_request.h) as views into the request's own bytes:
// nothing here owns memory or copies a value, so building one costs a few
// stores, and it is valid while those bytes are.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "net/ip_address.h"

namespace sluice::limiter {

// A request method: the ones a policy may name, each a bit of a MethodSet
// (compiled_policy.h); any other is kOther and compared by its text. The
// values are the HTTP/1 parser's (http::Method), checked where a request is
// adapted, so the adapter converts with a cast.
enum class Method : uint8_t {
  kOther, kGet, kHead, kPost, kPut, kDelete, kOptions, kPatch, kConnect, kTrace, kPri,
};

// A field the policy tracks, by the id the policy's field set gave its name
// when it compiled: the same ids the protocol side records values under.
using FieldId = uint8_t;
inline constexpr size_t kMaxFields = 32;

// The ids of the fields the limiter reads by name (a CORS grant's Origin, a
// per-host key's Host); the protocol side's field set gives them these ids
// (checked in http/limiter_request.h).
namespace field {
inline constexpr FieldId kOrigin = 1;
inline constexpr FieldId kHost = 2;
}  // namespace field

// The tracked fields' values, by id: views of the protocol side's arrays,
// not copies (32 values would cost more to copy than a decision saves).
class FieldValues {
 public:
  FieldValues() noexcept = default;
  // `values` and `counts` hold kMaxFields entries each; a field is present
  // iff its count is non-zero.
  FieldValues(const std::string_view* values, const uint8_t* counts) noexcept : values_(values), counts_(counts) {}

  [[nodiscard]] bool has(FieldId id) const noexcept { return counts_[id] != 0; }
  // The field's first value; empty when it is absent.
  [[nodiscard]] std::string_view value(FieldId id) const noexcept { return counts_[id] ? values_[id] : std::string_view{}; }

 private:
  static constexpr std::array<std::string_view, kMaxFields> kNoValues{};
  static constexpr std::array<uint8_t, kMaxFields> kNoCounts{};
  const std::string_view* values_ = kNoValues.data();
  const uint8_t* counts_ = kNoCounts.data();
};

// Where a request came from and went to.
struct ConnectionFacts {
  net::IpAddress peer;         // the connection's source address
  net::IpAddress destination;  // its destination address
  uint16_t destination_port = 0;
};

struct Request {
  std::string_view method;            // as sent
  Method method_kind = Method::kOther;
  std::string_view path;              // without the query; "*"; or a CONNECT's authority
  std::string_view query;             // after '?', without it
  bool has_query = false;
  std::string_view authority;         // the target's host[:port] where the target names one; else empty
  uint16_t default_port = 80;         // what a host without a port means (443 for an https target)
  FieldValues fields;
  ConnectionFacts conn;

  [[nodiscard]] bool has(FieldId id) const noexcept { return fields.has(id); }
  [[nodiscard]] std::string_view value(FieldId id) const noexcept { return fields.value(id); }
  // The host the request names: the target's authority, else its Host field.
  [[nodiscard]] std::string_view host() const noexcept { return authority.empty() ? value(field::kHost) : authority; }
};

}  // namespace sluice::limiter

// The host an HTTP/1 request names (its Host field, or the authority of an
// absolute-form or CONNECT target), checked as a URI authority
// (net/authority.h): a value that is not exactly a host is refused (400), so
// that the appliance never reads a host differently from the origin.
#pragma once

#include <cstdint>
#include <string_view>

#include "http/parse_error.h"
#include "http/request_head.h"
#include "net/authority.h"

namespace sluice::http {

// kNone or kBadHost, by net::valid_authority (the empty value is valid).
[[nodiscard]] inline ParseError validate_host(std::string_view authority) noexcept {
  return net::valid_authority(authority) ? ParseError::kNone : ParseError::kBadHost;
}

// The port a host without one means for this request: 443 for an https
// absolute-form target, otherwise 80 (the appliance sees plain HTTP).
[[nodiscard]] uint16_t default_port(const RequestHead& head) noexcept;

}  // namespace sluice::http

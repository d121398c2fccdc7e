// The authority of a URI (RFC 3986 3.2): a host and an optional port,
// checked against the grammar (RFC 9110 7.2, RFC 3986 3.2.2-3.2.3, no
// userinfo) and brought to one spelling for the limiter's keys. A host the
// appliance reads differently from the origin is a way past a per-host
// budget, so a value that is not exactly an authority is refused, and every
// spelling of one host that the origin must treat alike lands in one bucket.
// Protocol-neutral: HTTP/1's Host and absolute-form targets, and HTTP/2's
// :authority, are all this.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace sluice::net {

// host = IP-literal / IPv4address / reg-name, then an optional ":" port
// (port = *DIGIT, at most 5 digits and at most 65535).
//  - The empty value is valid: HTTP/1.1 sends an empty Host when the target
//    URI has no authority (RFC 9112 3.2). Callers that need a host (an
//    absolute-form authority) refuse empty themselves.
//  - A port with an empty host (":80") is not: an http URI with an empty
//    host is invalid (RFC 9110 4.2.1).
//  - An empty port ("host:") is valid, as the grammar says, and means the
//    default port (RFC 3986 6.2.3).
//  - IP-literal is an IPv6 address only: no zone id, no IPvFuture, which no
//    origin is known to read the way this appliance would.
[[nodiscard]] bool valid_authority(std::string_view authority) noexcept;

// The port part of an authority ("443" in "[::1]:443"), empty when it has
// none or an empty one.
[[nodiscard]] std::string_view authority_port(std::string_view authority) noexcept;

// Writes the key spelling of a valid authority into `out` and returns its
// length; 0 when it does not fit or names no host. Lower case, percent-
// encoded unreserved bytes decoded (RFC 3986 6.2.2.2) and other escapes in
// upper-case hex, one trailing dot removed, an IPv6 literal written in full,
// and the port dropped when it is empty or means `default_port` ("080" is
// 80). So "API.example.com.", "api.example.com:080" and "api.example.com:"
// are all "api.example.com"; "api.example.com:8080" stays apart.
[[nodiscard]] size_t normalise_authority(std::string_view authority, uint16_t default_port,
                                         std::span<char> out) noexcept;

}  // namespace sluice::net

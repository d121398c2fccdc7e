// Why a request head or body was refused, and the status the appliance answers
// with. Every rejection in the HTTP layer is one of these kinds, so tests and
// counters can tell a smuggling attempt from an oversized head.
#pragma once

#include <cstdint>
#include <string_view>

namespace sluice::http {

enum class ParseError : uint8_t {
  kNone = 0,
  // Request line.
  kBadMethod,           // method empty or not a token
  kBadTarget,           // request-target empty, or a byte outside VCHAR
  kFragmentInTarget,    // '#' in the request-target: a target has no fragment (RFC 9112 3.2)
  kBadVersion,          // not "HTTP/" DIGIT "." DIGIT, or missing
  kUnsupportedVersion,  // well-formed but not 1.0 or 1.1
  // Field lines.
  kObsFold,                // line starts with SP/HTAB (obs-fold, RFC 9112 5.2)
  kWhitespaceBeforeColon,  // "Name : value" (RFC 9112 5.1)
  kBadFieldName,           // empty name or a non-token byte in it
  kMissingColon,           // a field line without ':'
  kBadFieldValue,          // a control byte in a field value
  // Line endings.
  kBareCR,  // CR not followed by LF
  kBareLF,  // LF not preceded by CR
  // Framing (RFC 9112 6).
  kBadContentLength,          // not 1*DIGIT, or too large
  kConflictingContentLength,  // several Content-Length values that differ
  kContentLengthWithTransferEncoding,
  kTransferEncodingNotChunked,  // final transfer coding is not "chunked"
  kUnknownTransferCoding,       // a coding this appliance cannot frame (501)
  kTransferEncodingInHttp10,
  kBadChunk,  // malformed chunk size line, data terminator or trailer
  // Semantics that decide who answers.
  kMissingHost,         // HTTP/1.1 without Host (RFC 9112 3.2)
  kDuplicateField,      // a singleton field (Host, Authorization, ...) repeated
  kBadHost,             // Host, or an absolute-form or CONNECT authority, not host[:port] (RFC 9112 3.2)
  kConnectWithContent,  // CONNECT with Content-Length or Transfer-Encoding (RFC 9110 9.3.6)
  kBadH2Preface,        // "PRI * HTTP/2.0" not followed by the rest of the HTTP/2 preface
  // Limits.
  kHeadTooLarge,   // 431
  kTooManyFields,  // 431
  // Connection switches that the policy does not allow.
  kConnectNotAllowed,           // 501
  kUpgradeNotAllowed,           // 501
  kH2PriorKnowledgeNotAllowed,  // 505
};

// The status code the appliance answers a request with when its head fails
// with this error (0 for kNone).
[[nodiscard]] uint16_t status_for(ParseError e) noexcept;

// Stable snake_case name, used in counters, logs and test output.
[[nodiscard]] std::string_view to_string(ParseError e) noexcept;

}  // namespace sluice::http

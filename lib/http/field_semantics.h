// The rules of the known fields that decide how a request is framed and who
// it comes from: Content-Length and Transfer-Encoding (RFC 9112 6), Connection,
// Expect, Host, and the fields that must not repeat. Fed one field line at a
// time while the head is scanned, settled when the head ends. Where two
// parsers could disagree on framing, the request is refused rather than
// guessed at: that disagreement is what request smuggling exploits.
#pragma once

#include <cstdint>
#include <string_view>

#include "http/parse_error.h"
#include "http/request_head.h"

namespace sluice::http {

constexpr uint32_t field_bit(KnownField f) noexcept { return uint32_t{1} << static_cast<unsigned>(f); }

class FieldSemantics {
 public:
  // Fields that identify the request or its caller: a second line of one
  // would let the origin and the limiter read different values.
  static constexpr uint32_t kSingletons = field_bit(KnownField::kHost) | field_bit(KnownField::kAuthorization) |
                                          field_bit(KnownField::kOrigin) | field_bit(KnownField::kXRealIp) |
                                          field_bit(KnownField::kCfConnectingIp);
  // Fields whose every line on_field must see.
  static constexpr uint32_t kFraming = field_bit(KnownField::kContentLength) | field_bit(KnownField::kTransferEncoding) |
                                       field_bit(KnownField::kConnection) | field_bit(KnownField::kExpect);

  // One line of a field in kFraming.
  [[nodiscard]] ParseError on_field(KnownField field, std::string_view value) noexcept;

  // Checks the head as a whole and fills in its framing.
  [[nodiscard]] ParseError finish(RequestHead& head) const noexcept;

 private:
  ParseError on_content_length(std::string_view value) noexcept;
  ParseError on_transfer_encoding(std::string_view value) noexcept;
  void on_connection(std::string_view value) noexcept;

  uint64_t content_length_ = 0;
  bool has_content_length_ = false;
  bool has_transfer_encoding_ = false;
  bool chunked_seen_ = false;
  bool chunked_last_ = false;      // the last coding listed so far is "chunked"
  bool chunked_repeated_ = false;  // "chunked" listed more than once
  bool unknown_coding_ = false;    // a coding this appliance cannot frame
  bool close_ = false;
  bool keep_alive_ = false;
  bool upgrade_token_ = false;
  bool expect_continue_ = false;
};

}  // namespace sluice::http

// See field_semantics.h.
#include "http/field_semantics.h"

#include "http/ascii_case.h"
#include "http/field_values.h"
#include "http/host_name.h"
#include "http/token_chars.h"

namespace sluice::http {

ParseError FieldSemantics::on_field(KnownField field, std::string_view value) noexcept {
  switch (field) {
    case KnownField::kContentLength: return on_content_length(value);
    case KnownField::kTransferEncoding: return on_transfer_encoding(value);
    case KnownField::kConnection: on_connection(value); break;
    case KnownField::kExpect:
      for_each_element(value, [this](std::string_view e) {
        if (iequals_lower(e, "100-continue")) expect_continue_ = true;
      });
      break;
    default: break;
  }
  return ParseError::kNone;
}

ParseError FieldSemantics::on_content_length(std::string_view value) noexcept {
  // 1*DIGIT only: no sign, no list, no inner whitespace.
  uint64_t n = 0;
  if (!read_decimal(value, n)) return ParseError::kBadContentLength;
  if (has_content_length_ && n != content_length_) return ParseError::kConflictingContentLength;
  has_content_length_ = true;
  content_length_ = n;
  return ParseError::kNone;
}

ParseError FieldSemantics::on_transfer_encoding(std::string_view value) noexcept {
  has_transfer_encoding_ = true;
  for_each_element(value, [this](std::string_view coding) {
    const bool chunked = iequals_lower(coding, "chunked");
    if (chunked && chunked_seen_) chunked_repeated_ = true;  // RFC 9112 7: at most once
    chunked_seen_ = chunked_seen_ || chunked;
    // Codings that may sit under "chunked" without changing where the body
    // ends; anything else (a coding with parameters included) we cannot frame.
    if (!chunked && !iequals_lower(coding, "gzip") && !iequals_lower(coding, "x-gzip") && !iequals_lower(coding, "deflate") &&
        !iequals_lower(coding, "compress") && !iequals_lower(coding, "x-compress")) {
      unknown_coding_ = true;
    }
    chunked_last_ = chunked;
  });
  return ParseError::kNone;
}

void FieldSemantics::on_connection(std::string_view value) noexcept {
  const ConnectionOptions o = connection_options(value);
  close_ = close_ || o.close;
  keep_alive_ = keep_alive_ || o.keep_alive;
  upgrade_token_ = upgrade_token_ || o.upgrade;
}

ParseError FieldSemantics::finish(RequestHead& h) const noexcept {
  if (has_transfer_encoding_) {
    // RFC 9112 6.1: Transfer-Encoding in an HTTP/1.0 request is faulty framing;
    // 6.3: with Content-Length too, or a final coding other than chunked, the
    // length cannot be determined reliably.
    if (h.version == Version::kHttp10) return ParseError::kTransferEncodingInHttp10;
    if (has_content_length_) return ParseError::kContentLengthWithTransferEncoding;
    if (!chunked_last_ || chunked_repeated_) return ParseError::kTransferEncodingNotChunked;
    if (unknown_coding_) return ParseError::kUnknownTransferCoding;
  }
  if (h.version == Version::kHttp11 && !h.has(KnownField::kHost)) return ParseError::kMissingHost;
  // RFC 9112 3.2: an invalid Host is a 400, even where an absolute-form
  // authority overrides it: the origin may read either.
  if (h.has(KnownField::kHost) && validate_host(h.value(KnownField::kHost)) != ParseError::kNone) {
    return ParseError::kBadHost;
  }
  // RFC 9110 9.3.6: a CONNECT request has no content. Framing one as if it
  // had would let the bytes after its head reach a tunnel unjudged, or an
  // origin that reads them as the next request.
  if (h.method_kind == Method::kConnect && (has_content_length_ || has_transfer_encoding_)) {
    return ParseError::kConnectWithContent;
  }

  if (has_transfer_encoding_) {
    h.body = BodyKind::kChunked;
  } else if (has_content_length_ && content_length_ > 0) {
    h.body = BodyKind::kLength;
  } else {
    h.body = BodyKind::kNone;
  }
  h.content_length = content_length_;
  h.keep_alive = !close_ && (h.version == Version::kHttp11 || keep_alive_);
  h.upgrade = upgrade_token_ && h.has(KnownField::kUpgrade);
  h.expect_continue = expect_continue_;
  return ParseError::kNone;
}

}  // namespace sluice::http

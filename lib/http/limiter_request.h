// An HTTP/1 head as the limiter reads it (limiter/request.h): its meaning
// (method, path, query, authority, tracked fields) without its framing, and
// the connection's facts. Views only: the request is valid while the head's
// bytes (and the head itself, whose tracked arrays it points into) are.
// Inline: every decided request takes it, and it is a few stores.
#pragma once

#include <type_traits>

#include "http/host_name.h"
#include "http/request_head.h"
#include "limiter/request.h"

namespace sluice::http {

// The limiter's ids are the parser's: converted by cast, read by name.
static_assert(static_cast<uint8_t>(limiter::Method::kOther) == static_cast<uint8_t>(Method::kOther) &&
              static_cast<uint8_t>(limiter::Method::kGet) == static_cast<uint8_t>(Method::kGet) &&
              static_cast<uint8_t>(limiter::Method::kHead) == static_cast<uint8_t>(Method::kHead) &&
              static_cast<uint8_t>(limiter::Method::kPost) == static_cast<uint8_t>(Method::kPost) &&
              static_cast<uint8_t>(limiter::Method::kPut) == static_cast<uint8_t>(Method::kPut) &&
              static_cast<uint8_t>(limiter::Method::kDelete) == static_cast<uint8_t>(Method::kDelete) &&
              static_cast<uint8_t>(limiter::Method::kOptions) == static_cast<uint8_t>(Method::kOptions) &&
              static_cast<uint8_t>(limiter::Method::kPatch) == static_cast<uint8_t>(Method::kPatch) &&
              static_cast<uint8_t>(limiter::Method::kConnect) == static_cast<uint8_t>(Method::kConnect) &&
              static_cast<uint8_t>(limiter::Method::kTrace) == static_cast<uint8_t>(Method::kTrace) &&
              static_cast<uint8_t>(limiter::Method::kPri) == static_cast<uint8_t>(Method::kPri),
              "limiter::Method and http::Method must number methods alike");
static_assert(limiter::field::kOrigin == id_of(KnownField::kOrigin) && limiter::field::kHost == id_of(KnownField::kHost),
              "the limiter reads Origin and Host by the parser's ids");
static_assert(limiter::kMaxFields == kMaxTrackedFields);
static_assert(std::is_same_v<limiter::FieldId, FieldId>);

// Every member given, so nothing is zeroed first (this runs per request).
[[nodiscard, gnu::always_inline]] inline limiter::Request limiter_request(const RequestHead& head,
                                                                          const limiter::ConnectionFacts& conn) noexcept {
  return limiter::Request{
      .method = head.method,
      .method_kind = static_cast<limiter::Method>(head.method_kind),
      .path = head.path,
      .query = head.query,
      .has_query = head.has_query,
      .authority = head.authority,
      // No authority in the target: no scheme either, so the default port.
      .default_port = head.authority.empty() ? uint16_t{80} : default_port(head),
      .fields = limiter::FieldValues(head.tracked.data(), head.tracked_count.data()),
      .conn = conn,
  };
}

}  // namespace sluice::http

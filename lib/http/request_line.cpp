// Turns the three parts of a request line, already split and checked for
// illegal bytes by the scan, into method, path, query and version.
#include <cstring>

#include "http/ascii_case.h"
#include "http/head_scan.h"
#include "http/host_name.h"

namespace sluice::http {

namespace {

Method method_kind(std::string_view m) noexcept {
  switch (m.size()) {
    case 3:
      if (m == "GET") return Method::kGet;
      if (m == "PUT") return Method::kPut;
      if (m == "PRI") return Method::kPri;
      break;
    case 4:
      if (m == "POST") return Method::kPost;
      if (m == "HEAD") return Method::kHead;
      break;
    case 5:
      if (m == "PATCH") return Method::kPatch;
      if (m == "TRACE") return Method::kTrace;
      break;
    case 6:
      if (m == "DELETE") return Method::kDelete;
      break;
    case 7:
      if (m == "OPTIONS") return Method::kOptions;
      if (m == "CONNECT") return Method::kConnect;
      break;
    default:
      break;
  }
  return Method::kOther;  // methods are case-sensitive: "get" is another method
}

bool starts_with_scheme(std::string_view target, std::string_view lower_scheme) noexcept {
  return target.size() >= lower_scheme.size() && iequals_lower(target.substr(0, lower_scheme.size()), lower_scheme);
}

constexpr std::string_view kRootPath = "/";

}  // namespace

ParseError finish_request_line(ScanCursor& c, std::string_view method, std::string_view target, size_t query_offset,
                               std::string_view version) noexcept {
  RequestHead& h = *c.head;
  h.method = method;
  h.method_kind = method_kind(method);
  h.target = target;
  // A target has no fragment (RFC 9112 3.2). An origin that cuts it off sees
  // another path than the rules matched, and in absolute form the part after
  // '#' would be read as the authority: refused, not guessed at. The scan
  // passes '#' as a VCHAR; the split target is short, so one memchr here
  // costs less than a class of its own in every SIMD kernel.
  if (std::memchr(target.data(), '#', target.size()) != nullptr) return ParseError::kFragmentInTarget;

  uint64_t v = 0;
  if (version.size() == 8) std::memcpy(&v, version.data(), 8);
  static constexpr char k11[8] = {'H', 'T', 'T', 'P', '/', '1', '.', '1'};
  static constexpr char k10[8] = {'H', 'T', 'T', 'P', '/', '1', '.', '0'};
  if (version.size() == 8 && std::memcmp(&v, k11, 8) == 0) {
    h.version = Version::kHttp11;
  } else if (version.size() == 8 && std::memcmp(&v, k10, 8) == 0) {
    h.version = Version::kHttp10;
  } else if (version == "HTTP/2.0" && h.method_kind == Method::kPri && target == "*") {
    // The HTTP/2 prior-knowledge preface; the stream decides whether it may pass.
    h.version = Version::kHttp20Preface;
    h.path = target;
    return ParseError::kNone;
  } else {
    const bool well_formed = version.size() == 8 && version.substr(0, 5) == "HTTP/" && version[5] >= '0' &&
                             version[5] <= '9' && version[6] == '.' && version[7] >= '0' && version[7] <= '9';
    return well_formed ? ParseError::kUnsupportedVersion : ParseError::kBadVersion;
  }

  if (h.method_kind == Method::kConnect) {
    // authority-form: host:port, and only for CONNECT (RFC 9112 3.2.3)
    if (target.find_first_of("/?@") != std::string_view::npos || target.find(':') == std::string_view::npos) {
      return ParseError::kBadTarget;
    }
    // The port is not optional here (RFC 9110 9.3.6: an empty or invalid one is refused).
    if (validate_host(target) != ParseError::kNone || net::authority_port(target).empty()) return ParseError::kBadHost;
    h.path = h.authority = target;
    return ParseError::kNone;
  }
  std::string_view rest = target;  // the part that holds path and query
  if (target.front() == '/') {
    // origin-form
  } else if (target == "*") {
    if (h.method_kind != Method::kOptions) return ParseError::kBadTarget;
    h.path = target;
    return ParseError::kNone;
  } else {
    // absolute-form: the authority replaces Host (RFC 9112 3.2.2)
    size_t scheme = 0;
    if (starts_with_scheme(target, "http://")) scheme = 7;
    else if (starts_with_scheme(target, "https://")) scheme = 8;
    else return ParseError::kBadTarget;
    const size_t end = target.find_first_of("/?", scheme);
    h.authority = target.substr(scheme, end == std::string_view::npos ? std::string_view::npos : end - scheme);
    // userinfo is deprecated and a recipient should treat it as an error (RFC 9110 4.2.4)
    if (h.authority.empty() || h.authority.find('@') != std::string_view::npos) return ParseError::kBadTarget;
    // The authority replaces Host for the origin and for the limiter's keys.
    if (validate_host(h.authority) != ParseError::kNone) return ParseError::kBadHost;
    if (end == std::string_view::npos || target[end] == '?') {
      h.path = kRootPath;
      if (end != std::string_view::npos) {
        h.has_query = true;
        h.query = target.substr(end + 1);
      }
      return ParseError::kNone;
    }
    rest = target.substr(end);
    if (query_offset != SIZE_MAX) query_offset -= end;
  }
  if (query_offset == SIZE_MAX) {
    h.path = rest;
  } else {
    h.path = rest.substr(0, query_offset);
    h.query = rest.substr(query_offset + 1);
    h.has_query = true;
  }
  return ParseError::kNone;
}

}  // namespace sluice::http

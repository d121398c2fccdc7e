// The control protocol's fixed parts, shared by the control thread and
// sluicectl: its version and its error codes. A request is
//   {"v": 1, "cmd": "stats", ...arguments}
// and every response carries "v" and "ok"; a refusal is
//   {"v": 1, "ok": false, "error": {"code": "unknown_command", "message": "..."}}
// with a code from the list below, stable across versions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "json.h"

namespace sluice::control {

inline constexpr int kProtocolVersion = 1;
inline constexpr size_t kMaxRequestBytes = 64 * 1024;

enum class ErrorCode {
  kBadRequest,          // not a JSON object, or a field of the wrong type
  kUnsupportedVersion,  // "v" is not one this daemon speaks
  kUnknownCommand,      // "cmd" names nothing
  kForbidden,           // the peer may not use the socket
  kRequestTooLarge,     // a line past kMaxRequestBytes
  kInvalidPolicy,       // a policy file that does not load or compile ("errors" lists file:line:column)
  kInvalidArgument,     // an argument of the right type with a value that means nothing (a bad token, hash, address)
  kNotFound,            // names a run, credential, bucket or key that is not there
  kFull,                // a table has no room (runs, credentials)
  kStateUnwritable,     // the state directory could not be written: nothing changed
  kInvalidCredentials,  // a credentials file with errors ("errors" lists file:line:column)
};

[[nodiscard]] constexpr std::string_view to_string(ErrorCode c) noexcept {
  switch (c) {
    case ErrorCode::kBadRequest: return "bad_request";
    case ErrorCode::kUnsupportedVersion: return "unsupported_version";
    case ErrorCode::kUnknownCommand: return "unknown_command";
    case ErrorCode::kForbidden: return "forbidden";
    case ErrorCode::kRequestTooLarge: return "request_too_large";
    case ErrorCode::kInvalidPolicy: return "invalid_policy";
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kNotFound: return "not_found";
    case ErrorCode::kFull: return "full";
    case ErrorCode::kStateUnwritable: return "state_unwritable";
    case ErrorCode::kInvalidCredentials: return "invalid_credentials";
  }
  return "unknown";
}

// A response's first members: the protocol's version and whether it is done.
[[nodiscard]] inline Json response_head(bool ok) {
  Json r = Json::object();
  r["v"] = kProtocolVersion;
  r["ok"] = ok;
  return r;
}

[[nodiscard]] inline Json error_object(ErrorCode code, std::string_view message) {
  Json e = Json::object();
  e["code"] = to_string(code);
  e["message"] = message;
  return e;
}

[[nodiscard]] inline std::string error_response(ErrorCode code, std::string_view message) {
  Json r = response_head(false);
  r["error"] = error_object(code, message);
  return dump_json(r);
}

// A file refused (a policy, a credentials file): the reason, and its errors
// one per line (file:line:column: message).
[[nodiscard]] inline std::string invalid_file_response(ErrorCode code, std::string_view message,
                                                       const std::vector<std::string>& errors) {
  Json r = response_head(false);
  r["error"] = error_object(code, message);
  r["errors"] = errors;
  return dump_json(r);
}

[[nodiscard]] inline std::string invalid_policy_response(std::string_view message, const std::vector<std::string>& errors) {
  return invalid_file_response(ErrorCode::kInvalidPolicy, message, errors);
}

}  // namespace sluice::control

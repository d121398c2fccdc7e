// The control protocol's fixed parts, shared by the control thread and
// sluicectl: its version, its command names and request members, its error
// codes. Both sides spell them from here, so they cannot drift apart. A
// request is
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

// The commands, as sluicectl sends them in "cmd" and sluiced registers them.
namespace command {
inline constexpr char kStatus[] = "status";
inline constexpr char kStats[] = "stats";
inline constexpr char kPolicyShow[] = "policy.show";
inline constexpr char kPolicyCheck[] = "policy.check";
inline constexpr char kPolicyReload[] = "policy.reload";
inline constexpr char kRuns[] = "runs";
inline constexpr char kRunStart[] = "run.start";
inline constexpr char kRunEnd[] = "run.end";
inline constexpr char kCredentialsLoad[] = "credentials.load";
inline constexpr char kCredentialsShow[] = "credentials.show";
inline constexpr char kCredentialAdd[] = "credential.add";
inline constexpr char kCredentialRemove[] = "credential.remove";
inline constexpr char kCredentialHash[] = "credential.hash";
inline constexpr char kBucketShow[] = "bucket.show";
inline constexpr char kUsageReport[] = "usage.report";
inline constexpr char kPenaltyList[] = "penalty.list";
inline constexpr char kPenaltyRelease[] = "penalty.release";
}  // namespace command

// A request's members: the envelope, and the arguments the commands take.
namespace arg {
inline constexpr char kVersion[] = "v";
inline constexpr char kCommand[] = "cmd";
inline constexpr char kFile[] = "file";  // a passed file's name, for messages
inline constexpr char kFd[] = "fd";      // true: a descriptor travels with the request
inline constexpr char kToken[] = "token";
inline constexpr char kBudget[] = "budget";
inline constexpr char kHash[] = "hash";
inline constexpr char kUser[] = "user";
inline constexpr char kCredential[] = "credential";
inline constexpr char kDeployment[] = "deployment";
inline constexpr char kTokens[] = "tokens";
inline constexpr char kBucket[] = "bucket";
inline constexpr char kKey[] = "key";
inline constexpr char kRule[] = "rule";
}  // namespace arg

// A response's envelope: "v", "ok", and a refusal's "error" object
// ({"code", "message"}) with a file's "errors".
namespace reply {
inline constexpr char kVersion[] = "v";
inline constexpr char kOk[] = "ok";
inline constexpr char kError[] = "error";
inline constexpr char kCode[] = "code";
inline constexpr char kMessage[] = "message";
inline constexpr char kErrors[] = "errors";
}  // namespace reply

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
  r[reply::kVersion] = kProtocolVersion;
  r[reply::kOk] = ok;
  return r;
}

[[nodiscard]] inline Json error_object(ErrorCode code, std::string_view message) {
  Json e = Json::object();
  e[reply::kCode] = to_string(code);
  e[reply::kMessage] = message;
  return e;
}

[[nodiscard]] inline std::string error_response(ErrorCode code, std::string_view message) {
  Json r = response_head(false);
  r[reply::kError] = error_object(code, message);
  return dump_json(r);
}

// A file refused (a policy, a credentials file): the reason, and its errors
// one per line (file:line:column: message).
[[nodiscard]] inline std::string invalid_file_response(ErrorCode code, std::string_view message,
                                                       const std::vector<std::string>& errors) {
  Json r = response_head(false);
  r[reply::kError] = error_object(code, message);
  r[reply::kErrors] = errors;
  return dump_json(r);
}

[[nodiscard]] inline std::string invalid_policy_response(std::string_view message, const std::vector<std::string>& errors) {
  return invalid_file_response(ErrorCode::kInvalidPolicy, message, errors);
}

}  // namespace sluice::control

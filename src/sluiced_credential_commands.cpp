// See sluiced_credential_commands.h. Each command checks its arguments
// first and answers a bad one with a coded error, so nothing is half done.
#include "sluiced_credential_commands.h"

#include <optional>
#include <string>

#include "control/credential_file.h"
#include "control/protocol.h"

namespace sluice::sluiced {

namespace {

using control::ErrorCode;
using control::Json;
using control::refuse;
using control::Reply;
using Change = control::ReplicaChange;
namespace arg = control::arg;

Reply credential_refusal(const control::CredentialRegistry::Result& r) {
  using F = control::CredentialRegistry::Failure;
  switch (r.failure) {
    case F::kInvalidFile: return control::invalid_file_response(ErrorCode::kInvalidCredentials, r.message, r.errors);
    case F::kUnsaved: return refuse(ErrorCode::kStateUnwritable, r.message);
    case F::kNotFound: return refuse(ErrorCode::kNotFound, r.message);
    case F::kFull:
    case F::kNone: break;
  }
  return refuse(ErrorCode::kFull, r.message);
}

void write_credential_result(Json& w, const control::CredentialRegistry::Result& r) {
  w["message"] = r.message;
  w["added"] = r.added;
  w["removed"] = r.removed;
  w["changed"] = r.changed;
}

std::optional<limiter::Digest> hash_arg(const Json& request, std::string& error) {
  const std::optional<std::string> text = control::string_arg(request, arg::kHash, error);
  if (!error.empty()) return std::nullopt;
  if (!text) {
    error = "needs \"hash\" (32 hex digits from sluicectl credential hash)";
    return std::nullopt;
  }
  const std::optional<limiter::Digest> h = control::parse_digest_hex(*text);
  if (!h) error = "'" + *text + "' is not a credential hash (32 hex digits from sluicectl credential hash)";
  return h;
}

}  // namespace

void CredentialCommands::register_commands(control::CommandTable& table) const {
  table.add_with_file(control::command::kCredentialsLoad,
                      [this](const Json& request, const control::PassedFile& file, Json& w) -> Reply {
    std::string name;
    if (Reply r = control::passed_file_name(request, file, control::command::kCredentialsLoad, name)) return r;
    const control::CredentialRegistry::Result r = credentials_.load_text(file.bytes, name);
    if (!r.ok) return credential_refusal(r);
    if (cluster_ != nullptr) {
      Change c{Change::Table::kCredentials, Change::Op::kReplace, {}, {}, {}};
      for (const control::CredentialEntry& e : credentials_.entries()) {
        c.all.emplace_back(control::digest_hex(e.hash), e.user);
      }
      cluster_->publish(std::move(c));
    }
    write_credential_result(w, r);
    return std::nullopt;
  });

  table.add(control::command::kCredentialsShow, [this](const Json&, Json& w) -> Reply {
    const control::CredentialRegistry::Summary s = credentials_.summary();
    w["credentials"] = s.credentials;
    w["capacity"] = s.capacity;
    w["users"] = Json::object();
    for (const auto& [user, count] : credentials_.users()) w["users"][user] = count;
    return std::nullopt;
  });

  table.add(control::command::kCredentialAdd, [this](const Json& request, Json& w) -> Reply {
    std::string error;
    const std::optional<limiter::Digest> hash = hash_arg(request, error);
    if (!hash) return refuse(ErrorCode::kInvalidArgument, "credential.add " + error);
    const std::optional<std::string> user = control::string_arg(request, arg::kUser, error);
    if (!user || !error.empty()) return refuse(ErrorCode::kBadRequest, "credential.add needs \"user\": a user name");
    if (!control::valid_user_name(*user)) {
      return refuse(ErrorCode::kInvalidArgument,
                    "'" + *user + "' is not a user name (1 to 64 characters of A-Z a-z 0-9 . _ @ + : -)");
    }
    const control::CredentialRegistry::Result r = credentials_.add(*hash, *user);
    if (!r.ok) return credential_refusal(r);
    if (cluster_ != nullptr) {
      cluster_->publish({Change::Table::kCredentials, Change::Op::kSet, control::digest_hex(*hash), *user, {}});
    }
    write_credential_result(w, r);
    return std::nullopt;
  });

  table.add(control::command::kCredentialRemove, [this](const Json& request, Json& w) -> Reply {
    std::string error;
    const std::optional<limiter::Digest> hash = hash_arg(request, error);
    if (!hash) return refuse(ErrorCode::kInvalidArgument, "credential.remove " + error);
    const control::CredentialRegistry::Result r = credentials_.remove(*hash);
    if (!r.ok) return credential_refusal(r);
    if (cluster_ != nullptr) {
      cluster_->publish({Change::Table::kCredentials, Change::Op::kDelete, control::digest_hex(*hash), {}, {}});
    }
    write_credential_result(w, r);
    return std::nullopt;
  });

  table.add(control::command::kCredentialHash, [this](const Json& request, Json& w) -> Reply {
    std::string error;
    const std::optional<std::string> credential = control::string_arg(request, arg::kCredential, error);
    if (!credential || !error.empty()) return refuse(ErrorCode::kBadRequest, "credential.hash needs \"credential\"");
    const std::optional<limiter::Digest> h = credentials_.hash(*credential);
    if (!h) return refuse(ErrorCode::kInvalidArgument, "an empty credential has no hash");
    w["hash"] = control::digest_hex(*h);
    return std::nullopt;
  });
}

}  // namespace sluice::sluiced

// See command_table.h.
#include "control/command_table.h"

#include "control/protocol.h"

namespace sluice::control {

void CommandTable::add(std::string name, Command command) {
  takes_file_[name] = false;
  commands_[std::move(name)] = [c = std::move(command)](const Json& request, const PassedFile&, Json& response) {
    return c(request, response);
  };
}

void CommandTable::add_with_file(std::string name, FileCommand command) {
  takes_file_[name] = true;
  commands_[std::move(name)] = std::move(command);
}

std::vector<std::string> CommandTable::names() const {
  std::vector<std::string> out;
  for (const auto& [name, command] : commands_) out.push_back(name);
  return out;
}

std::string CommandTable::dispatch(const Json& request, const PassedFile& file) const {
  const Json* cmd = member(request, arg::kCommand);
  if (cmd == nullptr || !cmd->is_string()) {
    return error_response(ErrorCode::kBadRequest, "a request names its command in \"cmd\"");
  }
  const std::string& wanted = cmd->get_ref<const std::string&>();
  const auto it = commands_.find(wanted);
  if (it == commands_.end()) {
    std::string known;
    for (const auto& [name, command] : commands_) known += (known.empty() ? "" : ", ") + name;
    return error_response(ErrorCode::kUnknownCommand,
                          "unknown command '" + wanted + "' (this sluiced knows " + known + ")");
  }
  if (file.passed && !takes_file_.at(it->first)) {
    return error_response(ErrorCode::kBadRequest, "'" + it->first + "' takes no file");
  }
  Json response = response_head(true);
  if (std::optional<std::string> refused = it->second(request, file, response)) return *refused;
  return dump_json(response);
}

std::optional<std::string> string_arg(const Json& request, std::string_view name, std::string& error) {
  const Json* v = member(request, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) {
    error = "\"" + std::string(name) + "\" must be a string";
    return std::nullopt;
  }
  return v->get_ref<const std::string&>();
}

std::optional<uint64_t> uint_arg(const Json& request, std::string_view name, uint64_t max, std::string& error) {
  const Json* v = member(request, name);
  if (v == nullptr) return std::nullopt;
  const std::optional<uint64_t> n = whole_number(*v);
  if (!n || *n > max) {
    error = "\"" + std::string(name) + "\" must be a whole number from 0 to " + std::to_string(max) +
            (v->is_number_float() ? ", written without a fraction or exponent" : "");
    return std::nullopt;
  }
  return n;
}

std::optional<std::string> passed_file_name(const Json& request, const PassedFile& file, std::string_view command,
                                            std::string& name, size_t max_bytes) {
  std::string error;
  const std::optional<std::string> named = string_arg(request, arg::kFile, error);
  if (!error.empty()) return error_response(ErrorCode::kBadRequest, "\"file\" is the passed file's name");
  if (!file.passed) {
    return error_response(ErrorCode::kBadRequest, std::string(command) +
                                                      " needs the file passed with the request (\"fd\": true and the "
                                                      "descriptor); sluiced opens no file a client names");
  }
  name = named && !named->empty() ? named->substr(0, 256) : std::string("(passed file)");
  for (char& c : name) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  if (!file.error.empty()) return error_response(ErrorCode::kInvalidArgument, name + ": " + file.error);
  if (file.bytes.size() > max_bytes) {
    return error_response(ErrorCode::kInvalidArgument,
                          name + ": larger than " + std::to_string(max_bytes >> 20) + " MiB; not read");
  }
  return std::nullopt;
}

}  // namespace sluice::control

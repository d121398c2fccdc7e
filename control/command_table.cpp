// See command_table.h.
#include "control/command_table.h"

#include <cmath>

#include "control/protocol.h"

namespace sluice::control {

void CommandTable::add(std::string name, Command command) {
  takes_file_[name] = false;
  commands_[std::move(name)] = [c = std::move(command)](const JsonValue& request, const PassedFile&, JsonWriter& w) {
    return c(request, w);
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

std::string CommandTable::dispatch(const JsonValue& request, const PassedFile& file) const {
  const JsonValue* cmd = request.get("cmd");
  if (cmd == nullptr || cmd->string() == nullptr) {
    return error_response(ErrorCode::kBadRequest, "a request names its command in \"cmd\"");
  }
  const auto it = commands_.find(*cmd->string());
  if (it == commands_.end()) {
    std::string known;
    for (const auto& [name, command] : commands_) known += (known.empty() ? "" : ", ") + name;
    return error_response(ErrorCode::kUnknownCommand,
                          "unknown command '" + *cmd->string() + "' (this sluiced knows " + known + ")");
  }
  if (file.passed && !takes_file_.at(it->first)) {
    return error_response(ErrorCode::kBadRequest, "'" + it->first + "' takes no file");
  }
  JsonWriter w;
  w.begin_object().key("v").value(kProtocolVersion).key("ok").value(true);
  if (std::optional<std::string> refused = it->second(request, file, w)) return *refused;
  w.end_object();
  return w.str();
}

std::optional<std::string> string_arg(const JsonValue& request, std::string_view name, std::string& error) {
  const JsonValue* v = request.get(name);
  if (v == nullptr) return std::nullopt;
  if (v->string() == nullptr) {
    error = "\"" + std::string(name) + "\" must be a string";
    return std::nullopt;
  }
  return *v->string();
}

std::optional<uint64_t> uint_arg(const JsonValue& request, std::string_view name, uint64_t max, std::string& error) {
  const JsonValue* v = request.get(name);
  if (v == nullptr) return std::nullopt;
  const std::optional<double> n = v->number();
  if (!n || *n < 0 || *n != std::floor(*n) || *n > static_cast<double>(max)) {
    error = "\"" + std::string(name) + "\" must be a whole number from 0 to " + std::to_string(max);
    return std::nullopt;
  }
  return static_cast<uint64_t>(*n);
}

}  // namespace sluice::control

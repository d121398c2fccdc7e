// The control commands, by name: what the control socket's handler
// dispatches to. Each command sets its members in the response object (its
// "v" and "ok" members are already there) or returns a complete error
// response; the table answers unknown commands itself, listing the
// known ones. A command that reads a file gets it passed (passed_file.h);
// one that does not refuses a request that passes one.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "control/json.h"
#include "control/passed_file.h"
#include "control/protocol.h"

namespace sluice::control {

// What a command comes to: nullopt when done (members set in the response),
// else the error response to send.
using Reply = std::optional<std::string>;

// A command's refusal, with its stable code.
[[nodiscard]] inline Reply refuse(ErrorCode code, const std::string& message) { return error_response(code, message); }

class CommandTable {
 public:
  using Command = std::function<Reply(const Json& request, Json& response)>;
  using FileCommand = std::function<Reply(const Json& request, const PassedFile& file, Json& response)>;

  void add(std::string name, Command command);
  void add_with_file(std::string name, FileCommand command);
  // The response to one request object and the file passed with it.
  [[nodiscard]] std::string dispatch(const Json& request, const PassedFile& file = {}) const;
  [[nodiscard]] std::vector<std::string> names() const;

 private:
  std::map<std::string, FileCommand, std::less<>> commands_;
  std::map<std::string, bool, std::less<>> takes_file_;
};

// Request arguments, read with their types checked. nullopt when absent;
// `error` set (and nullopt) when present with the wrong type or range.
[[nodiscard]] std::optional<std::string> string_arg(const Json& request, std::string_view name,
                                                    std::string& error);
// A JSON integer from 0 to `max` (up to 2^64-1, exact). A real number is
// refused even when it is whole (`1.0`, `1e3`): JSON writes those as
// reals, and a count that arrives as one was computed as one.
[[nodiscard]] std::optional<uint64_t> uint_arg(const Json& request, std::string_view name, uint64_t max,
                                               std::string& error);

// The file a client passed for a command that reads one (passed_file.h):
// its name for messages, in `name` (the client's word: bounded, and
// printable, since it reaches sluiced's log); nullopt, or the refusal to
// send. A request that names a file without passing it is refused: sluiced
// opens no path a client names. `command` is what the refusal calls it.
[[nodiscard]] std::optional<std::string> passed_file_name(const Json& request, const PassedFile& file,
                                                          std::string_view command, std::string& name,
                                                          size_t max_bytes = kMaxPassedFileBytes);

}  // namespace sluice::control

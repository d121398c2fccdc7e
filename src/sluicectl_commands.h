// sluicectl's commands and command line: one table (commands()) from which
// CLI11 parses the command line and writes --help, each command's help and
// the man page's OPTIONS and COMMANDS, so they cannot drift. Every mistake
// is caught here, as one line, before a socket is opened.
#pragma once

#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "control/json.h"

namespace sluice::sluicectl {

// What a command was given: its positional arguments in order and the
// options given, by name without "--" ("budget").
struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::string> flags;
};

// Sets the request's arguments in `w` ("v" and "cmd" are there); returns a
// usage error or "".
using Build = std::string (*)(const Args&, control::Json&);
using Print = void (*)(const control::Json&);
// "" when a value will do, else what is wrong: "wants ..., got '...'".
using Check = std::string (*)(const std::string&);

// A positional argument ("TOKEN") or an option ("--budget", value "N").
struct Argument {
  std::string_view name;
  std::string_view value;  // an option's value as help shows it
  std::string_view help;   // an option's; a command's help explains its positionals
  Check check = nullptr;
  bool optional = false;   // a positional that may be left out: "[FILE]"
};

struct Command {
  std::vector<std::string_view> words;  // {"run", "start"}
  std::string_view cmd;                 // the protocol's command
  std::string_view help;
  std::vector<Argument> positionals;
  std::vector<Argument> options;
  Build build;
  Print print;               // null: `top`, which draws its own view
  bool passes_file = false;  // its first argument is a file, opened and passed to sluiced
};

[[nodiscard]] std::span<const Command> commands();

// What the command line asks for.
struct CommandLine {
  enum class Mode { kRun, kHelp, kVersion, kManual, kUsageError };
  Mode mode = Mode::kRun;
  std::string text;                 // kHelp: the help; kUsageError: the one-line message
  const Command* command = nullptr;  // kRun
  Args args;
  std::string socket_path;
  bool json = false;
};

// `default_socket` is the socket when --socket is not given.
[[nodiscard]] CommandLine read_command_line(int argc, const char* const* argv, const std::string& default_socket);

// The man page's generated part: OPTIONS, COMMANDS, EXIT STATUS (markdown).
[[nodiscard]] std::string manual_text();

}  // namespace sluice::sluicectl

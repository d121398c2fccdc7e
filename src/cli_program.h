// What every program's command line does the same way on CLI11, written
// once: the flags they all have (--help, --version, the hidden
// --manual-markdown that man/meson.build runs), the parse and what ends it
// before the program reads its options (help, version, the manual, a
// mistake as one line), the man page's generated part, and the value
// checks more than one program uses. Each program keeps its own table of
// options in its own file (sluiced_options.cpp, sluice_replay_options.cpp,
// sluicectl_commands.cpp).
#pragma once

#include <CLI/CLI.hpp>

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli_text.h"

namespace sluice::cli_program {

// The flags besides the program's own.
struct Common {
  bool version = false;
  bool manual = false;
};

// A program's head and tail of --help (its description, its exit codes),
// -h/--help, --version and the hidden --manual-markdown, bound to `common`,
// and help's layout (cli_text::HelpFormatter); the program's own options
// follow.
void describe_common(CLI::App& app, const char* description, const char* exit_codes, Common& common);

// A program's whole command line made afresh, bound to values of its own
// (`describe` adds the options): what --help and the manual are written
// from.
template <typename Options, typename Given>
struct Table {
  Options options;
  Given given;
  CLI::App app;  // last: it refers to the values above
  explicit Table(void (*describe)(CLI::App&, Options&, Given&)) { describe(app, options, given); }
};

// What a parse came to.
struct Parsed {
  enum class Outcome { kRun, kHelp, kVersion, kManual, kError } outcome = Outcome::kRun;
  std::string error;  // kError: the one line
};

// How a program words CLI11's complaint (cli_text::error_line, or its own).
using ErrorLine = std::string (*)(const CLI::App& app, const CLI::ParseError& e);

// --version wins over a mistake elsewhere on the line; --help over both.
// `reversed_args` as CLI11 takes a vector: the last argument first.
[[nodiscard]] Parsed parse(CLI::App& app, std::vector<std::string>& reversed_args, const Common& common,
                           ErrorLine error_line = cli_text::error_line);
// The same on main()'s own arguments (CLI11 names the App after argv[0]).
[[nodiscard]] Parsed parse(CLI::App& app, int argc, const char* const* argv, const Common& common,
                           ErrorLine error_line = cli_text::error_line);

// What ends a parse before the program reads its options, in the
// program's own terms: `mode` set to its kHelp, kVersion or kManual, or
// `error` to the one line. True when the parse ended so.
template <typename Mode>
[[nodiscard]] bool ended(const Parsed& p, Mode& mode, std::string& error) {
  switch (p.outcome) {
    case Parsed::Outcome::kRun: return false;
    case Parsed::Outcome::kHelp: mode = Mode::kHelp; return true;
    case Parsed::Outcome::kVersion: mode = Mode::kVersion; return true;
    case Parsed::Outcome::kManual: mode = Mode::kManual; return true;
    case Parsed::Outcome::kError: error = p.error; return true;
  }
  return false;
}

// The man page's generated part (what --manual-markdown prints): OPTIONS,
// COMMANDS when the program has subcommands, EXIT STATUS.
[[nodiscard]] std::string manual_markdown(const CLI::App& app, std::string_view exit_codes);

// A whole number from `min` to `max`; else `wants`, ", got '...'".
template <typename T>
[[nodiscard]] CLI::Validator whole_number(T min, T max, std::string wants) {
  return CLI::Validator(
      [=](std::string& s) -> std::string {
        T v{};
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec == std::errc{} && end == s.data() + s.size() && v >= min && v <= max) return {};
        return wants + ", got '" + s + "'";
      },
      "");
}

// "80,8080" -> ports (1 to 65535); nullopt on any bad element.
[[nodiscard]] std::optional<std::vector<uint16_t>> parse_port_list(std::string_view s);

}  // namespace sluice::cli_program

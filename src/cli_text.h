// A CLI11 command line written out for people: --help (wrapped to a
// terminal's width, usage in the program's own words) and pandoc markdown
// for a man page (the options grouped as --help groups them, the
// subcommands with their own). The programs print the markdown on a hidden
// flag and man/meson.build turns it into the man pages' OPTIONS and
// COMMANDS, so --help and the man page are one table and cannot drift.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <string_view>

namespace sluice::cli_text {

// --help's layout: descriptions wrapped beside the option column; no
// generated "Usage:" line (each program's description says how it is used).
// With subcommands: the program's help lists every command, at any depth,
// as its words and arguments with its description below; a command's own
// help opens with "PROGRAM WORDS ARGUMENTS". Positional arguments are named
// there and explained in the description, so they get no list of their own.
class HelpFormatter : public CLI::Formatter {
 public:
  HelpFormatter();
  std::string make_option_desc(const CLI::Option* opt) const override;
  std::string make_usage(const CLI::App* app, std::string name) const override;
  std::string make_help(const CLI::App* app, std::string name, CLI::AppFormatMode mode) const override;
  std::string make_description(const CLI::App* app) const override;
  std::string make_positionals(const CLI::App* app) const override;
  std::string make_subcommands(const CLI::App* app, CLI::AppFormatMode mode) const override;
};

// Gives `app` (and the subcommands added after) the HelpFormatter.
void use_help_formatter(CLI::App& app);

// "# OPTIONS", then per group "## Group" and one definition per option.
// Options without a group (hidden ones) are left out.
[[nodiscard]] std::string options_markdown(const CLI::App& app);

// "# COMMANDS": every subcommand, at any depth, with its full words, its
// positional arguments, its description and its options.
[[nodiscard]] std::string commands_markdown(const CLI::App& app);

// A subcommand's words below the program's name: "run start".
[[nodiscard]] std::string command_words(const CLI::App& app);

// What a subcommand takes, as help writes it: "TOKEN [--budget N]" (its
// positional arguments, then its options but help).
[[nodiscard]] std::string command_arguments(const CLI::App& app);

// CLI11's complaint about a program's command line (no subcommands) as the
// project's one line: "unknown option '--x'" or "unexpected argument 'x'"
// for what it did not expect; a value's mistake "--workers wants 1 to 128,
// got '0'" (CLI11 puts a colon after the name; the checks are written to
// follow the name directly); "--config needs a value"; "--policy is given
// more than once".
[[nodiscard]] std::string error_line(const CLI::App& app, const CLI::ParseError& e);

// Text kept exactly as written (a usage block, a table of exit codes).
[[nodiscard]] std::string preformatted(std::string_view text);

}  // namespace sluice::cli_text

// See cli_program.h.
#include "cli_program.h"

namespace sluice::cli_program {

void describe_common(CLI::App& app, const char* description, const char* exit_codes, Common& common) {
  app.description(description);
  app.footer(exit_codes);
  app.set_help_flag("-h,--help", "this help, and exit");
  app.add_flag("--version", common.version, "the version, and exit");
  // Hidden (no group): what the build runs to write the man page's options.
  app.add_flag("--manual-markdown", common.manual, "")->group("");
  cli_text::use_help_formatter(app);
}

namespace {

template <typename Call>
Parsed parse_with(CLI::App& app, const Common& common, ErrorLine error_line, Call call) {
  try {
    call();
  } catch (const CLI::CallForHelp&) {
    return {Parsed::Outcome::kHelp, {}};
  } catch (const CLI::ParseError& e) {
    if (common.version) return {Parsed::Outcome::kVersion, {}};
    return {Parsed::Outcome::kError, error_line(app, e)};
  }
  if (common.version) return {Parsed::Outcome::kVersion, {}};
  if (common.manual) return {Parsed::Outcome::kManual, {}};
  return {};
}

}  // namespace

Parsed parse(CLI::App& app, std::vector<std::string>& reversed_args, const Common& common, ErrorLine error_line) {
  return parse_with(app, common, error_line, [&] { app.parse(reversed_args); });
}

Parsed parse(CLI::App& app, int argc, const char* const* argv, const Common& common, ErrorLine error_line) {
  return parse_with(app, common, error_line, [&] { app.parse(argc, argv); });
}

std::string manual_markdown(const CLI::App& app, std::string_view exit_codes) {
  std::string out = cli_text::options_markdown(app);
  if (!app.get_subcommands([](const CLI::App*) { return true; }).empty()) out += "\n" + cli_text::commands_markdown(app);
  return out + "\n# EXIT STATUS\n\n" + cli_text::preformatted(exit_codes);
}

std::optional<std::vector<uint16_t>> parse_port_list(std::string_view s) {
  std::vector<uint16_t> ports;
  std::string_view rest = s;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    uint16_t p = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), p);
    if (ec != std::errc{} || end != item.data() + item.size() || p == 0) return std::nullopt;
    ports.push_back(p);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
    if (rest.empty()) return std::nullopt;
  }
  if (ports.empty()) return std::nullopt;
  return ports;
}

}  // namespace sluice::cli_program

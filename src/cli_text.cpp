// See cli_text.h. The man page's markdown is pandoc's: definition lists
// ("term\n:   text").
#include "cli_text.h"

#include <vector>

namespace sluice::cli_text {
namespace {

constexpr size_t kWidth = 80;

// `text` broken into lines of at most `width` at spaces.
std::string wrapped(std::string_view text, size_t width) {
  std::string out;
  size_t line = 0;
  while (!text.empty()) {
    const size_t space = text.find(' ');
    const std::string_view word = text.substr(0, space);
    if (line > 0 && line + 1 + word.size() > width) {
      out += '\n';
      line = 0;
    } else if (line > 0) {
      out += ' ';
      ++line;
    }
    out += word;
    line += word.size();
    text = space == std::string_view::npos ? std::string_view() : text.substr(space + 1);
  }
  return out;
}

// Every line of `text` after `prefix`.
std::string indented(const std::string& text, const std::string& prefix) {
  std::string out = prefix;
  for (char c : text) {
    out += c;
    if (c == '\n') out += prefix;
  }
  return out;
}

// The apps from the program down to `app`.
std::vector<const CLI::App*> chain_to(const CLI::App& app) {
  std::vector<const CLI::App*> chain;
  for (const CLI::App* a = &app; a != nullptr; a = a->get_parent()) chain.insert(chain.begin(), a);
  return chain;
}

// The commands under `app` that have no subcommands of their own, in order.
void leaves(const CLI::App& app, std::vector<const CLI::App*>& out) {
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->get_subcommands([](const CLI::App*) { return true; }).empty()) {
      out.push_back(sub);
    } else {
      leaves(*sub, out);
    }
  }
}

// "run start TOKEN [--budget N]".
std::string command_line(const CLI::App& app) {
  const std::string args = command_arguments(app);
  return command_words(app) + (args.empty() ? "" : " " + args);
}

// Markdown's own characters in help text taken literally.
std::string escaped(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (std::string_view("\\*_`[]<>#").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

// "**--workers** *N*" or "**-q**, **--quiet**".
std::string term(const CLI::Option& opt) {
  std::string names;
  for (const std::string& s : opt.get_snames()) names += (names.empty() ? "" : ", ") + std::string("**-") + escaped(s) + "**";
  for (const std::string& l : opt.get_lnames()) names += (names.empty() ? "" : ", ") + std::string("**--") + escaped(l) + "**";
  if (opt.get_type_size() != 0 && !opt.get_type_name().empty()) names += " *" + escaped(opt.get_type_name()) + "*";
  return names;
}

void definitions(const CLI::App& app, const std::string& group, std::string& out) {
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->get_group() != group || opt->nonpositional() == false) continue;
    out += term(*opt) + "\n:   " + escaped(opt->get_description()) + "\n\n";
  }
}

std::vector<std::string> groups_in_order(const CLI::App& app) {
  std::vector<std::string> groups;
  for (const CLI::Option* opt : app.get_options()) {
    const std::string& g = opt->get_group();
    if (g.empty() || !opt->nonpositional()) continue;
    bool seen = false;
    for (const std::string& h : groups) seen = seen || h == g;
    if (!seen) groups.push_back(g);
  }
  return groups;
}

// "sluicectl run start" with its positionals: "*TOKEN*".
std::string usage_words(const CLI::App& app) {
  std::string words;
  for (const CLI::App* a : chain_to(app)) words += (words.empty() ? "" : " ") + escaped(a->get_name());
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->nonpositional()) continue;
    const bool required = opt->get_required();
    words += std::string(" ") + (required ? "" : "[") + "*" + escaped(opt->get_name()) + "*" + (required ? "" : "]");
  }
  return words;
}

void command(const CLI::App& app, std::string& out) {
  const std::vector<const CLI::App*> subs = app.get_subcommands([](const CLI::App*) { return true; });
  if (subs.empty() || !app.get_description().empty()) {
    out += "**" + usage_words(app) + "**\n:   " + escaped(app.get_description()) + "\n";
    for (const CLI::Option* opt : app.get_options()) {
      if (!opt->nonpositional() || opt->get_group().empty() || opt == app.get_help_ptr()) continue;
      out += "\n    " + term(*opt) + ": " + escaped(opt->get_description()) + "\n";
    }
    out += "\n";
  }
  for (const CLI::App* sub : subs) command(*sub, out);
}

}  // namespace

std::string command_words(const CLI::App& app) {
  std::string words;
  for (const CLI::App* a : chain_to(app)) {
    if (a->get_parent() != nullptr) words += (words.empty() ? "" : " ") + a->get_name();
  }
  return words;
}

std::string command_arguments(const CLI::App& app) {
  std::string out;
  const auto add = [&out](bool required, const std::string& s) {
    out += (out.empty() ? "" : " ") + (required ? s : "[" + s + "]");
  };
  for (const CLI::Option* opt : app.get_options()) {
    if (!opt->nonpositional()) add(opt->get_required(), opt->get_name());
  }
  for (const CLI::Option* opt : app.get_options()) {
    if (!opt->nonpositional() || opt->get_group().empty() || opt == app.get_help_ptr()) continue;
    const std::string name =
        opt->get_lnames().empty() ? "-" + opt->get_snames().front() : "--" + opt->get_lnames().front();
    const bool takes_value = opt->get_type_size() != 0 && !opt->get_type_name().empty();
    add(opt->get_required(), name + (takes_value ? " " + opt->get_type_name() : ""));
  }
  return out;
}

std::string options_markdown(const CLI::App& app) {
  std::string out = "# OPTIONS\n\n";
  for (const std::string& g : groups_in_order(app)) {
    out += "## " + escaped(g) + "\n\n";
    definitions(app, g, out);
  }
  return out;
}

std::string commands_markdown(const CLI::App& app) {
  std::string out = "# COMMANDS\n\n";
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) command(*sub, out);
  return out;
}

std::string preformatted(std::string_view text) {
  std::string out = "```\n";
  out += text;
  if (!text.empty() && text.back() != '\n') out += '\n';
  return out + "```\n";
}

HelpFormatter::HelpFormatter() { column_width(30); }

std::string HelpFormatter::make_option_desc(const CLI::Option* opt) const {
  return wrapped(opt->get_description(), kWidth - get_column_width());
}

std::string HelpFormatter::make_usage(const CLI::App*, std::string) const { return {}; }

// The commands before the options: they are what a reader looks for.
std::string HelpFormatter::make_help(const CLI::App* app, std::string, CLI::AppFormatMode mode) const {
  if (mode == CLI::AppFormatMode::Sub) return make_expanded(app);
  const std::string footer = make_footer(app);
  return make_description(app) + make_subcommands(app, mode) + make_groups(app, mode) + (footer.empty() ? "" : "\n") +
         footer;
}

std::string HelpFormatter::make_description(const CLI::App* app) const {
  const std::string& desc = app->get_description();
  if (app->get_parent() == nullptr) return desc.empty() ? desc : desc + "\n";
  const bool group = !app->get_subcommands([](const CLI::App*) { return true; }).empty();
  std::string out = chain_to(*app).front()->get_name() + " " + command_line(*app) + (group ? " COMMAND" : "") + "\n";
  if (!desc.empty()) out += indented(wrapped(desc, kWidth - 2), "  ") + "\n";
  return out;
}

std::string HelpFormatter::make_positionals(const CLI::App*) const { return {}; }

std::string HelpFormatter::make_subcommands(const CLI::App* app, CLI::AppFormatMode) const {
  std::vector<const CLI::App*> commands;
  leaves(*app, commands);
  if (commands.empty()) return {};
  std::string out = "\nCommands:\n";
  for (const CLI::App* c : commands) {
    out += "  " + command_line(*c) + "\n";
    if (!c->get_description().empty()) out += indented(wrapped(c->get_description(), kWidth - 6), "      ") + "\n";
  }
  return out;
}

void use_help_formatter(CLI::App& app) { app.formatter(std::make_shared<HelpFormatter>()); }

std::string error_line(const CLI::App& app, const CLI::ParseError& e) {
  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
    const std::vector<std::string> rest = app.remaining();
    const std::string first = rest.empty() ? std::string() : rest.front();
    return first.rfind('-', 0) == 0 ? "unknown option '" + first + "'" : "unexpected argument '" + first + "'";
  }
  std::string m = e.what();
  const size_t colon = m.find(": ");
  if (m.rfind("--", 0) == 0 && colon != std::string::npos) {
    const bool mismatch = dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr;
    if (dynamic_cast<const CLI::ValidationError*>(&e) != nullptr) {
      m.erase(colon, 1);
    } else if (mismatch && m.find("missing") != std::string::npos) {  // "--config: 1 required FILE missing"
      m = m.substr(0, colon) + " needs a value";
    } else if (mismatch && m.find("At Most") != std::string::npos) {  // "--policy: At Most 1 required but received 2"
      m = m.substr(0, colon) + " is given more than once";
    }
  }
  for (char& c : m) c = c == '\n' ? ' ' : c;
  return m;
}

}  // namespace sluice::cli_text

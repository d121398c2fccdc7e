// sluicectl's commands (the table) and its command line on CLI11. Every
// command is one row: its words, its arguments and options with their
// checks, its help, how it builds the request and how it prints the answer.
// describe() turns the table into one CLI::App, a subcommand per word; its
// help and the man page come from that App, the parser's own.
#include "sluicectl_commands.h"

#include <CLI/CLI.hpp>

#include <charconv>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>

#include "cli_program.h"
#include "cli_text.h"
#include "control/protocol.h"
#include "sluicectl_print.h"

namespace sluice::sluicectl {
namespace {

using control::Json;
namespace arg = control::arg;
namespace command = control::command;

constexpr const char* kDescription = R"(sluicectl: operate a running sluiced over its control socket.

Usage: sluicectl [--socket PATH] [--json] COMMAND [ARGUMENTS]
       sluicectl COMMAND --help   (one command's help))";

constexpr const char* kExitCodes = R"(Exit codes:
  0  done
  1  refused by sluiced (its reasons on stderr)
  2  a usage error (one line on stderr; nothing sent)
  3  cannot reach sluiced (not running, no permission, no answer within 30 s))";

std::optional<uint64_t> whole(const std::string& s, uint64_t max) {
  uint64_t n = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (s.empty() || ec != std::errc{} || p != s.data() + s.size() || n > max) return std::nullopt;
  return n;
}

std::string budget_check(const std::string& s) {
  const std::optional<uint64_t> n = whole(s, 1'000'000'000);
  return n && *n > 0 ? std::string() : "wants requests per minute (1 to 1000000000), got '" + s + "'";
}

std::string tokens_check(const std::string& s) {
  return whole(s, uint64_t{1} << 32) ? std::string() : "wants a whole number (0 to 4294967296), got '" + s + "'";
}

std::string count_check(const std::string& s) {
  const std::optional<uint64_t> n = whole(s, 1'000'000);
  return n && *n > 0 ? std::string() : "wants refreshes (1 to 1000000), got '" + s + "'";
}

std::string interval_check(const std::string& s) {
  double v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  const bool ok = !s.empty() && ec == std::errc{} && p == s.data() + s.size() && v >= 0.1 && v <= 3600;
  return ok ? std::string() : "wants seconds (0.1 to 3600), got '" + s + "'";
}

std::string socket_check(const std::string& s) { return s.empty() ? "needs a path" : std::string(); }

std::string no_args(const Args&, Json&) { return {}; }

// A file the command reads: sluicectl opens it with its caller's rights and
// passes the descriptor; sluiced opens no path a client names. The request
// carries its name for messages.
std::string file_arg(const std::string& path, Json& w) {
  w[arg::kFile] = path;
  w[arg::kFd] = true;
  return {};
}

std::string first_is_file(const Args& a, Json& w) { return file_arg(a.positional[0], w); }

std::string optional_file(const Args& a, Json& w) {
  return a.positional.empty() ? std::string() : file_arg(a.positional[0], w);
}

std::string start_run(const Args& a, Json& w) {
  w[arg::kToken] = a.positional[0];
  if (const auto it = a.flags.find("budget"); it != a.flags.end()) {
    w[arg::kBudget] = whole(it->second, UINT64_MAX).value();
  }
  return {};
}

std::string end_run(const Args& a, Json& w) {
  w[arg::kToken] = a.positional[0];
  return {};
}

std::string add_credential(const Args& a, Json& w) {
  w[arg::kHash] = a.positional[0];
  w[arg::kUser] = a.positional[1];
  return {};
}

std::string remove_credential(const Args& a, Json& w) {
  w[arg::kHash] = a.positional[0];
  return {};
}

// The credential comes on stdin, never on the command line (ps shows that).
std::string hash_credential(const Args&, Json& w) {
  std::string credential((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  while (!credential.empty() && (credential.back() == '\n' || credential.back() == '\r')) credential.pop_back();
  if (credential.empty()) return "credential hash reads the credential on stdin; it was empty";
  w[arg::kCredential] = credential;
  return {};
}

std::string report_usage(const Args& a, Json& w) {
  w[arg::kDeployment] = a.positional[0];
  w[arg::kTokens] = whole(a.positional[1], UINT64_MAX).value();
  if (const auto it = a.flags.find("bucket"); it != a.flags.end()) w[arg::kBucket] = it->second;
  return {};
}

std::string release_penalty(const Args& a, Json& w) {
  w[arg::kRule] = a.positional[0];
  w[arg::kKey] = a.positional[1];
  return {};
}

std::string show_bucket(const Args& a, Json& w) {
  w[arg::kBucket] = a.positional[0];
  w[arg::kKey] = a.positional[1];
  return {};
}

const Command kCommands[] = {
    {{"status"}, command::kStatus, "version, uptime, policy and its digest, ports, workers, flows, runs", {}, {},
     no_args, print_status},
    {{"stats"}, command::kStats,
     "every counter of the workers added up, per rule, the tables' occupancy and the ports' packet counts", {}, {},
     no_args, print_stats},
    {{"top"}, command::kStats,
     "a live view, refreshed every S seconds (default 1): request rates, refusals per rule, the busiest keys; "
     "Ctrl-C ends it, or --count N after N refreshes",
     {},
     {{"--interval", "S", "seconds between refreshes (0.1 to 3600, default 1)", interval_check},
      {"--count", "N", "stop after N refreshes (default: until Ctrl-C)", count_check}},
     no_args, nullptr},
    {{"runs"}, command::kRuns, "the live runs: token, budget, when they started", {}, {}, no_args, print_runs},
    {{"run", "start"}, command::kRunStart,
     "make a run live (TB01): requests on /vrx/TOKEN/... are paced per run, at N per minute if given, else at the "
     "policy's run budget; journalled, so a restart keeps it. Returns once every worker sees it",
     {{"TOKEN"}},
     {{"--budget", "N", "the run's budget in requests per minute (1 to 1000000000)", budget_check}},
     start_run, print_message},
    {{"run", "end"}, command::kRunEnd, "end a run (TB13): once this returns, no request on it is paced at the run rate",
     {{"TOKEN"}}, {}, end_run, print_message},
    {{"credentials", "load"}, command::kCredentialsLoad,
     "replace the credential-to-user map (RF04) with FILE's: lines of 'HASH USER', hashes from 'sluicectl "
     "credential hash'; a file with errors changes nothing (exit 1, file:line:column)",
     {{"FILE"}}, {}, first_is_file, print_message, true},
    {{"credentials", "show"}, command::kCredentialsShow, "how many credentials are loaded, per user", {}, {}, no_args,
     print_credentials},
    {{"credential", "add"}, command::kCredentialAdd, "map one credential hash to USER (RF04)", {{"HASH"}, {"USER"}}, {},
     add_credential, print_message},
    {{"credential", "remove"}, command::kCredentialRemove,
     "forget one credential hash: its requests then get the policy's unknown-credential answer (RF10)", {{"HASH"}},
     {}, remove_credential, print_message},
    {{"credential", "hash"}, command::kCredentialHash,
     "read one credential (the Authorization value, e.g. 'Bearer abc') on stdin and print its hash, computed by "
     "sluiced with its secret (TB05: the scheme's case and surrounding spaces do not matter)",
     {}, {}, hash_credential, print_hash},
    {{"usage", "report"}, command::kUsageReport,
     "charge TOKENS used by a finished request to DEPLOYMENT's current minute (DQ05); once the minute's total "
     "reaches the quota its next request is refused (DQ07)",
     {{"DEPLOYMENT"}, {"TOKENS", "", "", tokens_check}},
     {{"--bucket", "NAME", "the deployment-quota bucket to charge (default: the policy's only one)"}},
     report_usage, print_usage_report},
    {{"bucket", "show"}, command::kBucketShow,
     "remaining and reset of one key's bucket, without charging it. KEY as the bucket's rules key it: a client "
     "address, a run token or deployment name, a user name, or a credential hash",
     {{"BUCKET"}, {"KEY"}}, {}, show_bucket, print_bucket},
    {{"penalty", "list"}, command::kPenaltyList,
     "the keys in a rule's penalty box now (policy: penalty): rule, key, how long ago boxed, seconds left; the "
     "latest-ending 1000",
     {}, {}, no_args, print_penalties},
    {{"penalty", "release"}, command::kPenaltyRelease,
     "end KEY's box in RULE's penalty box at once (its refusals are counted afresh). KEY as the rule keys it, as "
     "for bucket show",
     {{"RULE"}, {"KEY"}}, {}, release_penalty, print_message},
    {{"policy", "show"}, command::kPolicyShow, "the active policy: name, file, digest, buckets, rules", {}, {}, no_args,
     print_policy},
    {{"policy", "check"}, command::kPolicyCheck,
     "validate FILE as the running sluiced would load it; exit 0 if usable, 1 with its errors (file:line:column)",
     {{"FILE"}}, {}, first_is_file, print_policy_check, true},
    {{"policy", "reload"}, command::kPolicyReload,
     "publish FILE (default: sluiced's --config file, as SIGHUP does); returns once every worker uses it; a broken "
     "file changes nothing (exit 1, its errors). Buckets of unchanged rules keep their state",
     {{"FILE", "", "", nullptr, true}}, {}, optional_file, print_reloaded, true},
};

CLI::Validator validator(Check check) {
  return CLI::Validator([check](std::string& s) { return check(s); }, "");
}

// Where CLI11 puts one command's values.
struct Bound {
  CLI::App* app = nullptr;
  std::vector<std::string> positionals, options;
};

// The global options' values.
struct Globals {
  std::string socket_path;
  bool json = false;
  cli_program::Common common;  // --version, --manual-markdown
};

// `parent`'s subcommand `word`, made when it is not there yet (a group such
// as "run", whose commands are its subcommands).
CLI::App* group(CLI::App& parent, std::string_view word) {
  for (CLI::App* sub : parent.get_subcommands([](CLI::App*) { return true; })) {
    if (sub->get_name() == word) return sub;
  }
  CLI::App* g = parent.add_subcommand(std::string(word), "");
  g->set_help_flag("-h,--help", "this help");
  return g;
}

void describe_command(CLI::App& root, const Command& c, Bound& b) {
  CLI::App* parent = &root;
  for (size_t i = 0; i + 1 < c.words.size(); ++i) parent = group(*parent, c.words[i]);
  b.app = parent->add_subcommand(std::string(c.words.back()), std::string(c.help));
  b.app->set_help_flag("-h,--help", "this help");
  b.positionals.resize(c.positionals.size());
  b.options.resize(c.options.size());
  for (size_t i = 0; i < c.positionals.size(); ++i) {
    const Argument& p = c.positionals[i];
    CLI::Option* o = b.app->add_option(std::string(p.name), b.positionals[i], "");
    o->required(!p.optional)->group("Arguments");  // named in the command's line, not listed
    if (p.check != nullptr) o->check(validator(p.check));
  }
  for (size_t i = 0; i < c.options.size(); ++i) {
    const Argument& a = c.options[i];
    CLI::Option* o = b.app->add_option(std::string(a.name), b.options[i], std::string(a.help));
    o->type_name(std::string(a.value))->group("Options");
    if (a.check != nullptr) o->check(validator(a.check));
  }
}

// The whole command line, bound to `g` and `bound` (one per command).
void describe(CLI::App& app, Globals& g, std::vector<Bound>& bound) {
  app.name("sluicectl");
  app.description(kDescription);
  cli_text::use_help_formatter(app);
  // Global options may come after the command's words; one command a time.
  app.fallthrough();
  app.require_subcommand(0, 1);
  const char* group = "Global options";
  app.set_help_flag("-h,--help", "this help; COMMAND --help for one command's")->group(group);
  app.add_option("--socket", g.socket_path,
                 "the control socket (default $SLUICE_CONTROL_SOCKET, else /run/sluice/control.sock)")
      ->type_name("PATH")->check(validator(socket_check))->group(group);
  app.add_flag("--json", g.json, "print sluiced's JSON answer as it came (top: one line per refresh)")->group(group);
  app.add_flag("--version", g.common.version, "the version and the control protocol's, and exit")->group(group);
  // Hidden (no group): what the build runs to write the man page.
  app.add_flag("--manual-markdown", g.common.manual, "")->group("");
  bound.resize(std::size(kCommands));
  for (size_t i = 0; i < std::size(kCommands); ++i) describe_command(app, kCommands[i], bound[i]);
  app.footer(kExitCodes);  // after the commands: the program's help alone ends with it
}

// The deepest command chosen ("run", or "run start"); null when none.
const CLI::App* chosen(const CLI::App& app) {
  const CLI::App* at = nullptr;
  for (const CLI::App* a = &app; !a->get_subcommands().empty(); a = a->get_subcommands().front()) {
    at = a->get_subcommands().front();
  }
  return at;
}

// "status, stats, top, ...": the commands (or the group's) first words.
std::string names_under(const CLI::App& app) {
  std::string out;
  for (const CLI::App* s : app.get_subcommands([](const CLI::App*) { return true; })) {
    out += (out.empty() ? "" : ", ") + s->get_name();
  }
  return out;
}

bool is_group(const CLI::App& app) { return !app.get_subcommands([](const CLI::App*) { return true; }).empty(); }

// "'run start' takes TOKEN [--budget N]".
std::string takes(const CLI::App& command) {
  const std::string args = cli_text::command_arguments(command);
  return "'" + cli_text::command_words(command) + "' takes " + (args.empty() ? "no arguments" : args);
}

// Words or options the chosen command (or group, or none) does not take.
std::string unexpected(const CLI::App* at, std::string first) {
  const bool option = first.rfind('-', 0) == 0 && first.size() > 1;
  if (option) first = first.substr(0, first.find('='));
  if (at == nullptr) return option ? "unknown option '" + first + "'" : "unknown command '" + first + "'";
  const std::string words = cli_text::command_words(*at);
  if (is_group(*at)) {
    return option ? "unknown option '" + first + "'"
                  : "unknown " + words + " command '" + first + "' (" + names_under(*at) + ")";
  }
  if (option) return "'" + words + "' has no option " + first;
  return takes(*at) + ", got '" + first + "'";
}

// CLI11's complaint as the project's one line. A value's mistake reads
// "--budget wants ..., got 'lots'" (CLI11 puts a colon after the name; the
// checks are written to follow the name directly).
std::string one_line(const CLI::App& app, const CLI::ParseError& e) {
  const CLI::App* at = chosen(app);
  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
    const std::vector<std::string> rest = app.remaining();
    return unexpected(at, rest.empty() ? std::string() : rest.front());
  }
  std::string m = e.what();
  const size_t colon = m.find(": ");
  if (dynamic_cast<const CLI::ValidationError*>(&e) != nullptr && colon != std::string::npos) m.erase(colon, 1);
  // "--budget: 1 required N missing"
  const bool option = m.rfind("--", 0) == 0 && colon != std::string::npos;
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr && option) m = m.substr(0, colon) + " needs a value";
  if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr && at != nullptr && !is_group(*at)) {
    m = takes(*at);
  }
  for (char& c : m) c = c == '\n' ? ' ' : c;
  return m;
}

// The command chosen, with what it was given; or what is missing.
void take_command(const CLI::App& app, const std::vector<Bound>& bound, CommandLine& line) {
  const CLI::App* at = chosen(app);
  if (at == nullptr) {
    line.mode = CommandLine::Mode::kUsageError;
    line.text = "which command? (" + names_under(app) + ")";
    return;
  }
  if (is_group(*at)) {
    line.mode = CommandLine::Mode::kUsageError;
    line.text = at->get_name() + " what? (" + names_under(*at) + ")";
    return;
  }
  for (size_t i = 0; i < bound.size(); ++i) {
    if (bound[i].app != at) continue;
    const Command& c = kCommands[i];
    line.command = &c;
    for (size_t k = 0; k < c.positionals.size(); ++k) {
      if (at->count(std::string(c.positionals[k].name)) > 0) line.args.positional.push_back(bound[i].positionals[k]);
    }
    for (size_t k = 0; k < c.options.size(); ++k) {
      const std::string name(c.options[k].name);
      if (at->count(name) > 0) line.args.flags[name.substr(2)] = bound[i].options[k];
    }
  }
}

}  // namespace

std::span<const Command> commands() { return kCommands; }

CommandLine read_command_line(int argc, const char* const* argv, const std::string& default_socket) {
  CommandLine line;
  CLI::App app;
  Globals g;
  g.socket_path = default_socket;
  std::vector<Bound> bound;
  describe(app, g, bound);
  std::vector<std::string> args;
  for (int i = argc - 1; i >= 1; --i) args.emplace_back(argv[i]);  // CLI11 takes them reversed
  const cli_program::Parsed parsed = cli_program::parse(app, args, g.common, one_line);
  if (parsed.outcome == cli_program::Parsed::Outcome::kHelp) {
    line.mode = CommandLine::Mode::kHelp;
    line.text = app.help();
    return line;
  }
  if (parsed.outcome == cli_program::Parsed::Outcome::kError) {
    line.mode = CommandLine::Mode::kUsageError;
    line.text = parsed.error;
    return line;
  }
  line.socket_path = g.socket_path;
  line.json = g.json;
  if (cli_program::ended(parsed, line.mode, line.text)) return line;
  take_command(app, bound, line);
  return line;
}

std::string manual_text() {
  CLI::App app;
  Globals g;
  std::vector<Bound> bound;
  describe(app, g, bound);
  return cli_program::manual_markdown(app, kExitCodes);
}

}  // namespace sluice::sluicectl

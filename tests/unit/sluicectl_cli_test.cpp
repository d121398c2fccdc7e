// sluicectl's command line (src/sluicectl_commands.*) without a socket:
// every command in --help, in its own help and in the man page, each from
// the one table; the commands found with what they were given; every
// mistake one line that names it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sluicectl_commands.h"

namespace sluice::sluicectl {
namespace {

using Mode = CommandLine::Mode;

CommandLine read(std::vector<std::string> args) {
  args.insert(args.begin(), "sluicectl");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return read_command_line(static_cast<int>(argv.size()), argv.data(), "/run/default.sock");
}

std::vector<std::string> words_of(const Command& c) { return {c.words.begin(), c.words.end()}; }

std::string joined(const Command& c) {
  std::string s;
  for (std::string_view w : c.words) s += (s.empty() ? "" : " ") + std::string(w);
  return s;
}

TEST(SluicectlCli, HelpListsEveryCommandWithItsArguments) {
  const CommandLine help = read({"--help"});
  ASSERT_EQ(help.mode, Mode::kHelp);
  for (const Command& c : commands()) {
    std::string line = "\n  " + joined(c);
    for (const Argument& p : c.positionals) {
      line += " " + (p.optional ? "[" + std::string(p.name) + "]" : std::string(p.name));
    }
    for (const Argument& o : c.options) line += " [" + std::string(o.name) + " " + std::string(o.value) + "]";
    EXPECT_NE(help.text.find(line + "\n"), std::string::npos) << line;
  }
  EXPECT_NE(help.text.find("\n  run start TOKEN [--budget N]\n"), std::string::npos);
  EXPECT_NE(help.text.find("--socket PATH"), std::string::npos);
  EXPECT_NE(help.text.find("Exit codes:"), std::string::npos);
  EXPECT_EQ(help.text.find("manual-markdown"), std::string::npos);
}

TEST(SluicectlCli, EveryCommandHasItsOwnHelp) {
  for (const Command& c : commands()) {
    std::vector<std::string> args = words_of(c);
    args.push_back("--help");
    const CommandLine help = read(args);
    ASSERT_EQ(help.mode, Mode::kHelp) << joined(c);
    EXPECT_EQ(help.text.rfind("sluicectl " + joined(c), 0), 0u) << help.text;
    EXPECT_NE(help.text.find(std::string(c.help.substr(0, 20))), std::string::npos) << help.text;
    for (const Argument& o : c.options) EXPECT_NE(help.text.find(std::string(o.help.substr(0, 20))), std::string::npos);
  }
  // A group's help lists its commands.
  const CommandLine run = read({"run", "--help"});
  EXPECT_NE(run.text.find("\n  run start TOKEN [--budget N]\n"), std::string::npos) << run.text;
  EXPECT_NE(run.text.find("\n  run end TOKEN\n"), std::string::npos) << run.text;
  EXPECT_EQ(run.text.find("policy show"), std::string::npos) << run.text;
}

TEST(SluicectlCli, ManualHasEveryCommandAndTheExitStatus) {
  ASSERT_EQ(read({"--manual-markdown"}).mode, Mode::kManual);
  const std::string manual = manual_text();
  EXPECT_EQ(manual.rfind("# OPTIONS\n", 0), 0u);
  for (const char* part : {"\n# COMMANDS\n", "\n# EXIT STATUS\n", "**--socket** *PATH*", "**--budget** *N*"}) {
    EXPECT_NE(manual.find(part), std::string::npos) << part;
  }
  for (const Command& c : commands()) {
    EXPECT_NE(manual.find("**sluicectl " + joined(c)), std::string::npos) << joined(c);
  }
}

TEST(SluicectlCli, FindsTheCommandWithWhatItWasGiven) {
  const CommandLine start = read({"--json", "run", "start", "tok", "--budget", "5", "--socket=/x.sock"});
  ASSERT_EQ(start.mode, Mode::kRun) << start.text;
  ASSERT_NE(start.command, nullptr);
  EXPECT_EQ(start.command->cmd, "run.start");
  EXPECT_EQ(start.args.positional, (std::vector<std::string>{"tok"}));
  EXPECT_EQ(start.args.flags.at("budget"), "5");
  EXPECT_TRUE(start.json);
  EXPECT_EQ(start.socket_path, "/x.sock");
  control::Json request = control::Json::object();
  EXPECT_EQ(start.command->build(start.args, request), "");
  EXPECT_EQ(request["token"], "tok");
  EXPECT_EQ(request["budget"], 5);

  const CommandLine status = read({"status"});
  ASSERT_EQ(status.mode, Mode::kRun);
  EXPECT_EQ(status.command->cmd, "status");
  EXPECT_FALSE(status.json);
  EXPECT_EQ(status.socket_path, "/run/default.sock");

  const CommandLine reload = read({"policy", "reload"});
  ASSERT_EQ(reload.mode, Mode::kRun);
  EXPECT_TRUE(reload.args.positional.empty());
  const CommandLine top = read({"top", "--count", "3", "--interval", "0.5"});
  ASSERT_EQ(top.mode, Mode::kRun);
  EXPECT_EQ(top.command->print, nullptr);
  EXPECT_EQ(top.args.flags.at("count"), "3");
  EXPECT_EQ(top.args.flags.at("interval"), "0.5");
  const CommandLine report = read({"usage", "report", "dep", "4294967296", "--bucket", "b"});
  ASSERT_EQ(report.mode, Mode::kRun) << report.text;
  control::Json usage = control::Json::object();
  EXPECT_EQ(report.command->build(report.args, usage), "");
  EXPECT_EQ(usage["tokens"], uint64_t{1} << 32);
  EXPECT_EQ(usage["bucket"], "b");
  EXPECT_EQ(read({"--version"}).mode, Mode::kVersion);
}

TEST(SluicectlCli, MistakesAreOneLineThatNamesThem) {
  const struct {
    std::vector<std::string> args;
    std::string message;
  } cases[] = {
      {{}, "which command? (status, stats, top, runs, run, credentials, credential, usage, bucket, penalty, policy)"},
      {{"frobnicate"}, "unknown command 'frobnicate'"},
      {{"--frob"}, "unknown option '--frob'"},
      {{"run"}, "run what? (start, end)"},
      {{"run", "frob"}, "unknown run command 'frob' (start, end)"},
      {{"run", "start"}, "'run start' takes TOKEN [--budget N]"},
      {{"run", "start", "tok", "--budget", "lots"}, "--budget wants requests per minute (1 to 1000000000), got 'lots'"},
      {{"run", "start", "tok", "--budget", "0"}, "--budget wants requests per minute (1 to 1000000000), got '0'"},
      {{"run", "start", "tok", "--budget"}, "--budget needs a value"},
      {{"run", "end", "tok", "extra"}, "'run end' takes TOKEN, got 'extra'"},
      {{"run", "end", "tok", "status"}, "'run end' takes TOKEN, got 'status'"},
      {{"runs", "--budget", "5"}, "'runs' has no option --budget"},
      {{"runs", "--budget=5"}, "'runs' has no option --budget"},
      {{"status", "x"}, "'status' takes no arguments, got 'x'"},
      {{"usage", "report", "dep", "ten"}, "TOKENS wants a whole number (0 to 4294967296), got 'ten'"},
      {{"usage", "report", "dep", "4294967297"}, "TOKENS wants a whole number (0 to 4294967296), got '4294967297'"},
      {{"bucket", "show", "onlyone"}, "'bucket show' takes BUCKET KEY"},
      {{"top", "--count", "0"}, "--count wants refreshes (1 to 1000000), got '0'"},
      {{"top", "--interval", "0.01"}, "--interval wants seconds (0.1 to 3600), got '0.01'"},
      {{"--socket"}, "--socket needs a value"},
  };
  for (const auto& c : cases) {
    const CommandLine line = read(c.args);
    EXPECT_EQ(line.mode, Mode::kUsageError) << c.message;
    EXPECT_EQ(line.text, c.message);
    EXPECT_EQ(line.text.find('\n'), std::string::npos);
    EXPECT_EQ(line.command, nullptr) << c.message;
  }
}

}  // namespace
}  // namespace sluice::sluicectl

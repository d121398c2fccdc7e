// sluiced's command line: every mistake is caught before anything starts.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sluiced_options.h"

namespace sluice::sluiced {
namespace {

ParseResult parse(std::vector<std::string> args) {
  args.insert(args.begin(), "sluiced");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return parse_options(static_cast<int>(argv.size()), argv.data());
}

TEST(SluicedOptions, AfPacketRun) {
  const ParseResult r = parse({"--config", "p.yaml", "--af-packet", "c1:o1", "--workers=2", "--service-ports", "80,8080"});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.options.mode, Options::Mode::kRun);
  EXPECT_TRUE(r.options.af_packet);
  EXPECT_EQ(r.options.client_if, "c1");
  EXPECT_EQ(r.options.origin_if, "o1");
  EXPECT_EQ(r.options.workers, 2u);
  EXPECT_EQ(*r.options.service_ports, (std::vector<uint16_t>{80, 8080}));
}

TEST(SluicedOptions, AfXdpRun) {
  const ParseResult r = parse({"--config", "p.yaml", "--af-xdp", "eth1:eth2"});
  ASSERT_EQ(r.error, "");
  EXPECT_TRUE(r.options.af_xdp);
  EXPECT_FALSE(r.options.af_packet);
  EXPECT_TRUE(r.options.kernel_interfaces());
  EXPECT_EQ(r.options.client_if, "eth1");
  EXPECT_EQ(r.options.origin_if, "eth2");
  const ParseResult ports = parse({"--config", "p.yaml", "--ports", "0:1", "--", "-l", "0-1"});
  ASSERT_EQ(ports.error, "");
  EXPECT_FALSE(ports.options.kernel_interfaces());
  EXPECT_NE(parse({"--config", "p.yaml", "--af-xdp", "a:b", "--", "-l", "0-1"}).error.find("--af-xdp sets its own"),
            std::string::npos);
}

TEST(SluicedOptions, SharesPerClientDefaultToNoneGiven) {
  const ParseResult plain = parse({"--config", "p.yaml", "--af-packet", "c1:o1"});
  EXPECT_EQ(plain.options.flows_per_client, 0u);
  EXPECT_EQ(plain.options.contexts_per_client, 0u);
  const ParseResult set =
      parse({"--config", "p.yaml", "--af-packet", "c1:o1", "--flows-per-client", "300", "--contexts-per-client=20"});
  ASSERT_EQ(set.error, "");
  EXPECT_EQ(set.options.flows_per_client, 300u);
  EXPECT_EQ(set.options.contexts_per_client, 20u);
}

TEST(SluicedOptions, PortsRunTakesEalArguments) {
  const ParseResult r = parse({"--config", "p.yaml", "--ports", "0:1", "--", "-l", "0-2", "-a", "0000:3b:00.0"});
  ASSERT_EQ(r.error, "");
  EXPECT_TRUE(r.options.ports);
  EXPECT_EQ(r.options.client_port, 0);
  EXPECT_EQ(r.options.origin_port, 1);
  EXPECT_EQ(r.options.eal_args, (std::vector<std::string>{"-l", "0-2", "-a", "0000:3b:00.0"}));
}

TEST(SluicedOptions, CheckConfigNeedsNothingElse) {
  const ParseResult r = parse({"--check-config", "p.yaml"});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.options.mode, Options::Mode::kCheckConfig);
  EXPECT_EQ(r.options.config, "p.yaml");
}

TEST(SluicedOptions, MistakesAreNamed) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--af-packet", "c1:o1"}, "--config FILE is required"},
      {{"--config", "p"}, "exactly one of"},
      {{"--config", "p", "--af-packet", "c1:o1", "--ports", "0:1"}, "exactly one of"},
      {{"--config", "p", "--af-packet", "c1"}, "CLIENT_IF:ORIGIN_IF"},
      {{"--config", "p", "--af-packet", "c1:c1"}, "must differ"},
      {{"--config", "p", "--ports", "0:x"}, "CLIENT_PORT:ORIGIN_PORT"},
      {{"--config", "p", "--af-packet", "a:b", "--workers", "0"}, "--workers wants 1 to 128"},
      {{"--config", "p", "--af-packet", "a:b", "--service-ports", "80,"}, "--service-ports"},
      {{"--config", "p", "--af-packet", "a:b", "--service-ports", "70000"}, "--service-ports"},
      {{"--config", "p", "--af-packet", "a:b", "--bogus"}, "unknown option '--bogus'"},
      {{"--config"}, "--config needs a value"},
      {{"--config", "p", "--af-packet", "a:b", "--", "-l", "0"}, "EAL arguments after -- are for --ports"},
      {{"stray"}, "unexpected argument 'stray'"},
      {{"--config", "p", "--af-packet", "a:b", "--contexts-per-client", "0"}, "--contexts-per-client wants 1 to"},
      {{"--config", "p", "--af-packet", "a:b", "--flows-per-client", "many"}, "--flows-per-client wants 1 to"},
      {{"--config", "p", "--af-packet", "a:b", "--idle-timeout", "0"}, "--idle-timeout wants seconds"},
      {{"--config", "p", "--af-packet", "a:b", "--state-dir", ""}, "--state-dir needs a directory"},
      {{"--config", "p", "--af-packet", "a:b", "--runs", "0"}, "--runs wants 1 to"},
      {{"--config", "p", "--af-packet", "a:b", "--credentials", "x"}, "--credentials wants 1 to"},
  };
  for (const auto& [args, want] : cases) {
    const ParseResult r = parse(args);
    EXPECT_NE(r.error.find(want), std::string::npos) << "got '" << r.error << "', want '" << want << "'";
  }
}

TEST(SluicedOptions, StateDirectoryAndTableSizes) {
  const ParseResult d = parse({"--config", "p", "--af-packet", "a:b"});
  EXPECT_EQ(d.options.state_dir, "/var/lib/sluice");
  const ParseResult r = parse({"--config", "p", "--af-packet", "a:b", "--state-dir", "/tmp/s", "--runs", "100",
                               "--credentials=200"});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.options.state_dir, "/tmp/s");
  EXPECT_EQ(r.options.runs, 100u);
  EXPECT_EQ(r.options.credentials, 200u);
}

TEST(SluicedOptions, AnOptionGivenTwiceIsRefused) {
  EXPECT_NE(parse({"--config", "p", "--af-packet", "a:b", "--workers", "1", "--workers", "2"}).error, "");
}

TEST(SluicedOptions, EveryOptionIsInTheHelpAndTheManualFromTheSameTable) {
  const std::string help = usage_text();
  const std::string manual = manual_text();
  for (const char* name : {"--config", "--check-config", "--af-packet", "--af-xdp", "--ports", "--service-ports",
                           "--workers", "--flows", "--contexts", "--flows-per-client", "--contexts-per-client",
                           "--buckets", "--runs", "--credentials", "--memory", "--idle-timeout", "--half-open-timeout",
                           "--idle-sleep", "--control-socket", "--control-group", "--metrics", "--state-dir",
                           "--quiet"}) {
    EXPECT_NE(help.find(name), std::string::npos) << name;
    // Markdown-escaped in the manual: "**\-\-workers**" is not how it is written; the long name is.
    EXPECT_NE(manual.find(std::string("**--") + (name + 2) + "**"), std::string::npos) << name;
    // Each option the help lists, the parser takes.
    EXPECT_EQ(parse({"--config", "p", "--af-packet", "a:b", name}).error.find("unknown option"), std::string::npos)
        << name;
  }
  EXPECT_EQ(help.find("--manual-markdown"), std::string::npos) << "the build's own flag stays out of --help";
  EXPECT_NE(manual.find("# EXIT STATUS"), std::string::npos);
}

TEST(SluicedOptions, HelpAndVersionWin) {
  EXPECT_EQ(parse({"--config", "p", "--help"}).options.mode, Options::Mode::kHelp);
  EXPECT_EQ(parse({"--version"}).options.mode, Options::Mode::kVersion);
  EXPECT_NE(std::string(usage_text()).find("Exit codes"), std::string::npos);
}

}  // namespace
}  // namespace sluice::sluiced

// sluiced's command line on CLI11: one table (describe()) that both parses
// and writes the help and the man page's OPTIONS, so they cannot drift.
// Every value is checked as text by the project's own validators before
// CLI11 converts it, so a mistake is one line naming the option, the range
// and what was given.
#include "sluiced_options.h"

#include <charconv>
#include <string_view>

#include "cli_program.h"
#include "cli_text.h"

namespace sluice::sluiced {
namespace {

template <typename T>
bool parse_number(std::string_view s, T& out, T min, T max) {
  T v{};
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size() || v < min || v > max) return false;
  out = v;
  return true;
}

bool split_pair(std::string_view s, std::string& a, std::string& b) {
  const size_t colon = s.find(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == s.size()) return false;
  if (s.find(':', colon + 1) != std::string_view::npos) return false;
  a = s.substr(0, colon);
  b = s.substr(colon + 1);
  return true;
}

// A whole number in [min, max]; `wants` says so in the option's own terms.
using cli_program::whole_number;

CLI::Validator non_empty(std::string wants) {
  return CLI::Validator([=](std::string& s) { return s.empty() ? wants : std::string{}; }, "");
}

CLI::Validator interface_pair() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        std::string a, b;
        if (!split_pair(s, a, b)) return "wants CLIENT_IF:ORIGIN_IF, got '" + s + "'";
        if (a == b) return "the client and origin interfaces must differ";
        return {};
      },
      "");
}

CLI::Validator port_pair() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        std::string a, b;
        uint16_t x = 0, y = 0;
        if (!split_pair(s, a, b) || !parse_number<uint16_t>(a, x, 0, 1023) || !parse_number<uint16_t>(b, y, 0, 1023)) {
          return "wants CLIENT_PORT:ORIGIN_PORT (DPDK port ids), got '" + s + "'";
        }
        if (x == y) return "the client and origin ports must differ";
        return {};
      },
      "");
}

CLI::Validator port_list() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        return cli_program::parse_port_list(s) ? std::string{} : "wants a list like 80,8080, got '" + s + "'";
      },
      "");
}

constexpr const char* kDescription = R"(sluiced: the sluice rate-limit appliance, inline between HTTP/1.1 clients and origins.

Usage:
  sluiced --config FILE --af-packet CLIENT_IF:ORIGIN_IF [options]
      Runs on two Linux interfaces through DPDK's AF_PACKET driver: no huge
      pages, no NIC binding (how CI and the demo run; needs root).
  sluiced --config FILE --af-xdp CLIENT_IF:ORIGIN_IF [options]
      The same through DPDK's AF_XDP driver: frames bypass the kernel's stack
      (an XDP program hands each to sluiced), for NICs that stay with the
      kernel. Each interface needs --workers queues (ethtool -L IF combined
      N), from queue 0; a veth has one, so one worker. Needs root.
  sluiced --config FILE --ports CLIENT_PORT:ORIGIN_PORT [options] -- EAL_ARGS
      Runs on two DPDK ports (NICs bound to vfio-pci), symmetric RSS so both
      directions of a TCP flow reach one worker. EAL_ARGS are DPDK's own
      (cores, memory, allow-list), e.g. -l 0-4 -a 0000:3b:00.0 -a 0000:3b:00.1
  sluiced --check-config FILE [--connect]
      Loads and compiles a policy, prints its summary or every error as
      file:line:column, and exits. With --connect, also connects to the
      cluster's Redis as sluiced would (AUTH included) and says how it went.)";

constexpr const char* kExitCodes = R"(Exit codes:
  0 stopped cleanly (SIGINT or SIGTERM)   1 failed while running   2 bad command line
  3 invalid policy   4 interface or port missing or unusable   5 out of memory
  6 the DPDK environment would not start   7 the control socket cannot be created
  8 the state directory cannot be used (created, read, or its journal replayed)
  9 the cluster's Redis refused the credentials (or, with --check-config
    --connect, could not be reached))";

// What the options set before they are interpreted (mode, pairs).
struct Given {
  std::string check_config, af_packet, af_xdp, ports, service_ports;
  std::string log_level, log_target, refusal_log;
  unsigned idle_sleep_us = 0;
  cli_program::Common common;  // --version, --manual-markdown
};

void describe_what_to_run(CLI::App& app, Options& o, Given& g) {
  const char* group = "What to run";
  app.add_option("--config", o.config, "the policy file")->type_name("FILE")->group(group);
  app.add_option("--check-config", g.check_config, "load and compile FILE, print its summary or its errors, exit")
      ->type_name("FILE")->group(group);
  app.add_flag("--connect", o.connect,
               "with --check-config: also connect to the cluster's Redis (AUTH included) and say how it went")
      ->group(group);
  app.add_option("--af-packet", g.af_packet, "run on two Linux interfaces through DPDK's AF_PACKET driver")
      ->type_name("CLIENT_IF:ORIGIN_IF")->check(interface_pair())->group(group);
  app.add_option("--af-xdp", g.af_xdp, "run on two Linux interfaces through DPDK's AF_XDP driver")
      ->type_name("CLIENT_IF:ORIGIN_IF")->check(interface_pair())->group(group);
  app.add_option("--ports", g.ports, "run on two DPDK ports; DPDK's own arguments follow --")
      ->type_name("CLIENT_PORT:ORIGIN_PORT")->check(port_pair())->group(group);
  app.add_option("--service-ports", g.service_ports, "TCP ports whose HTTP is parsed, e.g. 80,8080 (default: the policy's)")
      ->type_name("LIST")->check(port_list())->group(group);
}

void describe_capacity(CLI::App& app, Options& o) {
  const char* group = "Capacity";
  app.add_option("--workers", o.workers, "worker lcores (default 1); each polls queue i of both ports")
      ->type_name("N")->check(whole_number<unsigned>(1, 128, "wants 1 to 128"))->group(group);
  app.add_option("--flows", o.flows,
                 "TCP flows tracked per worker (default 65536); past it a flow that is over, a stale handshake or an "
                 "idle connection makes room, else new ones wait")
      ->type_name("N")->check(whole_number<size_t>(16, size_t{1} << 26, "wants 16 to 67108864"))->group(group);
  app.add_option("--contexts", o.contexts, "requests in flight per worker (default 2048); a parse context each")
      ->type_name("N")->check(whole_number<size_t>(1, size_t{1} << 20, "wants 1 to 1048576"))->group(group);
  app.add_option("--delay-slots", o.delay_slots,
                 "requests one worker may hold at once for their rule's delay (policy delay_max; default a quarter "
                 "of --contexts, at most 256); past it such requests are refused as without delay")
      ->type_name("N")->check(whole_number<size_t>(1, size_t{1} << 20, "wants 1 to 1048576"))->group(group);
  app.add_option("--flows-per-client", o.flows_per_client,
                 "flows one client address (IPv6: its /64) may hold per worker (default a sixteenth of --flows); past "
                 "it its SYNs are dropped")
      ->type_name("N")->check(whole_number<uint32_t>(1, uint32_t{1} << 26, "wants 1 to 67108864"))->group(group);
  app.add_option("--contexts-per-client", o.contexts_per_client,
                 "parse contexts one client address may hold per worker (default a sixteenth of --contexts); past it "
                 "its segments wait")
      ->type_name("N")->check(whole_number<uint32_t>(1, uint32_t{1} << 20, "wants 1 to 1048576"))->group(group);
  app.add_option("--buckets", o.buckets, "rate-limit buckets, all workers together (default 1048576)")
      ->type_name("N")->check(whole_number<size_t>(1024, size_t{1} << 30, "wants 1024 to 1073741824"))->group(group);
  app.add_option("--runs", o.runs, "live runs at once (default 65536)")
      ->type_name("N")->check(whole_number<size_t>(1, size_t{1} << 24, "wants 1 to 16777216"))->group(group);
  app.add_option("--credentials", o.credentials, "credentials in the credential-to-user map (default 65536)")
      ->type_name("N")->check(whole_number<size_t>(1, size_t{1} << 24, "wants 1 to 16777216"))->group(group);
  app.add_option("--memory", o.memory_mb, "DPDK memory in megabytes with --af-packet or --af-xdp (default 1024)")
      ->type_name("MB")->check(whole_number<unsigned>(64, 1 << 20, "wants megabytes (at least 64)"))->group(group);
}

void describe_timers(CLI::App& app, Options& o, Given& g) {
  const char* group = "Timers";
  app.add_option("--idle-timeout", o.idle_timeout_s,
                 "forget an established flow after S seconds without a segment (default 600); its next request "
                 "resets it, so keep this above the origins' keep-alive timeout")
      ->type_name("S")->check(whole_number<unsigned>(1, 86400, "wants seconds (1 to 86400)"))->group(group);
  app.add_option("--half-open-timeout", o.half_open_timeout_s,
                 "forget a flow whose handshake did not finish within S seconds (default 10)")
      ->type_name("S")->check(whole_number<unsigned>(1, 3600, "wants seconds (1 to 3600)"))->group(group);
  app.add_option("--idle-sleep", g.idle_sleep_us,
                 "sleep after a long run of empty polls (default 20 with --af-packet or --af-xdp, 0 with --ports)")
      ->type_name("US")->check(whole_number<unsigned>(0, 1000000, "wants microseconds (0 to 1000000)"))->group(group);
}

void describe_operation(CLI::App& app, Options& o) {
  const char* group = "Operation";
  app.add_option("--control-socket", o.control_socket,
                 "control socket for sluicectl (default /run/sluice/control.sock), 0660")
      ->type_name("PATH")->check(non_empty("needs a path"))->group(group);
  app.add_option("--control-group", o.control_group,
                 "a group whose members (primary or supplementary) may use it besides root (default: root only). "
                 "Each user holds at most 8 connections; a request must arrive within 5 s, its reply be read within "
                 "5 s; idle ones close after 60 s")
      ->type_name("NAME")->check(non_empty("needs a group name"))->group(group);
  app.add_option("--metrics", o.metrics, "Prometheus text exposition at http://ADDR:PORT/metrics (a kernel socket)")
      ->type_name("ADDR:PORT")->check(non_empty("needs ADDR:PORT"))->group(group);
  app.add_option("--state-dir", o.state_dir,
                 "what survives a restart: the live-run journal, the credential map and the secret credential hashes "
                 "are keyed with, the bucket and credential-slot tables (mapped, re-attached at start) and the bucket "
                 "snapshot (default /var/lib/sluice; made 0700; an existing one must be sluiced's user's and "
                 "0700, else exit 8)")
      ->type_name("DIR")->check(non_empty("needs a directory"))->group(group);
  app.add_option("--table-dir", o.table_dir,
                 "where the tables the workers use in place live: buckets.table, credential-slots.table and "
                 "flows.table (default: the state directory; the same rules, exit 8). On a tmpfs (the package's "
                 "unit uses /run/sluice/NAME/tables) their pages stay out of the disk's writeback, whose next "
                 "write to each page faults on the workers' path; on a hugetlbfs mount they are on huge pages "
                 "(reserve enough: vm.nr_hugepages). Either is lost at a reboot, which carries no connection "
                 "anyway: the buckets then come from the snapshot in the state directory")
      ->type_name("DIR")->check(non_empty("needs a directory"))->group(group);
  app.add_flag("-q,--quiet", o.quiet, "no start-up summary")->group(group);
}

// One of a fixed set of words (or a rate), read by `parse`.
template <typename Parse>
CLI::Validator one_of(Parse parse, std::string wants) {
  return CLI::Validator([=](std::string& s) { return parse(s) ? std::string{} : wants + ", got '" + s + "'"; }, "");
}

void describe_logs(CLI::App& app, Given& g) {
  const char* group = "Logs";
  app.add_option("--log-level", g.log_level,
                 "the least a message must weigh to be written: error, warning, notice, info or debug (default info)")
      ->type_name("LEVEL")
      ->check(one_of(control::parse_log_level, "wants error, warning, notice, info or debug"))->group(group);
  app.add_option("--log-target", g.log_target,
                 "auto (the journal, with fields, when stderr is connected to it; else stderr), stderr or journal "
                 "(default auto). Each kind of message is rate-limited; what is held back is counted in one line")
      ->type_name("TARGET")->check(one_of(control::parse_log_target, "wants auto, stderr or journal"))->group(group);
  app.add_option("--refusal-log", g.refusal_log,
                 "a sample of refusals and answers for audit, at most RATE records a second for the box (rule, "
                 "status, the key's label; never a credential's text), at level info (default off)")
      ->type_name("RATE")
      ->check(one_of(control::parse_refusal_rate, "wants off or 0 to " +
                                                      std::to_string(control::LogSettings::kMaxRefusalRate)))
      ->group(group);
}

// The whole command line, bound to `o` and `g`.
void describe(CLI::App& app, Options& o, Given& g) {
  cli_program::describe_common(app, kDescription, kExitCodes, g.common);
  describe_what_to_run(app, o, g);
  describe_capacity(app, o);
  describe_timers(app, o, g);
  describe_operation(app, o);
  describe_logs(app, g);
}

// What the options ask for together: "" or what is wrong.
std::string check_combination(const Options& o) {
  if (o.mode == Options::Mode::kCheckConfig) return {};
  if (o.connect) return "--connect goes with --check-config FILE";
  if (o.config.empty()) return "--config FILE is required";
  if (int{o.af_packet} + int{o.af_xdp} + int{o.ports} != 1) {
    return "give exactly one of --af-packet CLIENT_IF:ORIGIN_IF, --af-xdp CLIENT_IF:ORIGIN_IF or --ports A:B";
  }
  if (o.kernel_interfaces() && !o.eal_args.empty()) {
    return std::string("EAL arguments after -- are for --ports; ") + (o.af_packet ? "--af-packet" : "--af-xdp") +
           " sets its own";
  }
  return {};
}

// The pairs and the mode, from what was given.
void interpret(const CLI::App& app, const Given& g, Options& o) {
  if (app.count("--check-config") > 0) {
    o.mode = Options::Mode::kCheckConfig;
    o.config = g.check_config;
  }
  if (app.count("--af-packet") > 0) o.af_packet = split_pair(g.af_packet, o.client_if, o.origin_if);
  if (app.count("--af-xdp") > 0) o.af_xdp = split_pair(g.af_xdp, o.client_if, o.origin_if);
  if (app.count("--ports") > 0) {
    std::string a, b;
    o.ports = split_pair(g.ports, a, b) && parse_number<uint16_t>(a, o.client_port, 0, 1023) &&
              parse_number<uint16_t>(b, o.origin_port, 0, 1023);
  }
  if (app.count("--idle-sleep") > 0) o.idle_sleep_us = g.idle_sleep_us;
  if (app.count("--service-ports") > 0) o.service_ports = cli_program::parse_port_list(g.service_ports);
  if (app.count("--log-level") > 0) o.log.level = *control::parse_log_level(g.log_level);
  if (app.count("--log-target") > 0) o.log.target = *control::parse_log_target(g.log_target);
  if (app.count("--refusal-log") > 0) o.log.refusal_rate = *control::parse_refusal_rate(g.refusal_log);
}

}  // namespace

ParseResult parse_options(int argc, const char* const* argv) {
  ParseResult r;
  Options& o = r.options;
  // DPDK's own arguments after "--" never reach CLI11, which would take them
  // for positionals (sluiced has none: a stray word is an error).
  std::vector<std::string> ours;
  for (int i = argc - 1; i >= 1; --i) {
    if (std::string_view(argv[i]) == "--") {
      o.eal_args.assign(argv + i + 1, argv + argc);
      argc = i;
      break;
    }
  }
  for (int i = argc - 1; i >= 1; --i) ours.emplace_back(argv[i]);  // CLI11 takes them reversed
  CLI::App app;
  Given g;
  describe(app, o, g);
  if (cli_program::ended(cli_program::parse(app, ours, g.common), o.mode, r.error)) return r;
  interpret(app, g, o);
  r.error = check_combination(o);
  return r;
}

std::string usage_text() { return cli_program::Table<Options, Given>(describe).app.help(); }

std::string manual_text() {
  return cli_program::manual_markdown(cli_program::Table<Options, Given>(describe).app, kExitCodes);
}

}  // namespace sluice::sluiced

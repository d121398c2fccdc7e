// Hand-rolled option parsing: GNU-style long options with "--name value" or
// "--name=value", strict numbers, and every mistake named.
#include "sluiced_options.h"

#include <charconv>
#include <string_view>

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

}  // namespace

std::optional<std::vector<uint16_t>> parse_port_list(const std::string& s) {
  std::vector<uint16_t> ports;
  std::string_view rest = s;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    uint16_t p = 0;
    if (!parse_number<uint16_t>(item, p, 1, 65535)) return std::nullopt;
    ports.push_back(p);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
    if (rest.empty()) return std::nullopt;
  }
  if (ports.empty()) return std::nullopt;
  return ports;
}

namespace {

// The options that take a value; each is applied by apply_setting or
// apply_number.
constexpr std::string_view kWithValue[] = {
    "config", "check-config", "af-packet", "af-xdp", "ports", "workers", "service-ports", "control-socket",
    "control-group", "metrics", "state-dir", "runs", "credentials", "flows", "contexts", "flows-per-client", "contexts-per-client", "buckets", "memory", "idle-sleep", "idle-timeout", "half-open-timeout"};

// The numeric options (table sizes, memory, timers): "" or what is wrong
// with the value.
std::string apply_number(const std::string& name, const std::string& value, Options& o) {
  if (name == "workers") {
    if (!parse_number<unsigned>(value, o.workers, 1, 128)) return "--workers wants 1 to 128, got '" + value + "'";
  } else if (name == "runs") {
    if (!parse_number<size_t>(value, o.runs, 1, size_t{1} << 24)) return "--runs wants 1 to 16777216, got '" + value + "'";
  } else if (name == "credentials") {
    if (!parse_number<size_t>(value, o.credentials, 1, size_t{1} << 24)) return "--credentials wants 1 to 16777216, got '" + value + "'";
  } else if (name == "flows") {
    if (!parse_number<size_t>(value, o.flows, 16, size_t{1} << 26)) return "--flows wants 16 to 67108864, got '" + value + "'";
  } else if (name == "contexts") {
    if (!parse_number<size_t>(value, o.contexts, 1, size_t{1} << 20)) return "--contexts wants 1 to 1048576, got '" + value + "'";
  } else if (name == "flows-per-client") {
    if (!parse_number<uint32_t>(value, o.flows_per_client, 1, uint32_t{1} << 26)) return "--flows-per-client wants 1 to 67108864, got '" + value + "'";
  } else if (name == "contexts-per-client") {
    if (!parse_number<uint32_t>(value, o.contexts_per_client, 1, uint32_t{1} << 20)) return "--contexts-per-client wants 1 to 1048576, got '" + value + "'";
  } else if (name == "buckets") {
    if (!parse_number<size_t>(value, o.buckets, 1024, size_t{1} << 30)) return "--buckets wants 1024 to 1073741824, got '" + value + "'";
  } else if (name == "memory") {
    if (!parse_number<unsigned>(value, o.memory_mb, 64, 1 << 20)) return "--memory wants megabytes (at least 64), got '" + value + "'";
  } else if (name == "idle-timeout") {
    if (!parse_number<unsigned>(value, o.idle_timeout_s, 1, 86400)) return "--idle-timeout wants seconds (1 to 86400), got '" + value + "'";
  } else if (name == "half-open-timeout") {
    if (!parse_number<unsigned>(value, o.half_open_timeout_s, 1, 3600)) return "--half-open-timeout wants seconds (1 to 3600), got '" + value + "'";
  } else if (name == "idle-sleep") {
    unsigned us = 0;
    if (!parse_number<unsigned>(value, us, 0, 1000000)) return "--idle-sleep wants microseconds (0 to 1000000), got '" + value + "'";
    o.idle_sleep_us = us;
  }
  return {};
}

// What to run and where (the policy, the ports, the sockets, the state
// directory), else a numeric option: "" or what is wrong with the value.
std::string apply_setting(const std::string& name, const std::string& value, Options& o) {
  if (name == "config") {
    o.config = value;
  } else if (name == "check-config") {
    o.mode = Options::Mode::kCheckConfig;
    o.config = value;
  } else if (name == "af-packet" || name == "af-xdp") {
    if (!split_pair(value, o.client_if, o.origin_if)) return "--" + name + " wants CLIENT_IF:ORIGIN_IF, got '" + value + "'";
    if (o.client_if == o.origin_if) return "--" + name + ": the client and origin interfaces must differ";
    (name == "af-packet" ? o.af_packet : o.af_xdp) = true;
  } else if (name == "ports") {
    std::string a, b;
    if (!split_pair(value, a, b) || !parse_number<uint16_t>(a, o.client_port, 0, 1023) ||
        !parse_number<uint16_t>(b, o.origin_port, 0, 1023)) {
      return "--ports wants CLIENT_PORT:ORIGIN_PORT (DPDK port ids), got '" + value + "'";
    }
    if (o.client_port == o.origin_port) return "--ports: the client and origin ports must differ";
    o.ports = true;
  } else if (name == "service-ports") {
    o.service_ports = parse_port_list(value);
    if (!o.service_ports) return "--service-ports wants a list like 80,8080, got '" + value + "'";
  } else if (name == "control-socket") {
    if (value.empty()) return "--control-socket needs a path";
    o.control_socket = value;
  } else if (name == "metrics") {
    if (value.empty()) return "--metrics needs ADDR:PORT";
    o.metrics = value;
  } else if (name == "control-group") {
    if (value.empty()) return "--control-group needs a group name";
    o.control_group = value;
  } else if (name == "state-dir") {
    if (value.empty()) return "--state-dir needs a directory";
    o.state_dir = value;
  } else {
    return apply_number(name, value, o);
  }
  return {};
}

// "--name value" or "--name=value" at argv[i], applied to `o`; `i` moves
// past a separate value. "" or what is wrong.
std::string apply_option(int argc, const char* const* argv, int& i, Options& o) {
  const std::string_view arg = argv[i];
  if (arg.substr(0, 2) != "--") return "unexpected argument '" + std::string(arg) + "'";
  std::string name(arg.substr(2));
  std::string value;
  bool has_value = false;
  if (const size_t eq = name.find('='); eq != std::string::npos) {
    value = name.substr(eq + 1);
    name.resize(eq);
    has_value = true;
  }
  bool known = false;
  for (std::string_view k : kWithValue) known = known || k == name;
  if (!known) return "unknown option '--" + name + "'";
  if (!has_value) {
    if (i + 1 >= argc) return "--" + name + " needs a value";
    value = argv[++i];
  }
  return apply_setting(name, value, o);
}

// What the options ask for together: "" or what is wrong.
std::string check_combination(const Options& o) {
  if (o.mode == Options::Mode::kCheckConfig) return {};
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

}  // namespace

ParseResult parse_options(int argc, const char* const* argv) {
  ParseResult r;
  Options& o = r.options;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") {
      for (++i; i < argc; ++i) o.eal_args.emplace_back(argv[i]);
      break;
    }
    if (arg == "-h" || arg == "--help") {
      o.mode = Options::Mode::kHelp;
      return r;
    }
    if (arg == "--version") {
      o.mode = Options::Mode::kVersion;
      return r;
    }
    if (arg == "-q" || arg == "--quiet") {
      o.quiet = true;
      continue;
    }
    r.error = apply_option(argc, argv, i, o);
    if (!r.error.empty()) return r;
  }
  r.error = check_combination(o);
  return r;
}

const char* usage_text() noexcept {
  return R"(sluiced: the sluice rate-limit appliance, inline between HTTP/1.1 clients and origins.

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
  sluiced --check-config FILE
      Loads and compiles a policy, prints its summary or every error as
      file:line:column, and exits.

Options:
  --workers N            worker lcores (default 1); each polls queue i of both ports
  --service-ports LIST   TCP ports whose HTTP is parsed, e.g. 80,8080 (default: the policy's)
  --flows N              TCP flows tracked per worker (default 65536); past it a flow that is over,
                         a stale handshake or an idle connection makes room, else new ones wait
  --contexts N           requests in flight per worker (default 2048); a parse context each
  --flows-per-client N   flows one client address (IPv6: its /64) may hold per worker
                         (default a sixteenth of --flows); past it its SYNs are dropped
  --contexts-per-client N
                         parse contexts one client address may hold per worker (default a
                         sixteenth of --contexts); past it its segments wait
  --buckets N            rate-limit buckets, all workers together (default 1048576)
  --idle-timeout S       forget an established flow after S seconds without a segment (default 600);
                         its next request resets it, so keep this above the origins' keep-alive timeout
  --half-open-timeout S  forget a flow whose handshake did not finish within S seconds (default 10)
  --memory MB            DPDK memory with --af-packet or --af-xdp (default 1024)
  --idle-sleep US        sleep after a long run of empty polls (default 20 with --af-packet or
                         --af-xdp, 0 with --ports)
  --control-socket PATH  control socket for sluicectl (default /run/sluice/control.sock), 0660
  --control-group NAME   a group whose members (primary or supplementary) may use it besides root
                         (default: root only). Each user holds at most 8 connections; a request
                         must arrive within 5 s, its reply be read within 5 s; idle ones close
                         after 60 s
  --metrics ADDR:PORT    Prometheus text exposition at http://ADDR:PORT/metrics (a kernel socket)
  --state-dir DIR        what survives a restart: the live-run journal, the credential map and the
                         secret credential hashes are keyed with (default /var/lib/sluice; made
                         0700; an existing one must be sluiced's user's and 0700, else exit 8)
  --runs N               live runs at once (default 65536)
  --credentials N        credentials in the credential-to-user map (default 65536)
  -q, --quiet            no start-up summary
  --version, -h/--help

Exit codes:
  0 stopped cleanly (SIGINT or SIGTERM)   1 failed while running   2 bad command line
  3 invalid policy   4 interface or port missing or unusable   5 out of memory
  6 the DPDK environment would not start   7 the control socket cannot be created
  8 the state directory cannot be used (created, read, or its journal replayed)
)";
}

}  // namespace sluice::sluiced

// sluiced's command line: what it means, checked before anything starts, so
// a typo is a one-line message and exit code 2, never a half-started box.
#pragma once

#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "control/log.h"

namespace sluice::sluiced {

// Every way sluiced can end, each with its own code (documented in --help).
enum class ExitCode : int {
  kOk = 0,
  kRuntime = 1,     // failed while running
  kUsage = 2,       // bad command line
  kConfig = 3,      // the policy file is missing or invalid
  kInterface = 4,   // an interface or port is missing or cannot be started
  kNoMemory = 5,    // DPDK or table memory could not be had
  kEal = 6,         // the DPDK environment would not start (permissions, arguments)
  kControl = 7,     // the control socket cannot be created (path, permissions, another sluiced)
  kState = 8,       // the state directory cannot be used
  kCluster = 9,     // the cluster's Redis refused the credentials (--check-config --connect: or is unreachable)
};

struct Options {
  enum class Mode : uint8_t { kRun, kCheckConfig, kHelp, kVersion, kManual } mode = Mode::kRun;
  std::string config;        // --config, or the file of --check-config
  bool af_packet = false;    // --af-packet CLIENT_IF:ORIGIN_IF
  bool af_xdp = false;       // --af-xdp CLIENT_IF:ORIGIN_IF
  std::string client_if, origin_if;  // of --af-packet or --af-xdp
  bool ports = false;        // --ports A:B
  uint16_t client_port = 0, origin_port = 1;
  unsigned workers = 1;
  std::optional<std::vector<uint16_t>> service_ports;  // overrides the policy's
  std::string control_socket = "/run/sluice/control.sock";
  std::string control_group;  // may also use the socket (besides root)
  std::string metrics;        // ADDR:PORT for Prometheus, or empty
  std::string state_dir = "/var/lib/sluice";
  std::string table_dir;  // "": the state directory
  // Where the tables the workers use in place live (--table-dir).
  [[nodiscard]] const std::string& tables_in() const noexcept { return table_dir.empty() ? state_dir : table_dir; }
  size_t runs = 65536;         // live runs at once
  size_t credentials = 65536;  // credential-to-user entries
  size_t flows = 65536;      // per worker
  size_t contexts = 2048;    // per worker
  size_t delay_slots = 0;    // per worker; 0: a quarter of contexts, at most 256
  [[nodiscard]] size_t delay_slots_or_default() const noexcept {
    return delay_slots != 0 ? delay_slots : std::min<size_t>(256, std::max<size_t>(1, contexts / 4));
  }
  uint32_t flows_per_client = 0;     // per worker; 0: a sixteenth of flows
  uint32_t contexts_per_client = 0;  // per worker; 0: a sixteenth of contexts
  size_t buckets = size_t{1} << 20;
  unsigned memory_mb = 1024; // DPDK memory with --af-packet or --af-xdp (no huge pages)
  std::optional<unsigned> idle_sleep_us;
  unsigned idle_timeout_s = 600;       // an established flow with no segment either way
  unsigned half_open_timeout_s = 10;   // a handshake not finished
  bool quiet = false;
  bool connect = false;      // --check-config --connect: try the cluster's Redis too
  control::LogSettings log;  // --log-level, --log-target, --refusal-log
  std::vector<std::string> eal_args;  // after "--"

  // On two Linux interfaces (--af-packet or --af-xdp): sluiced makes the
  // EAL's arguments itself, and the box is usually shared.
  [[nodiscard]] bool kernel_interfaces() const noexcept { return af_packet || af_xdp; }
};

struct ParseResult {
  Options options;
  std::string error;  // empty on success
};

[[nodiscard]] ParseResult parse_options(int argc, const char* const* argv);

// --help: generated from the same table the parser uses.
[[nodiscard]] std::string usage_text();
// The man page's OPTIONS and EXIT STATUS, as pandoc markdown (sluiced
// --manual-markdown; man/meson.build runs it), from that same table.
[[nodiscard]] std::string manual_text();

}  // namespace sluice::sluiced

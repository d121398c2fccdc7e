// The appliance's counters on DPDK's telemetry socket (rte_telemetry), so the
// stock `dpdk-telemetry.py` (Debian: package dpdk-dev) and anything else that
// speaks its protocol can read them next to DPDK's own /ethdev/... commands:
//
//   /sluice/stats   every counter, summed over the workers
//   /sluice/status  what `sluicectl status` says, as strings
//   /sluice/runs    live run tokens -> their budget
//
// The socket is <runtime dir>/dpdk_telemetry.v2, the runtime dir being
// /var/run/dpdk/<--file-prefix, default "rte"> for root ($RUNTIME_DIRECTORY
// instead of /var/run when set, as under systemd's RuntimeDirectory=); a
// second process of the same prefix gets dpdk_telemetry.v2:1. DPDK 22.11
// opens it with sluiced's --no-shconf too; only --no-telemetry turns it off.
//
// DPDK's callbacks are plain function pointers with no user data, so they
// find the source through one file-static pointer: the single, deliberate
// exception to "no hidden globals" in the control plane. It is set by
// register_telemetry and cleared by unregister_telemetry; DPDK 22.11 cannot
// unregister a command, so once cleared the commands answer null.
//
// What telemetry can carry is narrower than what the source may return: a
// name keeps only [A-Za-z0-9_], anything else becomes '_' (run token
// "ci-42.eu" is listed as "ci_42_eu"), names are cut to 127 bytes and made
// unique with a "_N" suffix; in string values anything but printable ASCII
// becomes '?' (one per UTF-8 character) and they are cut to 127 bytes; a
// dict holds at most 255 entries and about 15 KiB of JSON, and when the
// source has more, a last entry "/omitted" says how many were left out.
// `sluicectl` remains the exact view.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace sluice::control {

struct TelemetrySource {
  // Each returns name -> value pairs for one command's dict. Called on DPDK's
  // telemetry threads (one per connected client), one call at a time, never
  // on a worker; an empty function answers null.
  std::function<std::vector<std::pair<std::string, uint64_t>>()> stats;      // /sluice/stats: every counter summed
  std::function<std::vector<std::pair<std::string, std::string>>()> status;  // /sluice/status
  std::function<std::vector<std::pair<std::string, uint64_t>>()> runs;       // /sluice/runs: live run tokens -> budget
};

// Registers the /sluice/... commands (once per process) and makes `source`
// what they read. Call after rte_eal_init. Returns "" or the reason it could
// not (DPDK refused a command, or a source is already registered).
[[nodiscard]] std::string register_telemetry(TelemetrySource source);

// Clears the source; from then on the commands answer null. Waits for a
// callback in progress, so call it before the state the source reads goes
// away, and never while holding a lock the source's functions take.
void unregister_telemetry() noexcept;

}  // namespace sluice::control

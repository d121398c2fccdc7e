// sluiced's Prometheus text exposition (served by control::MetricsServer on
// --metrics ADDR:PORT), in two steps: sample_metrics() reads the daemon (the
// workers' counters, the tables, the policy, the ports through DPDK) into a
// MetricsSample of plain values, and render_metrics() writes a sample out by
// the conventions: base names with labels, units in the name (seconds,
// bytes), counters ending in _total, each family's samples together after
// its HELP and TYPE. Rendering needs no EAL and no port, so the unit tests
// check the text itself (tests/unit/metrics_exposition_test.cpp).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "dataplane/worker_counters.h"

namespace sluice::sluiced {

struct DaemonView;

// A port's counts as its driver keeps them (rte_eth_stats).
struct PortCounts {
  uint64_t rx_packets = 0, tx_packets = 0, rx_bytes = 0, tx_bytes = 0;
  uint64_t rx_missed = 0, rx_errors = 0, tx_errors = 0, rx_no_mbuf = 0;
};

// A rule of the current policy and the counter slot it is counted in.
struct RuleSlot {
  std::string name;
  size_t slot = 0;
};

// A shared table's occupancy (buckets, credential slots).
struct TableSample {
  std::string name;
  uint64_t entries = 0;  // as the reclaimer last counted them
  uint64_t capacity = 0;
  uint64_t overflows = 0;
  std::optional<uint64_t> reclaimed;  // none without a reclaimer
};

// The cluster sync (control::ClusterCounters, ReplicaCounters).
struct ClusterSample {
  uint64_t syncs_ok = 0, syncs_failed = 0;
  uint64_t keys_sent = 0, keys_published = 0, fallback_keys = 0, repaid_keys = 0, keys_watched = 0;
  uint64_t keys_learned = 0, keys_reseeded = 0, round_trips = 0;
  uint64_t in_fallback = 0, fallbacks = 0;
  uint64_t sync_us_total = 0, last_sync_us = 0, last_sync_keys = 0;
  uint64_t spend_lost = 0;
  struct Replication {
    uint64_t published = 0, applied = 0, refused = 0, dropped = 0;
  };
  std::optional<Replication> replication;  // none when runs and credentials are not replicated
};

struct MetricsSample {
  std::string version;       // sluice's
  std::string dpdk_version;  // e.g. 22.11.5
  uint64_t start_time_seconds = 0;  // Unix time sluiced started, by the appliance's clock
  std::span<const dataplane::WorkerCounters> workers;
  std::vector<RuleSlot> rules;  // each counter slot once: rules past the last slot share it
  std::vector<TableSample> tables;
  uint64_t runs_live = 0;
  uint64_t credentials = 0;
  std::array<std::optional<PortCounts>, 2> ports;  // client, origin; none if the driver gave none
  std::optional<ClusterSample> cluster;
  std::string policy_name;
  uint64_t policy_generation = 0;
  uint64_t policy_reloads = 0;
  uint64_t snapshots_held = 0;
};

[[nodiscard]] MetricsSample sample_metrics(const DaemonView& daemon);
[[nodiscard]] std::string render_metrics(const MetricsSample& sample);

// Both: what the metrics thread serves.
[[nodiscard]] std::string render_metrics(const DaemonView& daemon);

}  // namespace sluice::sluiced

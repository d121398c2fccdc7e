// The commands that report on the whole daemon (status, stats), and what
// they read: a view of the parts sluiced's Appliance owns and keeps alive
// for as long as the control thread and the metrics thread serve. The
// Prometheus endpoint (sluiced_metrics.h) and the refusal log read the
// same view.
#pragma once

#include <chrono>
#include <string>

#include "control/bucket_snapshot.h"
#include "control/cluster/cluster_service.h"
#include "control/command_source.h"
#include "control/credential_registry.h"
#include "control/policy_publisher.h"
#include "control/reclaimer.h"
#include "control/run_registry.h"
#include "dataplane/ports.h"
#include "dataplane/worker_counters.h"
#include "limiter/decide.h"
#include "time/clock.h"

namespace sluice::sluiced {

// Read only: nothing that reports may change what it reports on.
struct DaemonView {
  unsigned workers = 0;
  const dataplane::WorkerCounters* counters = nullptr;  // one per worker
  const dataplane::PortInfo* ports = nullptr;           // client, origin
  std::chrono::steady_clock::time_point started;
  std::string state_dir;  // empty: nothing kept across restarts
  const control::PolicyPublisher* publisher = nullptr;
  const limiter::LimiterState* limiter = nullptr;
  const time::Clock* clock = nullptr;
  const control::RunRegistry* runs = nullptr;
  const control::CredentialRegistry* credentials = nullptr;
  const control::Reclaimer* reclaimer = nullptr;
  const control::BucketSnapshotter* bucket_snapshots = nullptr;
  const control::ClusterService* cluster = nullptr;  // none without a cluster section
};

class StatusCommands final : public control::CommandSource {
 public:
  explicit StatusCommands(const DaemonView& daemon) : daemon_(daemon) {}
  void register_commands(control::CommandTable& table) const override;

 private:
  const DaemonView& daemon_;
};

// The operator's name for what a request was counted by (an address, a
// user by name, a credential's keyed digest): what `stats` shows for the
// busiest keys and the refusal log writes.
[[nodiscard]] std::string label_text(const DaemonView& daemon, const limiter::KeyLabel& label);

// One rule's verdicts, added up over the workers (by the rule's counter slot).
struct RuleTotals {
  uint64_t admitted = 0, refused = 0, answered = 0;
};
[[nodiscard]] RuleTotals rule_totals(const DaemonView& daemon, const limiter::CompiledRule& rule);

}  // namespace sluice::sluiced

// The commands sluiced's control socket serves (sluicectl's counterpart),
// registered in a control::CommandTable. They read and change the daemon
// through the references in `Daemon`, which sluiced's Appliance owns and keeps
// alive for as long as the control thread serves.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "control/cluster/cluster_service.h"
#include "control/bucket_snapshot.h"
#include "control/command_table.h"
#include "control/credential_registry.h"
#include "control/policy_publisher.h"
#include "control/reclaimer.h"
#include "control/run_registry.h"
#include "dataplane/ports.h"
#include "dataplane/worker_counters.h"
#include "limiter/decide.h"
#include "sluiced_policy.h"
#include "time/clock.h"

namespace sluice::sluiced {

struct Daemon {
  unsigned workers = 0;
  const dataplane::WorkerCounters* counters = nullptr;  // one per worker
  const dataplane::PortInfo* ports = nullptr;           // client, origin
  std::chrono::steady_clock::time_point started;
  std::string state_dir;  // empty: nothing kept across restarts
  control::PolicyPublisher* publisher = nullptr;
  limiter::LimiterState* limiter = nullptr;
  const time::Clock* clock = nullptr;
  control::RunRegistry* runs = nullptr;
  control::CredentialRegistry* credentials = nullptr;
  const control::Reclaimer* reclaimer = nullptr;
  const control::BucketSnapshotter* bucket_snapshots = nullptr;
  control::ClusterService* cluster = nullptr;  // issue 17: none without a cluster section
  // Issue 17: a change made here (runs, credentials), for the cluster's
  // other boxes; none without a cluster section.
  std::function<void(control::ReplicaChange)> replicate;
  // Loads a policy's text with the daemon's hasher (policy.check), and
  // loads and publishes one (policy.reload): the reasons it was refused, or
  // none. `name` is what messages call it (the file the client passed).
  std::function<LoadedPolicy(const std::string& text, const std::string& name)> check_policy;
  std::function<std::vector<std::string>(const std::string& text, const std::string& name)> reload_policy;
  // Loads and publishes sluiced's own --config file (policy.reload without
  // a file, as SIGHUP does); returns the reasons, and the file's path.
  std::function<std::vector<std::string>(std::string& file)> reload_config;
};

void add_commands(control::CommandTable& table, const Daemon& daemon);

// The operator's name for what a request was counted by (an address, a
// user by name, a credential's keyed digest): what `stats` shows for the
// busiest keys and the refusal log writes.
[[nodiscard]] std::string label_text(const Daemon& daemon, const limiter::KeyLabel& label);

// One rule's verdicts, added up over the workers (by the rule's counter slot).
struct RuleTotals {
  uint64_t admitted = 0, refused = 0, answered = 0;
};
[[nodiscard]] RuleTotals rule_totals(const Daemon& daemon, const limiter::CompiledRule& rule);

}  // namespace sluice::sluiced

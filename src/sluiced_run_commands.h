// The live-run commands (runs, run.start, run.end), registered by the run
// registry's side of sluiced: they read and change the registry, and hand
// each change to the cluster for the other boxes when there is
// one.
#pragma once

#include "control/cluster/cluster_service.h"
#include "control/command_source.h"
#include "control/run_registry.h"

namespace sluice::sluiced {

class RunCommands final : public control::CommandSource {
 public:
  // `cluster` may be null: no cluster section, nothing replicated.
  RunCommands(control::RunRegistry& runs, control::ClusterService* cluster) : runs_(runs), cluster_(cluster) {}
  void register_commands(control::CommandTable& table) const override;

 private:
  control::RunRegistry& runs_;
  control::ClusterService* cluster_;
};

}  // namespace sluice::sluiced

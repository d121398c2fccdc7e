// The bucket commands (bucket.show, usage.report), registered by the
// limiter's side of sluiced: one key's bucket read without charging it,
// and the tokens a finished request used charged to its deployment's
// minute (DQ05), and to the cluster's shared window when there is one.
#pragma once

#include "control/cluster/cluster_service.h"
#include "control/command_source.h"
#include "control/policy_publisher.h"
#include "control/run_registry.h"
#include "limiter/decide.h"
#include "time/clock.h"

namespace sluice::sluiced {

class BucketCommands final : public control::CommandSource {
 public:
  struct Parts {
    const control::PolicyPublisher& publisher;  // the policy the keys are read under
    limiter::LimiterState& limiter;
    const time::Clock& clock;
    const control::RunRegistry& runs;  // a live run's own budget paces its bucket
    control::ClusterService* cluster;  // null without a cluster section
  };
  explicit BucketCommands(Parts parts) : parts_(parts) {}
  void register_commands(control::CommandTable& table) const override;

 private:
  Parts parts_;
};

}  // namespace sluice::sluiced

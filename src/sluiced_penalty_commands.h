// The penalty-box commands: penalty.list shows the keys boxed now (from the
// book the workers' boxings fill, checked against the bucket table), and
// penalty.release ends one key's box at once (its refusal pace starts
// afresh). In a cluster, a rule whose bucket the cluster shares has its
// boxes replicated: this box's boxings and releases are published, and
// other boxes' are written into this box's table and book.
#pragma once

#include <optional>
#include <string>

#include "control/cluster/cluster_replica.h"
#include "control/cluster/cluster_service.h"
#include "control/command_source.h"
#include "control/penalty_book.h"
#include "control/policy_publisher.h"
#include "limiter/decide.h"
#include "time/clock.h"

namespace sluice::sluiced {

class PenaltyCommands final : public control::CommandSource {
 public:
  struct Parts {
    const control::PolicyPublisher& publisher;  // the rules the keys are named under
    limiter::LimiterState& limiter;
    const time::Clock& clock;
    control::PenaltyBook& book;
    control::ClusterService* cluster = nullptr;  // where shared boxes are published (none: no cluster)
  };
  explicit PenaltyCommands(Parts parts) : parts_(parts) {}
  void register_commands(control::CommandTable& table) const override;

  // A boxing of this box's workers (in the book already): published if
  // its rule's box is the cluster's.
  void boxed(const limiter::CompiledPolicy& p, const control::PenaltyBook::Entry& e) const;
  // Another box's boxing or release, written here; false if it does not
  // name a shared box of the policy running here.
  [[nodiscard]] bool apply_replicated(const control::ReplicaChange& c) const;

 private:
  Parts parts_;
};

}  // namespace sluice::sluiced

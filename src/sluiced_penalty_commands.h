// The penalty-box commands: penalty.list shows the keys boxed now (from the
// book the workers' boxings fill, checked against the bucket table), and
// penalty.release ends one key's box at once (its refusal pace starts
// afresh).
#pragma once

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
  };
  explicit PenaltyCommands(Parts parts) : parts_(parts) {}
  void register_commands(control::CommandTable& table) const override;

 private:
  Parts parts_;
};

}  // namespace sluice::sluiced

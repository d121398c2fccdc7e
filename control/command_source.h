// What owns a set of control commands: a registry, the policy, the
// counters. Each owner registers its own commands in the control thread's
// CommandTable, so the daemon's wiring is a list of sources rather than one
// bag of everything every command might touch. A source must outlive the
// table it registered in: the commands call back into it.
#pragma once

#include "control/command_table.h"

namespace sluice::control {

class CommandSource {
 public:
  virtual ~CommandSource() = default;
  virtual void register_commands(CommandTable& table) const = 0;

 protected:
  CommandSource() = default;
  CommandSource(const CommandSource&) = default;
  CommandSource& operator=(const CommandSource&) = default;
};

}  // namespace sluice::control

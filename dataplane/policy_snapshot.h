// What the workers read of the policy: the compiled policy and the service
// ports it applies to. Immutable once published; the control plane swaps the
// pointer and frees the old one after an RCU grace period.
#pragma once

#include <bitset>
#include <cstdint>

#include "limiter/compiled_policy.h"

namespace sluice::dataplane {

struct PolicySnapshot {
  limiter::CompiledPolicy policy;
  std::bitset<65536> service_ports;
  uint64_t generation = 0;
};

}  // namespace sluice::dataplane

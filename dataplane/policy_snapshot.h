// What the workers read of the policy: the policy compiled for the HTTP/1
// front end (the limiter's rules, the parser's fields and limits) and the
// service ports it applies to. Immutable once published; the control plane swaps the
// pointer and frees the old one after an RCU grace period.
#pragma once

#include <bitset>
#include <cstdint>

#include "http/http1_policy.h"

namespace sluice::dataplane {

struct PolicySnapshot {
  http::Http1Policy policy;
  std::bitset<65536> service_ports;
  uint64_t generation = 0;
};

}  // namespace sluice::dataplane

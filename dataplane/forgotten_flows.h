// The connections a restarted worker did not carry on (flow_carry.h), by
// key, so that their next segment is reset rather than dropped.
//
// The SYN cookies' secret outlives the process with the flow file, so a
// data segment of a young connection the worker no longer knows (within the
// first 32 KiB after its cookie, within the cookie's two minutes) passes
// SynCookies::may_follow, and would be dropped as data that overtook its
// handshake's ACK: the client would retransmit it until it gave up. A
// connection forgotten at the restart is known not to be one still
// completing its handshake, so its segments go the way of any unknown
// connection's: reset, or adopted where the policy turns adoption on.
//
// Filled once, before the worker runs; looked up only on that rare path
// (an unknown connection's data passing may_follow): a sorted vector.
#pragma once

#include <vector>

#include "flow_key.h"

namespace sluice::dataplane {

class ForgottenFlows {
 public:
  // Before the worker runs: these keys from now on (sorted here).
  void assign(std::vector<FlowKey> keys);
  [[nodiscard]] bool contains(const FlowKey& key) const noexcept;
  [[nodiscard]] size_t size() const noexcept { return keys_.size(); }

 private:
  std::vector<FlowKey> keys_;
};

}  // namespace sluice::dataplane

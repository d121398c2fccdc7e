// See forgotten_flows.h.
#include "forgotten_flows.h"

#include <algorithm>
#include <cstring>

namespace sluice::dataplane {

namespace {

bool before(const FlowKey& a, const FlowKey& b) noexcept { return std::memcmp(&a, &b, sizeof a) < 0; }

}  // namespace

void ForgottenFlows::assign(std::vector<FlowKey> keys) {
  keys_ = std::move(keys);
  std::sort(keys_.begin(), keys_.end(), before);
}

bool ForgottenFlows::contains(const FlowKey& key) const noexcept {
  return std::binary_search(keys_.begin(), keys_.end(), key, before);
}

}  // namespace sluice::dataplane

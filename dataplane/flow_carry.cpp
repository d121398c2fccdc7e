// See flow_carry.h.
#include "flow_carry.h"

namespace sluice::dataplane {

CarryVerdict carry_verdict(const TcpFlow& f) noexcept {
  if (static_cast<uint8_t>(f.state) > static_cast<uint8_t>(FlowState::kClosed) ||
      static_cast<uint8_t>(f.bind.state) > static_cast<uint8_t>(Binding::kBinding) ||
      (f.ip_version != 4 && f.ip_version != 6) || f.client.l2_len > kMaxL2Header ||
      f.origin.l2_len > kMaxL2Header || f.client.wscale > 14 || f.client.wscale < -1) {
    return CarryVerdict::kDamaged;
  }
  if (f.state == FlowState::kRefusing || f.state == FlowState::kAnswered) return CarryVerdict::kAnswering;
  if (f.context >= 0 || f.hold >= 0) return CarryVerdict::kInFlight;
  if (f.bind.state == Binding::kBinding) return CarryVerdict::kBinding;
  return CarryVerdict::kCarries;
}

std::string_view describe(CarryVerdict v) noexcept {
  switch (v) {
    case CarryVerdict::kCarries:
      return "carried on";
    case CarryVerdict::kInFlight:
      return "a request or response in flight";
    case CarryVerdict::kBinding:
      return "binding to its origin";
    case CarryVerdict::kAnswering:
      return "being answered";
    case CarryVerdict::kDamaged:
      return "damaged";
  }
  return "?";
}

}  // namespace sluice::dataplane

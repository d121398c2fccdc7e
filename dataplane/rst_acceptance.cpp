// Client RSTs judged by RFC 5961; see rst_acceptance.h.
#include "rst_acceptance.h"

#include "syn_proxy.h"

namespace sluice::dataplane {

namespace {

// The largest window scale TCP allows (RFC 7323 2.3): what an origin the
// appliance did not handshake for may have announced.
constexpr int kMaxWindowScale = 14;

bool synchronized(FlowState s) noexcept { return s != FlowState::kSynSent && s != FlowState::kSynReceived; }

}  // namespace

uint32_t client_send_window(const TcpFlow& flow) noexcept {
  // origin.window is the field as the client reads it; the client scales it
  // by what the SYN-ACK it got announced: the SYN proxy's own scale when it
  // answered and the client scales, none when the client does not, and the
  // origin's (unknown: at most 14) when the origin answered itself.
  int scale = kMaxWindowScale;
  if (flow.proxy.active) scale = flow.client.wscale >= 0 ? SynProxy::kClientWscale : 0;
  const uint64_t w = uint64_t{flow.origin.window} << scale;
  return static_cast<uint32_t>(w > 0x3fffffff ? 0x3fffffff : w);
}

RstVerdict judge_client_rst(const TcpFlow& flow, uint32_t seq, uint32_t origin_acked) noexcept {
  const uint32_t expected = synchronized(flow.state) ? flow.client.next : flow.client.isn + 1;
  if (seq == expected) return RstVerdict::kExact;
  if (synchronized(flow.state) && seq == origin_acked && !seq_lt(expected, origin_acked)) return RstVerdict::kExact;
  // In the window: after the expected number, less than a window past it
  // (RFC 9293 3.10.7.4's test for a RST, with RCV.NXT the expected number).
  const uint32_t past = seq - expected;
  if (seq_lt(expected, seq) && past < client_send_window(flow)) return RstVerdict::kInWindow;
  return RstVerdict::kOutOfWindow;
}

}  // namespace sluice::dataplane

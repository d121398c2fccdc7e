// A client's RST judged, and challenge ACKs sent: see client_resets.h.
#include "client_resets.h"

#include "rst_acceptance.h"

namespace sluice::dataplane {

using time::Nanos;
namespace flag = tcp_flag;

FrameResult ClientResets::on_rst(TcpFlow& flow, uint8_t* frame, FrameView& v, Nanos now, PacketSink& out) noexcept {
  // After an answer the origin's socket is gone already; a closed flow's
  // ends may still need each other's last word.
  const bool answered = flow.state == FlowState::kAnswered;
  if (flow.state == FlowState::kPassThrough) {
    // Bridged, no longer judged: the origin's own stack decides (RFC 5961
    // in Linux); the appliance forgets nothing it could be wrong about.
    editor_.renumber_to_origin(flow, frame, v);
    return forward_frame(v);
  }
  if (!answered && flow.state != FlowState::kClosed) {
    const bool acked = flow.bind.state == Binding::kBound && flow.state != FlowState::kSynSent &&
                       flow.state != FlowState::kSynReceived && flow.origin.ack != 0;
    const uint32_t origin_acked = acked ? editor_.to_client_ack(flow, flow.origin.ack) : flow.client.next;
    switch (judge_client_rst(flow, v.seq, origin_acked)) {
      case RstVerdict::kExact:
        break;
      case RstVerdict::kInWindow:
        counters_.rst_challenged.add();
        challenge(flow, now, out);
        return drop_frame(v);
      case RstVerdict::kOutOfWindow:
        counters_.rst_out_of_window.add();
        return drop_frame(v);
    }
  }
  tracker_.client_seen(flow, v, now);
  if (flow.bind.state == Binding::kUnbound) {
    // The origin never heard of the connection.
    tracker_.reset(flow);
    return drop_frame(v);
  }
  if (!answered) editor_.renumber_to_origin(flow, frame, v);
  tracker_.reset(flow);
  return answered ? drop_frame(v) : forward_frame(v);
}

void ClientResets::challenge(TcpFlow& flow, Nanos now, PacketSink& out) noexcept {
  if (flow.state == FlowState::kSynSent || flow.state == FlowState::kSynReceived) return;
  if (!challenges_.take(now)) {
    counters_.challenge_acks_limited.add();
    return;
  }
  editor_.send_to_client(flow, out, flow.origin.next, flow.client.next, flag::kAck);
}

}  // namespace sluice::dataplane

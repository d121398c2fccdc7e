// Connections adopted mid-stream; see flow_adopter.h.
#include "flow_adopter.h"

#include <algorithm>
#include <cstring>
#include <string_view>

#include "bind_stash.h"
#include "http/token_chars.h"
#include "syn_proxy.h"

namespace sluice::dataplane {

namespace flag = tcp_flag;

bool FlowAdopter::begins_request(std::span<const uint8_t> payload) noexcept {
  static constexpr size_t kMaxMethod = 20;
  static constexpr std::string_view kVersion = " HTTP/1.";
  const size_t n = std::min(payload.size(), kMaxMethod + 1);
  size_t i = 0;
  while (i < n && http::is_tchar(payload[i])) ++i;
  if (i == 0 || i == n || payload[i] != ' ') return false;
  // The whole request line, in this segment: "... HTTP/1.x" and its end.
  const auto* nl = static_cast<const uint8_t*>(std::memchr(payload.data(), '\n', payload.size()));
  if (nl == nullptr) return false;
  size_t end = static_cast<size_t>(nl - payload.data());
  if (end != 0 && payload[end - 1] == '\r') --end;
  if (end < i + kVersion.size() + 2) return false;
  const std::string_view line(reinterpret_cast<const char*>(payload.data()), end);
  return line.substr(end - kVersion.size() - 1, kVersion.size()) == kVersion && line.back() >= '0' && line.back() <= '9';
}

bool FlowAdopter::allows(time::Nanos now) noexcept { return allowance_.take(now); }

void FlowAdopter::adopt(TcpFlow& flow, const uint8_t* frame, const FrameView& v, time::Nanos now) noexcept {
  flow.adoption.active = true;
  // Translated as the SYN proxy's flows are (timestamps, shift bases), so
  // that whatever the cookie made of them before the restart is undone.
  flow.proxy.active = true;
  flow.state = FlowState::kEstablished;
  flow.bind.state = Binding::kUnbound;
  flow.ip_version = v.ip_version;
  flow.client.l2_len = static_cast<uint8_t>(std::min<size_t>(v.l3_offset, kMaxL2Header));
  std::memcpy(flow.client.l2, frame, flow.client.l2_len);
  flow.origin.l2_len = reply_l2(frame, v, flow.origin.l2);
  // The client's stream from this segment on; the origin's as the client
  // acknowledges it, on the clock the client echoes.
  flow.client.isn = v.seq - 1;
  flow.client.next = v.seq;
  flow.origin.isn = v.ack - 1;
  flow.origin.next = v.ack;
  flow.origin.ack = v.seq;
  flow.timestamps = v.options.has_timestamp;
  flow.client.tsval = v.options.tsval;
  flow.proxy.cookie_tsval = v.options.tsecr;
  flow.origin.tsval = v.options.tsecr;
  // MSS: the client's segments fit the origin's, so this one's size is a
  // floor for it; the client's own is unknown (answers go at 536).
  flow.client.mss = 536;
  flow.origin.mss = static_cast<uint16_t>(std::clamp<uint32_t>(v.payload_len, 536, 1460));
  flow.adoption.window = v.window;
  // Until the origin answers: the window a cookie SYN-ACK offers, as a
  // client scaling by 7 reads it.
  flow.origin.window = rescale_window(static_cast<uint16_t>(BindStash::kWindow),
                                      static_cast<int8_t>(-SynProxy::kClientWscale));
  flow.client.progress = now;
  flow.last_seen = now;
}

void FlowAdopter::bind(TcpFlow& flow, time::Nanos now, PacketSink& out) noexcept {
  flow.bind.state = Binding::kBinding;
  flow.bind.since = now;
  flow.bind.syn_sent_at = now;
  probe(flow, out);
}

void FlowAdopter::probe(const TcpFlow& flow, PacketSink& out) noexcept {
  SegmentSpec s = SegmentEmitter::from(flow, Side::kClient);
  s.seq = flow.client.isn + 1 - kProbeDistance;
  s.ack = flow.origin.isn + 1;
  s.flags = flag::kAck;
  s.window = flow.adoption.window;
  emitter_.emit(out, Side::kOrigin, s);
}

FlowAdopter::Moved FlowAdopter::answered(TcpFlow& flow, const uint8_t* frame, const FrameView& v) noexcept {
  Moved m;
  m.origin_stream = (flow.origin.isn + 1) - v.seq;
  m.client_stream = v.ack - (flow.client.isn + 1);
  flow.origin.isn = v.seq - 1;
  flow.origin.next = v.seq;
  flow.origin.ack = v.ack;
  flow.seqadj.to_client += m.origin_stream;
  flow.seqadj.to_origin += m.client_stream;
  flow.seqadj.active = flow.seqadj.active || flow.seqadj.to_client != 0 || flow.seqadj.to_origin != 0;
  // The origin's clock continues from the last value the client echoed.
  flow.timestamps = flow.timestamps && v.options.has_timestamp;
  if (flow.timestamps) {
    flow.proxy.ts_offset = flow.proxy.cookie_tsval - v.options.tsval;
    flow.origin.tsval = v.options.tsval;
  }
  flow.origin.window = v.window;
  flow.origin.l2_len = static_cast<uint8_t>(std::min<size_t>(v.l3_offset, kMaxL2Header));
  std::memcpy(flow.origin.l2, frame, flow.origin.l2_len);
  flow.bind.state = Binding::kBound;
  return m;
}

}  // namespace sluice::dataplane

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
  flow.adopted = true;
  // Translated as the SYN proxy's flows are (timestamps, shift bases), so
  // that whatever the cookie made of them before the restart is undone.
  flow.proxied = true;
  flow.state = FlowState::kEstablished;
  flow.binding = Binding::kUnbound;
  flow.ip_version = v.ip_version;
  flow.l2_to_origin_len = static_cast<uint8_t>(std::min<size_t>(v.l3_offset, kMaxL2Header));
  std::memcpy(flow.l2_to_origin, frame, flow.l2_to_origin_len);
  flow.l2_to_client_len = reply_l2(frame, v, flow.l2_to_client);
  // The client's stream from this segment on; the origin's as the client
  // acknowledges it, on the clock the client echoes.
  flow.client_isn = v.seq - 1;
  flow.client_next = v.seq;
  flow.origin_isn = v.ack - 1;
  flow.origin_next = v.ack;
  flow.origin_ack = v.seq;
  flow.timestamps = v.options.has_timestamp;
  flow.client_tsval = v.options.tsval;
  flow.cookie_tsval = v.options.tsecr;
  flow.origin_tsval = v.options.tsecr;
  // MSS: the client's segments fit the origin's, so this one's size is a
  // floor for it; the client's own is unknown (answers go at 536).
  flow.client_mss = 536;
  flow.origin_mss = static_cast<uint16_t>(std::clamp<uint32_t>(v.payload_len, 536, 1460));
  flow.adopted_window = v.window;
  // Until the origin answers: the window a cookie SYN-ACK offers, as a
  // client scaling by 7 reads it.
  flow.origin_window = rescale_window(static_cast<uint16_t>(BindStash::kWindow),
                                      static_cast<int8_t>(-SynProxy::kClientWscale));
  flow.client_progress = now;
  flow.last_seen = now;
}

void FlowAdopter::bind(TcpFlow& flow, time::Nanos now, PacketSink& out) noexcept {
  flow.binding = Binding::kBinding;
  flow.bind_since = now;
  flow.syn_sent_at = now;
  probe(flow, out);
}

void FlowAdopter::probe(const TcpFlow& flow, PacketSink& out) noexcept {
  SegmentSpec s = SegmentEmitter::from(flow, Side::kClient);
  s.seq = flow.client_isn + 1 - kProbeDistance;
  s.ack = flow.origin_isn + 1;
  s.flags = flag::kAck;
  s.window = flow.adopted_window;
  emitter_.emit(out, Side::kOrigin, s);
}

FlowAdopter::Moved FlowAdopter::answered(TcpFlow& flow, const uint8_t* frame, const FrameView& v) noexcept {
  Moved m;
  m.origin_stream = (flow.origin_isn + 1) - v.seq;
  m.client_stream = v.ack - (flow.client_isn + 1);
  flow.origin_isn = v.seq - 1;
  flow.origin_next = v.seq;
  flow.origin_ack = v.ack;
  flow.to_client_base += m.origin_stream;
  flow.to_origin_base += m.client_stream;
  flow.stream_edited = flow.stream_edited || flow.to_client_base != 0 || flow.to_origin_base != 0;
  // The origin's clock continues from the last value the client echoed.
  flow.timestamps = flow.timestamps && v.options.has_timestamp;
  if (flow.timestamps) {
    flow.ts_offset = flow.cookie_tsval - v.options.tsval;
    flow.origin_tsval = v.options.tsval;
  }
  flow.origin_window = v.window;
  flow.l2_to_client_len = static_cast<uint8_t>(std::min<size_t>(v.l3_offset, kMaxL2Header));
  std::memcpy(flow.l2_to_client, frame, flow.l2_to_client_len);
  flow.binding = Binding::kBound;
  return m;
}

}  // namespace sluice::dataplane

// The SYN proxy's handshakes; see syn_proxy.h.
#include "syn_proxy.h"

#include <algorithm>
#include <cstring>

#include "segment_rewrite.h"

namespace sluice::dataplane {

namespace flag = tcp_flag;

SynProxy::SynProxy(std::span<const uint8_t, 32> seed, SegmentEmitter& emitter, WorkerCounters& counters) noexcept
    : cookies_(seed), emitter_(emitter), counters_(counters) {}

void SynProxy::answer_syn(const uint8_t* frame, const FrameView& v, const FlowKey& key, bool delayed_binding,
                          time::Nanos now, PacketSink& out) noexcept {
  const OriginProfile origin = profiles_.lookup(key.origin);
  TcpOptions syn = v.options;
  // Promise only what the origin has shown it does: without timestamps
  // there is nowhere to keep window scale or SACK either.
  if (!origin.timestamps) syn.has_timestamp = false;
  if (!origin.sack) syn.sack_permitted = false;
  const SynCookieOffer offer = cookies_.offer(key, v.seq, syn, kClientWscale, now);

  uint8_t l2[kMaxL2Header];
  SegmentSpec s;
  s.l2 = {l2, reply_l2(frame, v, l2)};
  s.ip_version = v.ip_version;
  s.src = key.origin;
  s.dst = key.client;
  s.sport = key.origin_port;
  s.dport = key.client_port;
  s.seq = offer.isn;
  s.ack = v.seq + 1;
  s.flags = flag::kSyn | flag::kAck;
  // With delayed binding, the window its first request needs (the origin's
  // connection opens once a request is forwarded). Otherwise none: the
  // client waits until the origin's connection exists and the appliance
  // opens it (origin_answered), instead of sending into nothing and
  // waiting out a retransmission timeout.
  s.window = delayed_binding ? static_cast<uint16_t>(BindStash::kWindow) : uint16_t{0};
  s.mss = origin.mss;
  s.wscale = offer.wscale;
  s.sack_permitted = offer.sack;
  s.timestamp = offer.timestamps;
  s.tsval = offer.tsval;
  s.tsecr = v.options.tsval;
  emitter_.emit(out, Side::kClient, s);
  counters_.syn_cookies_sent.add();
}

std::optional<SynCookieGrant> SynProxy::check_ack(const FlowKey& key, const FrameView& v, time::Nanos now) noexcept {
  std::optional<SynCookieGrant> g = cookies_.check(key, v.seq, v.ack, v.options, now);
  // Its ACK lost, the client believes itself connected with its window
  // shut, and probes it with a segment one below its next byte: the ISN
  // itself. That completes the handshake as well.
  if (!g && v.payload_len == 0) g = cookies_.check(key, v.seq + 1, v.ack, v.options, now);
  if (g) {
    counters_.syn_cookies_validated.add();
  } else {
    counters_.syn_cookies_failed.add();
  }
  return g;
}

void SynProxy::take_client_numbers(TcpFlow& flow, const SynCookieGrant& g, const uint8_t* frame,
                                   const FrameView& v) noexcept {
  flow.proxied = true;
  flow.ip_version = v.ip_version;
  flow.client_isn = g.client_isn;
  flow.cookie_isn = g.cookie_isn;
  flow.client_mss = g.client_mss;
  flow.timestamps = g.timestamps;
  flow.client_tsval = v.options.tsval;
  flow.cookie_tsval = v.options.tsecr;
  flow.origin_window = 0;
  flow.l2_to_origin_len = static_cast<uint8_t>(std::min<size_t>(v.l3_offset, kMaxL2Header));
  std::memcpy(flow.l2_to_origin, frame, flow.l2_to_origin_len);
  flow.l2_to_client_len = reply_l2(frame, v, flow.l2_to_client);
  // What the client's SYN said, as the cookie kept it (MSS rounded down to
  // the table; window scale and SACK only with timestamps): replayed.
  flow.client_wscale = g.client_wscale;
  flow.client_sack = g.sack;
}

void SynProxy::open(TcpFlow& flow, const SynCookieGrant& g, const uint8_t* frame, const FrameView& v,
                    PacketSink& out) noexcept {
  take_client_numbers(flow, g, frame, v);
  flow.state = FlowState::kSynSent;
  resend_syn(flow, out);
}

void SynProxy::resend_syn(const TcpFlow& flow, PacketSink& out) noexcept {
  SegmentSpec s = SegmentEmitter::from(flow, Side::kClient);
  s.seq = flow.client_isn;
  s.ack = 0;
  s.flags = flag::kSyn;
  s.window = 0xffff;
  s.mss = flow.client_mss;
  s.wscale = flow.client_wscale;
  s.sack_permitted = flow.client_sack;
  s.tsecr = 0;
  emitter_.emit(out, Side::kOrigin, s);
}

bool SynProxy::learn(const TcpFlow& flow, const FrameView& v) noexcept {
  OriginProfile learnt;
  learnt.mss = v.options.mss != 0 ? v.options.mss : 536;
  learnt.wscale = v.options.has_wscale ? static_cast<int8_t>(std::min<uint8_t>(v.options.wscale, 14)) : int8_t{-1};
  learnt.sack = v.options.sack_permitted;
  learnt.timestamps = v.options.has_timestamp;
  // An origin asked without an option cannot show it: only what was asked
  // for is learnt from its absence.
  const OriginProfile before = profiles_.lookup(flow.key.origin);
  if (!flow.timestamps) learnt.timestamps = before.timestamps;
  if (!flow.client_sack) learnt.sack = before.sack;
  profiles_.learn(flow.key.origin, learnt);
  if (flow.timestamps && !v.options.has_timestamp) {
    counters_.syn_proxy_mismatch.add();
    return false;
  }
  return true;
}

uint32_t SynProxy::take_origin_numbers(TcpFlow& flow, const uint8_t* frame, const FrameView& v) noexcept {
  flow.origin_isn = v.seq;
  flow.origin_next = v.seq + 1;
  flow.origin_ack = v.ack;
  flow.origin_tsval = v.options.tsval;
  flow.origin_mss = v.options.mss != 0 ? v.options.mss : 536;
  flow.l2_to_client_len = static_cast<uint8_t>(std::min<size_t>(v.l3_offset, kMaxL2Header));
  std::memcpy(flow.l2_to_client, frame, flow.l2_to_client_len);
  // Window scaling is on towards the client when the client asked (the
  // appliance always agreed, at kClientWscale), towards the origin when the
  // origin agreed too.
  const bool client_scales = flow.client_wscale >= 0;
  const bool origin_scales = client_scales && v.options.has_wscale;
  const int origin_shift = origin_scales ? std::min<uint8_t>(v.options.wscale, 14) : 0;
  flow.window_to_client_shift = static_cast<int8_t>(origin_shift - (client_scales ? kClientWscale : 0));
  flow.window_to_origin_shift =
      static_cast<int8_t>((client_scales ? flow.client_wscale : 0) - (origin_scales ? flow.client_wscale : 0));
  // The client knows the origin's stream from the cookie on: its real
  // numbers are that far from the ones the client sees.
  const uint32_t delta = flow.cookie_isn - flow.origin_isn;
  flow.to_client_base += delta;
  flow.stream_edited = flow.stream_edited || flow.to_client_base != 0;  // (an origin whose ISN is the cookie needs none)
  flow.ts_offset = flow.cookie_tsval - flow.origin_tsval;
  return delta;
}

bool SynProxy::origin_answered(TcpFlow& flow, const uint8_t* frame, const FrameView& v, time::Nanos now,
                               PacketSink& out) noexcept {
  if (!learn(flow, v)) return false;
  (void)take_origin_numbers(flow, frame, v);
  flow.state = FlowState::kEstablished;
  flow.client_next = flow.client_isn + 1;
  flow.client_progress = now;
  counters_.flows_established.add();
  counters_.syn_proxy_bound.add();

  acknowledge_again(flow, out);
  // The client's window opened: a SYN's window is never scaled, a later
  // segment's is.
  const bool client_scales = flow.client_wscale >= 0;
  SegmentSpec c = SegmentEmitter::from(flow, Side::kOrigin);
  c.seq = flow.cookie_isn + 1;
  c.ack = flow.client_isn + 1;
  c.flags = flag::kAck;
  c.window = rescale_window(v.window, static_cast<int8_t>(client_scales ? -kClientWscale : 0));
  flow.origin_window = c.window;
  emitter_.emit(out, Side::kClient, c);
  return true;
}

void SynProxy::accept(TcpFlow& flow, const SynCookieGrant& g, const uint8_t* frame, const FrameView& v,
                      time::Nanos now) noexcept {
  take_client_numbers(flow, g, frame, v);
  flow.state = FlowState::kEstablished;
  flow.binding = Binding::kUnbound;
  // The origin's stream as the appliance numbers it until the origin's own
  // numbers are known: from the cookie on, on the cookie's clock.
  flow.origin_isn = g.cookie_isn;
  flow.origin_next = g.cookie_isn + 1;
  flow.origin_ack = g.client_isn + 1;
  flow.origin_tsval = flow.cookie_tsval;
  flow.origin_mss = g.client_mss;
  flow.client_next = g.client_isn + 1;
  flow.client_progress = now;
  // The window the cookie SYN-ACK offered, as later segments scale it.
  flow.origin_window = rescale_window(static_cast<uint16_t>(BindStash::kWindow),
                                      static_cast<int8_t>(flow.client_wscale >= 0 ? -kClientWscale : 0));
  counters_.flows_established.add();
  counters_.syn_proxy_unbound.add();
}

void SynProxy::bind(TcpFlow& flow, time::Nanos now, PacketSink& out) noexcept {
  flow.binding = Binding::kBinding;
  flow.bind_since = now;
  flow.syn_sent_at = now;
  resend_syn(flow, out);
}

bool SynProxy::bound(TcpFlow& flow, const uint8_t* frame, const FrameView& v, uint32_t& delta) noexcept {
  if (!learn(flow, v)) return false;
  delta = take_origin_numbers(flow, frame, v);
  flow.binding = Binding::kBound;
  counters_.syn_proxy_bound.add();
  return true;
}

uint16_t SynProxy::window_to_origin(const TcpFlow& flow) noexcept {
  // The origin reads the field scaled by the client's shift if it agreed
  // to scaling (the window to origin then needs no rescaling).
  const bool origin_scales = flow.client_wscale > 0 && flow.window_to_origin_shift == 0;
  return static_cast<uint16_t>(0xffff >> (origin_scales ? flow.client_wscale : 0));
}

void SynProxy::acknowledge_again(const TcpFlow& flow, PacketSink& out) noexcept {
  SegmentSpec s = SegmentEmitter::from(flow, Side::kClient);
  s.seq = flow.client_isn + 1;
  s.ack = flow.origin_isn + 1;
  s.flags = flag::kAck;
  s.window = window_to_origin(flow);
  emitter_.emit(out, Side::kOrigin, s);
}

void SynProxy::reset_client(const TcpFlow& flow, PacketSink& out) noexcept {
  SegmentSpec s = SegmentEmitter::from(flow, Side::kOrigin);
  s.seq = flow.cookie_isn + 1;
  s.ack = flow.client_isn + 1;
  s.flags = flag::kRst | flag::kAck;
  s.timestamp = false;
  emitter_.emit(out, Side::kClient, s);
}

void SynProxy::reset_both(const TcpFlow& flow, const FrameView& v, PacketSink& out) noexcept {
  reset_client(flow, out);
  reset_origin(flow, v, out);
}

void SynProxy::reset_origin(const TcpFlow& flow, const FrameView& v, PacketSink& out) noexcept {
  SegmentSpec s = SegmentEmitter::from(flow, Side::kClient);
  s.seq = v.ack;
  s.flags = flag::kRst;
  s.timestamp = false;
  emitter_.emit(out, Side::kOrigin, s);
}

void SynProxy::to_origin(const TcpFlow& flow, uint8_t* frame, FrameView& v) noexcept {
  if (flow.timestamps) shift_timestamps(frame, v, 0, 0u - flow.ts_offset);
  if (flow.window_to_origin_shift != 0) rewrite_window(frame, v, rescale_window(v.window, flow.window_to_origin_shift));
}

void SynProxy::to_client(const TcpFlow& flow, uint8_t* frame, FrameView& v) noexcept {
  if (flow.timestamps) shift_timestamps(frame, v, flow.ts_offset, 0);
  if (flow.window_to_client_shift != 0) rewrite_window(frame, v, rescale_window(v.window, flow.window_to_client_shift));
}

}  // namespace sluice::dataplane

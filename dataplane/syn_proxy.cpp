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
  flow.proxy.active = true;
  flow.ip_version = v.ip_version;
  flow.client.isn = g.client_isn;
  flow.proxy.cookie_isn = g.cookie_isn;
  flow.client.mss = g.client_mss;
  flow.timestamps = g.timestamps;
  flow.client.tsval = v.options.tsval;
  flow.proxy.cookie_tsval = v.options.tsecr;
  flow.origin.window = 0;
  flow.client.l2_len = static_cast<uint8_t>(std::min<size_t>(v.l3_offset, kMaxL2Header));
  std::memcpy(flow.client.l2, frame, flow.client.l2_len);
  flow.origin.l2_len = reply_l2(frame, v, flow.origin.l2);
  // What the client's SYN said, as the cookie kept it (MSS rounded down to
  // the table; window scale and SACK only with timestamps): replayed.
  flow.client.wscale = g.client_wscale;
  flow.client.sack = g.sack;
}

void SynProxy::open(TcpFlow& flow, const SynCookieGrant& g, const uint8_t* frame, const FrameView& v,
                    PacketSink& out) noexcept {
  take_client_numbers(flow, g, frame, v);
  flow.state = FlowState::kSynSent;
  resend_syn(flow, out);
}

void SynProxy::resend_syn(const TcpFlow& flow, PacketSink& out) noexcept {
  SegmentSpec s = SegmentEmitter::from(flow, Side::kClient);
  s.seq = flow.client.isn;
  s.ack = 0;
  s.flags = flag::kSyn;
  s.window = 0xffff;
  s.mss = flow.client.mss;
  s.wscale = flow.client.wscale;
  s.sack_permitted = flow.client.sack;
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
  if (!flow.client.sack) learnt.sack = before.sack;
  profiles_.learn(flow.key.origin, learnt);
  if (flow.timestamps && !v.options.has_timestamp) {
    counters_.syn_proxy_mismatch.add();
    return false;
  }
  return true;
}

uint32_t SynProxy::take_origin_numbers(TcpFlow& flow, const uint8_t* frame, const FrameView& v) noexcept {
  flow.origin.isn = v.seq;
  flow.origin.next = v.seq + 1;
  flow.origin.ack = v.ack;
  flow.origin.tsval = v.options.tsval;
  flow.origin.mss = v.options.mss != 0 ? v.options.mss : 536;
  flow.origin.l2_len = static_cast<uint8_t>(std::min<size_t>(v.l3_offset, kMaxL2Header));
  std::memcpy(flow.origin.l2, frame, flow.origin.l2_len);
  // Window scaling is on towards the client when the client asked (the
  // appliance always agreed, at kClientWscale), towards the origin when the
  // origin agreed too.
  const bool client_scales = flow.client.wscale >= 0;
  const bool origin_scales = client_scales && v.options.has_wscale;
  const int origin_shift = origin_scales ? std::min<uint8_t>(v.options.wscale, 14) : 0;
  flow.proxy.window_to_client_shift = static_cast<int8_t>(origin_shift - (client_scales ? kClientWscale : 0));
  flow.proxy.window_to_origin_shift =
      static_cast<int8_t>((client_scales ? flow.client.wscale : 0) - (origin_scales ? flow.client.wscale : 0));
  // The client knows the origin's stream from the cookie on: its real
  // numbers are that far from the ones the client sees.
  const uint32_t delta = flow.proxy.cookie_isn - flow.origin.isn;
  flow.seqadj.to_client += delta;
  flow.seqadj.active = flow.seqadj.active || flow.seqadj.to_client != 0;  // (an origin whose ISN is the cookie needs none)
  flow.proxy.ts_offset = flow.proxy.cookie_tsval - flow.origin.tsval;
  return delta;
}

bool SynProxy::origin_answered(TcpFlow& flow, const uint8_t* frame, const FrameView& v, time::Nanos now,
                               PacketSink& out) noexcept {
  if (!learn(flow, v)) return false;
  (void)take_origin_numbers(flow, frame, v);
  flow.state = FlowState::kEstablished;
  flow.client.next = flow.client.isn + 1;
  flow.client.progress = now;
  counters_.flows_established.add();
  counters_.syn_proxy_bound.add();

  acknowledge_again(flow, out);
  // The client's window opened: a SYN's window is never scaled, a later
  // segment's is.
  const bool client_scales = flow.client.wscale >= 0;
  SegmentSpec c = SegmentEmitter::from(flow, Side::kOrigin);
  c.seq = flow.proxy.cookie_isn + 1;
  c.ack = flow.client.isn + 1;
  c.flags = flag::kAck;
  c.window = rescale_window(v.window, static_cast<int8_t>(client_scales ? -kClientWscale : 0));
  flow.origin.window = c.window;
  emitter_.emit(out, Side::kClient, c);
  return true;
}

void SynProxy::accept(TcpFlow& flow, const SynCookieGrant& g, const uint8_t* frame, const FrameView& v,
                      time::Nanos now) noexcept {
  take_client_numbers(flow, g, frame, v);
  flow.state = FlowState::kEstablished;
  flow.bind.state = Binding::kUnbound;
  // The origin's stream as the appliance numbers it until the origin's own
  // numbers are known: from the cookie on, on the cookie's clock.
  flow.origin.isn = g.cookie_isn;
  flow.origin.next = g.cookie_isn + 1;
  flow.origin.ack = g.client_isn + 1;
  flow.origin.tsval = flow.proxy.cookie_tsval;
  flow.origin.mss = g.client_mss;
  flow.client.next = g.client_isn + 1;
  flow.client.progress = now;
  // The window the cookie SYN-ACK offered, as later segments scale it.
  flow.origin.window = rescale_window(static_cast<uint16_t>(BindStash::kWindow),
                                      static_cast<int8_t>(flow.client.wscale >= 0 ? -kClientWscale : 0));
  counters_.flows_established.add();
  counters_.syn_proxy_unbound.add();
}

void SynProxy::bind(TcpFlow& flow, time::Nanos now, PacketSink& out) noexcept {
  flow.bind.state = Binding::kBinding;
  flow.bind.since = now;
  flow.bind.syn_sent_at = now;
  resend_syn(flow, out);
}

bool SynProxy::bound(TcpFlow& flow, const uint8_t* frame, const FrameView& v, uint32_t& delta) noexcept {
  if (!learn(flow, v)) return false;
  delta = take_origin_numbers(flow, frame, v);
  flow.bind.state = Binding::kBound;
  counters_.syn_proxy_bound.add();
  return true;
}

uint16_t SynProxy::window_to_origin(const TcpFlow& flow) noexcept {
  // The origin reads the field scaled by the client's shift if it agreed
  // to scaling (the window to origin then needs no rescaling).
  const bool origin_scales = flow.client.wscale > 0 && flow.proxy.window_to_origin_shift == 0;
  return static_cast<uint16_t>(0xffff >> (origin_scales ? flow.client.wscale : 0));
}

void SynProxy::acknowledge_again(const TcpFlow& flow, PacketSink& out) noexcept {
  SegmentSpec s = SegmentEmitter::from(flow, Side::kClient);
  s.seq = flow.client.isn + 1;
  s.ack = flow.origin.isn + 1;
  s.flags = flag::kAck;
  s.window = window_to_origin(flow);
  emitter_.emit(out, Side::kOrigin, s);
}

void SynProxy::reset_client(const TcpFlow& flow, PacketSink& out) noexcept {
  SegmentSpec s = SegmentEmitter::from(flow, Side::kOrigin);
  s.seq = flow.proxy.cookie_isn + 1;
  s.ack = flow.client.isn + 1;
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
  if (flow.timestamps) shift_timestamps(frame, v, 0, 0u - flow.proxy.ts_offset);
  if (flow.proxy.window_to_origin_shift != 0) rewrite_window(frame, v, rescale_window(v.window, flow.proxy.window_to_origin_shift));
}

void SynProxy::to_client(const TcpFlow& flow, uint8_t* frame, FrameView& v) noexcept {
  if (flow.timestamps) shift_timestamps(frame, v, flow.proxy.ts_offset, 0);
  if (flow.proxy.window_to_client_shift != 0) rewrite_window(frame, v, rescale_window(v.window, flow.proxy.window_to_client_shift));
}

}  // namespace sluice::dataplane

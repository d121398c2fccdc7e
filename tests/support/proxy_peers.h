// A client and an origin on either side of the SYN proxy, each with the
// TCP options, initial numbers and clock it chose, written segment by
// segment with every option (the flow harness's handshake makes the two
// ends' numbers agree; these do not). For the SYN proxy's and delayed
// binding's tests.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <string_view>
#include <vector>

#include "flow_harness.h"

namespace sluice::test {

using dataplane::FrameAction;
using dataplane::FrameView;
using dataplane::SegmentSpec;
using dataplane::Side;

// One client and the origin, each with the options it chose, fed to the
// engine segment by segment.
struct Peers {
  explicit Peers(EngineWorld& world, uint16_t port = 40000) : w(world) {
    client = *net::parse_ip("198.18.0.10");
    origin = *net::parse_ip("198.18.0.20");
    client_port = port;
  }

  struct Sent {
    FrameAction action;
    FrameView view;
    size_t before;
  };

  Sent feed(dataplane::Side from, dataplane::SegmentSpec s) {
    const bool c = from == Side::kClient;
    const uint8_t cmac[6] = {0x02, 0, 0, 0, 0, 0x10}, omac[6] = {0x02, 0, 0, 0, 0, 0x20};
    uint8_t l2[14];
    std::memcpy(l2, c ? omac : cmac, 6);
    std::memcpy(l2 + 6, c ? cmac : omac, 6);
    l2[12] = 0x08;
    l2[13] = 0x00;
    s.l2 = {l2, sizeof l2};
    s.ip_version = 4;
    s.src = c ? client : origin;
    s.dst = c ? origin : client;
    s.sport = c ? client_port : 80;
    s.dport = c ? 80 : client_port;
    std::vector<uint8_t> frame(dataplane::segment_size(s) + 256);
    const size_t len = dataplane::write_segment(frame, s);
    EXPECT_NE(len, 0u);
    Sent out{FrameAction::kDrop, dataplane::parse_frame({frame.data(), len}), w.sink.sent.size()};
    dataplane::ServiceFrame sf;
    EXPECT_TRUE(dataplane::service_frame(out.view, from, w.snapshot->service_ports, sf));
    const dataplane::FrameResult r = w.engine->on_frame(sf, frame.data(), out.view, *w.snapshot, w.now, w.sink);
    if (r.answer_after != nullptr) w.engine->send_answer(*r.answer_after, w.sink);
    out.action = r.action;
    frame.resize(r.frame_len);
    last_frame = frame;
    out.view = dataplane::parse_frame(last_frame);
    return out;
  }

  SegmentSpec syn() const {
    SegmentSpec s;
    s.seq = client_isn;
    s.flags = dataplane::tcp_flag::kSyn;
    s.window = 64240;
    s.mss = 1460;
    s.sack_permitted = client_sack;
    s.wscale = client_wscale;
    s.timestamp = client_ts;
    s.tsval = client_clock;
    return s;
  }

  // The client's side of the handshake: SYN, then the ACK of the engine's
  // SYN-ACK (read from what the engine sent).
  // With delayed binding (`bound_later`) the ACK sends nothing to the
  // origin; otherwise it sends the origin's SYN, kept in origin_syn.
  void client_handshake(bool bound_later = false) {
    const Sent sent = feed(Side::kClient, syn());
    ASSERT_EQ(sent.action, FrameAction::kDrop);
    const auto back = sent_to(w, Side::kClient, sent.before);
    ASSERT_EQ(back.size(), 1u);
    synack = back[0].view;
    cookie = synack.seq;
    // A SYN-ACK without timestamps turns them off for the connection (RFC
    // 7323 3.2): the client sends none from here.
    if (!synack.options.has_timestamp) client_ts = false;
    SegmentSpec ack;
    ack.seq = client_isn + 1;
    ack.ack = cookie + 1;
    ack.flags = dataplane::tcp_flag::kAck;
    ack.window = 502;
    ack.timestamp = client_ts;
    ack.tsval = ++client_clock;
    ack.tsecr = synack.options.tsval;
    const Sent acked = feed(Side::kClient, ack);
    ASSERT_EQ(acked.action, FrameAction::kDrop);
    const auto to_origin = sent_to(w, Side::kOrigin, acked.before);
    if (bound_later) {
      ASSERT_TRUE(to_origin.empty());
      return;
    }
    ASSERT_EQ(to_origin.size(), 1u);
    origin_syn = to_origin[0].view;
  }

  // The origin's SYN-ACK to the engine's SYN.
  Sent origin_answer() {
    SegmentSpec s;
    s.seq = origin_isn;
    s.ack = client_isn + 1;
    s.flags = dataplane::tcp_flag::kSyn | dataplane::tcp_flag::kAck;
    s.window = 65160;
    s.mss = 1460;
    s.sack_permitted = origin_sack && origin_syn.options.sack_permitted;
    s.wscale = origin_syn.options.has_wscale ? origin_wscale : int8_t{-1};
    s.timestamp = origin_ts && origin_syn.options.has_timestamp;
    s.tsval = origin_clock;
    s.tsecr = origin_syn.options.tsval;
    return feed(Side::kOrigin, s);
  }

  Sent client_data(std::string_view payload, uint32_t at_offset = 0) {
    SegmentSpec s;
    s.seq = client_isn + 1 + at_offset;
    s.ack = cookie + 1 + origin_sent;
    s.flags = dataplane::tcp_flag::kAck | dataplane::tcp_flag::kPsh;
    s.window = 502;
    s.timestamp = client_ts;
    s.tsval = ++client_clock;
    s.tsecr = seen_tsval;
    s.payload = {reinterpret_cast<const uint8_t*>(payload.data()), payload.size()};
    return feed(Side::kClient, s);
  }

  Sent origin_data(std::string_view payload) {
    SegmentSpec s;
    s.seq = origin_isn + 1 + origin_sent;
    s.ack = client_isn + 1 + client_sent;
    s.flags = dataplane::tcp_flag::kAck | dataplane::tcp_flag::kPsh;
    s.window = 1000;
    s.timestamp = origin_ts;
    s.tsval = ++origin_clock;
    s.tsecr = client_clock;
    s.payload = {reinterpret_cast<const uint8_t*>(payload.data()), payload.size()};
    origin_sent += static_cast<uint32_t>(payload.size());
    return feed(Side::kOrigin, s);
  }

  EngineWorld& w;
  net::IpAddress client, origin;
  uint16_t client_port;
  uint32_t client_isn = 0x10000000, origin_isn = 0xfffff000;  // the origin's numbers wrap
  uint32_t client_clock = 5000, origin_clock = 900000;
  bool client_ts = true, client_sack = true, origin_ts = true, origin_sack = true;
  int8_t client_wscale = 9, origin_wscale = 5;
  uint32_t cookie = 0, seen_tsval = 0, origin_sent = 0, client_sent = 0;
  FrameView synack, origin_syn;
  std::vector<uint8_t> last_frame;
};

// Delayed binding: the SYN the engine sent the origin since sink position
// `since` (one, from the client's ISN), the origin's answer, and then: the
// origin got `request` whole, and its response reaches the client in the
// cookie's numbers, acknowledging the `client_sent` bytes the client's
// stream held (the request, and whatever the appliance took off before it,
// such as a PROXY header; 0: the request's).
inline void origin_binds(EngineWorld& w, Peers& p, size_t since, std::string_view request, size_t client_sent = 0) {
  const auto syn = sent_to(w, Side::kOrigin, since);
  ASSERT_EQ(syn.size(), 1u);
  ASSERT_TRUE(syn[0].view.has(dataplane::tcp_flag::kSyn));
  EXPECT_EQ(syn[0].view.seq, p.client_isn);
  p.origin_syn = syn[0].view;
  const auto bound = p.origin_answer();
  StreamView origin_got(p.client_isn + 1);
  origin_got.add_sent(w, Side::kOrigin, bound.before);
  EXPECT_EQ(origin_got.contiguous(), request);
  p.client_sent = static_cast<uint32_t>(request.size());
  const auto response = p.origin_data("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n");
  ASSERT_EQ(response.action, FrameAction::kForward);
  EXPECT_EQ(response.view.seq, p.cookie + 1);
  EXPECT_EQ(response.view.ack, p.client_isn + 1 + (client_sent != 0 ? client_sent : request.size()));
}

}  // namespace sluice::test

// Frame parsing, checksums and segment writing, checked against an
// independent byte-by-byte checksum and hand-built frames.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <iterator>
#include <utility>
#include <vector>

#include "reference_checksum.h"
#include "dataplane/checksum.h"
#include "dataplane/flow_table.h"
#include "dataplane/frame.h"
#include "dataplane/segment_writer.h"

namespace sluice::dataplane {
namespace {

using test::reference_sum;

std::vector<uint8_t> l2(uint16_t type, int tags = 0) {
  std::vector<uint8_t> h = {2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1};
  for (int i = 0; i < tags; ++i) h.insert(h.end(), {0x81, 0x00, 0x00, static_cast<uint8_t>(10 + i)});
  h.push_back(static_cast<uint8_t>(type >> 8));
  h.push_back(static_cast<uint8_t>(type));
  return h;
}

std::vector<uint8_t> segment(int ip_version, int tags, std::string_view payload, bool ts = true) {
  SegmentSpec s;
  const auto hdr = l2(ip_version == 4 ? 0x0800 : 0x86dd, tags);
  s.l2 = hdr;
  s.ip_version = static_cast<uint8_t>(ip_version);
  s.src = *net::parse_ip(ip_version == 4 ? "198.18.0.10" : "2001:db8::10");
  s.dst = *net::parse_ip(ip_version == 4 ? "198.18.0.20" : "2001:db8::20");
  s.sport = 40000;
  s.dport = 80;
  s.seq = 0xfffffff0u;
  s.ack = 77;
  s.flags = tcp_flag::kAck | tcp_flag::kPsh;
  s.window = 1000;
  s.timestamp = ts;
  s.tsval = 5;
  s.tsecr = 6;
  s.payload = {reinterpret_cast<const uint8_t*>(payload.data()), payload.size()};
  std::vector<uint8_t> f(segment_size(s));
  EXPECT_EQ(write_segment(f, s), f.size());
  return f;
}

TEST(Frame, ParsesIpv4TcpWithOptions) {
  const auto f = segment(4, 0, "hello");
  const FrameView v = parse_frame(f);
  ASSERT_EQ(v.kind, FrameKind::kTcp);
  EXPECT_EQ(v.ip_version, 4);
  EXPECT_EQ(v.sport, 40000);
  EXPECT_EQ(v.dport, 80);
  EXPECT_EQ(v.seq, 0xfffffff0u);
  EXPECT_EQ(v.payload_len, 5u);
  EXPECT_TRUE(v.options.has_timestamp);
  EXPECT_EQ(v.options.tsval, 5u);
  EXPECT_EQ(v.options.tsecr, 6u);
  EXPECT_TRUE(tcp_checksum_ok(f.data(), v));
  EXPECT_TRUE(ipv4_checksum_ok(f.data(), v));
}

TEST(Frame, LooksInsideVlanTags) {
  for (int tags = 1; tags <= 2; ++tags) {
    const auto f = segment(6, tags, "x");
    const FrameView v = parse_frame(f);
    ASSERT_EQ(v.kind, FrameKind::kTcp);
    EXPECT_EQ(v.vlan_tags, tags);
    EXPECT_EQ(v.l3_offset, 14 + 4 * tags);
    EXPECT_TRUE(tcp_checksum_ok(f.data(), v));
  }
}

TEST(Frame, ChecksumMatchesReferenceSum) {
  for (std::string_view payload : {"", "a", "ab", "abc", "GET / HTTP/1.1\r\n\r\n"}) {
    const auto f = segment(4, 0, payload);
    const FrameView v = parse_frame(f);
    // Pseudo-header + TCP segment, summed the slow way, must fold to 0xffff.
    std::vector<uint8_t> pseudo(f.begin() + v.l3_offset + 12, f.begin() + v.l3_offset + 20);
    const uint16_t tcp_len = static_cast<uint16_t>(v.frame_len - v.l4_offset);
    pseudo.insert(pseudo.end(), {0, 6, static_cast<uint8_t>(tcp_len >> 8), static_cast<uint8_t>(tcp_len)});
    pseudo.insert(pseudo.end(), f.begin() + v.l4_offset, f.begin() + v.frame_len);
    EXPECT_EQ(reference_sum(pseudo), 0xffff) << payload;
  }
}

TEST(Frame, NonTcpAndBrokenFrames) {
  std::vector<uint8_t> arp = l2(0x0806);
  arp.resize(60);
  EXPECT_EQ(parse_frame(arp).kind, FrameKind::kNonIp);
  auto f = segment(4, 0, "hello");
  f[l2(0x0800).size() + 9] = 17;  // UDP
  EXPECT_EQ(parse_frame(f).kind, FrameKind::kIpOther);
  auto truncated = segment(4, 0, "hello");
  truncated.resize(truncated.size() - 3);
  EXPECT_EQ(parse_frame(truncated).kind, FrameKind::kMalformed);
  EXPECT_EQ(parse_frame(std::vector<uint8_t>(10)).kind, FrameKind::kMalformed);
}

TEST(Frame, FragmentsAreRecognised) {
  auto f = segment(4, 0, "hello");
  const size_t ip = l2(0x0800).size();
  f[ip + 6] = 0x20;  // MF, offset 0: the first fragment
  EXPECT_EQ(parse_frame(f).kind, FrameKind::kTcpFragment);
  f[ip + 7] = 0x10;  // and an offset: a later fragment
  EXPECT_EQ(parse_frame(f).kind, FrameKind::kIpOther);
}

// Puts an 8-byte IPv6 extension header of type `type` in front of the TCP
// header of an IPv6 segment built by segment(6, 0, ...).
std::vector<uint8_t> with_ipv6_extension(std::vector<uint8_t> f, uint8_t type, std::vector<uint8_t> ext) {
  const size_t ip = l2(0x86dd).size();
  ext.resize(8, 0);
  ext[0] = f[ip + 6];  // it carries the old next header on
  f[ip + 6] = type;
  const uint16_t payload = static_cast<uint16_t>(load16(&f[ip + 4]) + 8);
  store16(&f[ip + 4], payload);
  f.insert(f.begin() + static_cast<std::ptrdiff_t>(ip + 40), ext.begin(), ext.end());
  return f;
}

TEST(Frame, WalksIpv6ExtensionHeadersToTcp) {
  const auto plain = segment(6, 0, "hello");
  const FrameView before = parse_frame(plain);
  auto f = with_ipv6_extension(plain, 60, {});  // destination options
  f = with_ipv6_extension(f, 0, {});             // hop-by-hop in front of it
  const FrameView v = parse_frame(f);
  ASSERT_EQ(v.kind, FrameKind::kTcp);
  EXPECT_EQ(v.l4_offset, before.l4_offset + 16);
  EXPECT_EQ(v.sport, 40000);
  EXPECT_EQ(v.payload_len, 5u);
  EXPECT_EQ(v.frame_len, before.frame_len + 16);

  // A header whose stated length runs past the packet.
  auto long_ext = with_ipv6_extension(plain, 0, {0, 200});
  EXPECT_EQ(parse_frame(long_ext).kind, FrameKind::kMalformed);
}

TEST(Frame, Ipv6FragmentHeader) {
  const auto plain = segment(6, 0, "hello");
  const FrameView first = parse_frame(with_ipv6_extension(plain, 44, {0, 0, 0x00, 0x01}));  // offset 0, M set
  EXPECT_EQ(first.kind, FrameKind::kTcpFragment);
  EXPECT_EQ(first.sport, 40000);
  EXPECT_EQ(first.dport, 80);
  EXPECT_EQ(parse_frame(with_ipv6_extension(plain, 44, {0, 0, 0x00, 0x08})).kind, FrameKind::kIpOther);  // offset 8
}

// An IPv6 extension chain: nine destination options headers (and thirty)
// are walked to the TCP header, never bridged as "other IP" because the
// chain is long.
TEST(Frame, Ipv6ExtensionChainsOfAnyLengthAreWalked) {
  const auto plain = segment(6, 0, "GET / HTTP/1.1\r\n\r\n");
  const FrameView before = parse_frame(plain);
  for (int n : {8, 9, 30}) {
    auto f = plain;
    for (int i = 0; i < n; ++i) f = with_ipv6_extension(f, 60, {});
    const FrameView v = parse_frame(f);
    ASSERT_EQ(v.kind, FrameKind::kTcp) << n;
    EXPECT_EQ(v.l4_offset, before.l4_offset + 8 * n) << n;
    EXPECT_EQ(v.dport, 80) << n;
    EXPECT_EQ(v.payload_len, before.payload_len) << n;
    EXPECT_TRUE(tcp_checksum_ok(f.data(), v)) << n;
  }
}

// What could carry TCP the walk cannot read is dropped (kOpaque),
// never bridged: AH, ESP, tunnels, unknown IPv6 extensions, a routing header
// still to be followed.
TEST(Frame, WhatCouldHideTcpIsOpaque) {
  const auto plain6 = segment(6, 0, "x");
  EXPECT_EQ(parse_frame(with_ipv6_extension(plain6, 51, {})).kind, FrameKind::kOpaque);   // AH
  EXPECT_EQ(parse_frame(with_ipv6_extension(plain6, 50, {})).kind, FrameKind::kOpaque);   // ESP
  EXPECT_EQ(parse_frame(with_ipv6_extension(plain6, 135, {})).kind, FrameKind::kOpaque);  // Mobility
  EXPECT_EQ(parse_frame(with_ipv6_extension(plain6, 253, {})).kind, FrameKind::kOpaque);  // experimental
  EXPECT_EQ(parse_frame(with_ipv6_extension(plain6, 43, {0, 0, 4, 1})).kind, FrameKind::kOpaque);  // segments left 1
  EXPECT_EQ(parse_frame(with_ipv6_extension(plain6, 43, {0, 0, 4, 0})).kind, FrameKind::kTcp);     // segments left 0
  for (uint8_t proto : {4, 41, 47, 50, 51}) {
    auto f = segment(4, 0, "x");
    f[l2(0x0800).size() + 9] = proto;
    EXPECT_EQ(parse_frame(f).kind, FrameKind::kOpaque) << int{proto};
  }
  for (uint16_t type : {0x8847, 0x8848, 0x8864}) {  // MPLS, PPPoE session
    auto f = segment(4, 0, "x");
    store16(&f[12], type);
    EXPECT_EQ(parse_frame(f).kind, FrameKind::kOpaque) << type;
  }
  // A later IPv6 fragment's data are not headers, whatever they look like.
  auto later = with_ipv6_extension(plain6, 44, {0, 0, 0x00, 0x08});
  EXPECT_EQ(parse_frame(later).kind, FrameKind::kIpOther);
}

// A first fragment too short to show the ports cannot be placed:
// dropped, not bridged.
TEST(Frame, AFirstFragmentWithoutPortsIsOpaque) {
  auto f = segment(4, 0, "");
  const size_t ip = l2(0x0800).size();
  f.resize(ip + 20 + 2);
  store16(&f[ip + 2], 22);
  f[ip + 6] = 0x20;  // MF, offset 0
  EXPECT_EQ(parse_frame(f).kind, FrameKind::kOpaque);
}

// IPv4 options are walked over; the segment behind them is read and
// its checksum still holds.
TEST(Frame, Ipv4OptionsAreWalkedOver) {
  const auto plain = segment(4, 0, "GET / HTTP/1.1\r\n\r\n");
  const size_t ip = l2(0x0800).size();
  auto f = plain;
  f.insert(f.begin() + static_cast<std::ptrdiff_t>(ip + 20), {1, 1, 1, 0});  // NOP NOP NOP EOL
  f[ip] = 0x46;
  store16(&f[ip + 2], static_cast<uint16_t>(load16(&f[ip + 2]) + 4));
  const FrameView v = parse_frame(f);
  ASSERT_EQ(v.kind, FrameKind::kTcp);
  EXPECT_EQ(v.l4_offset, parse_frame(plain).l4_offset + 4);
  EXPECT_EQ(v.payload_len, parse_frame(plain).payload_len);
  EXPECT_EQ(v.dport, 80);
  EXPECT_TRUE(tcp_checksum_ok(f.data(), v));
}

TEST(Frame, TcpDataOffsetMustFitTheHeaderAndThePacket) {
  auto f = segment(4, 0, "hello");
  const size_t tcp = parse_frame(f).l4_offset;
  f[tcp + 12] = 0x40;  // 16 bytes: shorter than a TCP header
  EXPECT_EQ(parse_frame(f).kind, FrameKind::kMalformed);
  f[tcp + 12] = 0xf0;  // 60 bytes: past the end of the packet
  EXPECT_EQ(parse_frame(f).kind, FrameKind::kMalformed);
}

TEST(Frame, ReadsSynOptions) {
  auto f = segment(4, 0, "");
  const size_t opts = parse_frame(f).l4_offset + 20;
  const uint8_t syn[kTimestampOptionBytes] = {2, 4, 0x05, 0xb4, 3, 3, 7, 4, 2, 1, 1, 0};  // MSS, wscale, SACK-permitted
  std::copy(std::begin(syn), std::end(syn), f.begin() + static_cast<std::ptrdiff_t>(opts));
  const FrameView v = parse_frame(f);
  ASSERT_EQ(v.kind, FrameKind::kTcp);
  EXPECT_EQ(v.options.mss, 1460);
  EXPECT_TRUE(v.options.has_wscale);
  EXPECT_EQ(v.options.wscale, 7);
  EXPECT_TRUE(v.options.sack_permitted);
  EXPECT_FALSE(v.options.has_timestamp);
}

// The one option walk: NOPs stepped over, EOL ends the list, and a length
// that is under 2 or runs past the area stops it as malformed, with what was
// read before kept.
TEST(TcpOptionWalk, YieldsOptionsInOrderAndStopsAtEolOrAtABrokenLength) {
  auto kinds = [](std::initializer_list<uint8_t> area, bool& malformed) {
    const std::vector<uint8_t> bytes(area);
    TcpOptionWalk walk(bytes.data(), bytes.size());
    std::vector<std::pair<uint8_t, size_t>> seen;
    TcpOption o;
    while (walk.next(o)) seen.emplace_back(o.kind, o.at);
    malformed = walk.malformed();
    return seen;
  };
  using Seen = std::vector<std::pair<uint8_t, size_t>>;
  bool bad = true;
  EXPECT_EQ(kinds({1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2}, bad), (Seen{{8, 2}}));
  EXPECT_FALSE(bad);
  EXPECT_EQ(kinds({2, 4, 5, 0xb4, 0, 3, 3, 7}, bad), (Seen{{2, 0}}));  // after EOL: padding, never read
  EXPECT_FALSE(bad);
  EXPECT_EQ(kinds({2, 4, 5, 0xb4, 3, 1, 1, 1}, bad), (Seen{{2, 0}}));  // length 1
  EXPECT_TRUE(bad);
  EXPECT_EQ(kinds({1, 3, 3, 7, 8, 10, 0, 0}, bad), (Seen{{3, 1}}));  // runs past the area
  EXPECT_TRUE(bad);
  EXPECT_EQ(kinds({1, 1, 1, 4}, bad), (Seen{}));  // a kind with no length byte
  EXPECT_TRUE(bad);
  EXPECT_EQ(kinds({}, bad), (Seen{}));
  EXPECT_FALSE(bad);
}

// Timestamps after two NOPs (the common layout, read directly) and in any
// other place (the general walk) read the same.
TEST(Frame, ReadsTimestampsInEitherLayout) {
  auto f = segment(4, 0, "");
  const size_t opts = parse_frame(f).l4_offset + 20;
  const uint8_t common[kTimestampOptionBytes] = {1, 1, 8, 10, 0, 0, 1, 2, 0xff, 0, 0, 3};
  const uint8_t other[kTimestampOptionBytes] = {8, 10, 0, 0, 1, 2, 0xff, 0, 0, 3, 1, 0};
  for (const uint8_t* layout : {common, other}) {
    std::copy(layout, layout + kTimestampOptionBytes, f.begin() + static_cast<std::ptrdiff_t>(opts));
    const FrameView v = parse_frame(f);
    ASSERT_EQ(v.kind, FrameKind::kTcp);
    EXPECT_TRUE(v.options.has_timestamp);
    EXPECT_EQ(v.options.tsval, 0x102u);
    EXPECT_EQ(v.options.tsecr, 0xff000003u);
    EXPECT_EQ(v.options.mss, 0);
  }
}

// A third tag could hide a service-port segment from the walk, so
// it is dropped (kOpaque), not bridged.
TEST(Frame, VlanTagsPastTwoAreNotWalkedButDropped) {
  auto f = segment(4, 2, "x");
  const std::vector<uint8_t> tag = {0x81, 0x00, 0x00, 12};
  f.insert(f.begin() + 12, tag.begin(), tag.end());
  const FrameView v = parse_frame(f);
  EXPECT_EQ(v.kind, FrameKind::kOpaque);
  EXPECT_EQ(v.vlan_tags, 2);

  std::vector<uint8_t> cut = l2(0x8100);
  cut.resize(16);  // the tag's TCI, but no EtherType after it
  const FrameView c = parse_frame(cut);
  EXPECT_EQ(c.kind, FrameKind::kMalformed);
  EXPECT_EQ(c.vlan_tags, 0);
}

TEST(Frame, EthernetPaddingIsNotPayload) {
  auto f = segment(4, 0, "");
  f.resize(f.size() < 60 ? 60 : f.size() + 4, 0);
  const FrameView v = parse_frame(f);
  EXPECT_EQ(v.payload_len, 0u);
}

TEST(Frame, TrimKeepsChecksumsRight) {
  for (int ipv : {4, 6}) {
    auto f = segment(ipv, 1, "GET / HTTP/1.1\r\n\r\nGET /next HTTP/1.1\r\n\r\n");
    FrameView v = parse_frame(f);
    const uint32_t len = trim_payload(f.data(), v, 18);
    f.resize(len);
    const FrameView again = parse_frame(f);
    EXPECT_EQ(again.payload_len, 18u);
    EXPECT_TRUE(tcp_checksum_ok(f.data(), again));
    if (ipv == 4) {
      EXPECT_TRUE(ipv4_checksum_ok(f.data(), again));
    }
  }
}

// The flow hash is keyed: without the seed a client cannot tell which ports
// share a probe run of the flow table; with it both directions still agree.
TEST(FlowHash, IsKeyedAndTheSameBothWays) {
  FlowKey k;
  k.client = *net::parse_ip("198.18.0.10");
  k.origin = *net::parse_ip("198.18.0.20");
  k.client_port = 40000;
  k.origin_port = 80;
  EXPECT_EQ(flow_hash(k, 7), flow_hash(k, 7));
  EXPECT_NE(flow_hash(k, 7), flow_hash(k, 8));
  EXPECT_NE(flow_hash(k, 7), flow_hash(k));
  // Which of 64 slots 1000 ports land in moves with the seed.
  size_t moved = 0;
  for (uint16_t p = 1024; p < 2024; ++p) {
    k.client_port = p;
    if ((flow_hash(k, 1) & 63) != (flow_hash(k, 2) & 63)) ++moved;
  }
  EXPECT_GT(moved, 900u);
}

TEST(FlowTable, FindInsertEraseWithCollisions) {
  FlowTable t(16);
  std::vector<FlowKey> keys;
  for (uint16_t i = 0; i < 14; ++i) {
    FlowKey k;
    k.client_port = i;
    k.origin_port = 80;
    keys.push_back(k);
    // Every key hashes to slot 3: one long probe run.
    ASSERT_NE(t.insert(k, 3 + (uint64_t{i} << 32)), nullptr);
  }
  EXPECT_EQ(t.insert(FlowKey{}, 99), nullptr);  // 7/8 full
  for (uint16_t i = 0; i < 14; i += 2) t.erase(t.find(keys[i], 3 + (uint64_t{i} << 32)));
  for (uint16_t i = 0; i < 14; ++i) {
    const bool present = t.find(keys[i], 3 + (uint64_t{i} << 32)) != nullptr;
    EXPECT_EQ(present, i % 2 == 1) << i;
  }
  EXPECT_EQ(t.size(), 7u);
}

TEST(FlowTable, SweepRemovesOnlyExpired) {
  FlowTable t(64);
  FlowTimeouts timeouts;
  for (uint16_t i = 0; i < 20; ++i) {
    FlowKey k;
    k.client_port = i;
    TcpFlow* f = t.insert(k, flow_hash(k));
    ASSERT_NE(f, nullptr);
    f->state = i < 10 ? FlowState::kSynSent : FlowState::kEstablished;
    f->last_seen = 0;
  }
  size_t expired = 0;
  t.sweep(timeouts.half_open + 1, timeouts, 64, [&](TcpFlow&) { ++expired; });
  EXPECT_EQ(expired, 10u);  // the half-open ones; the established are younger than their idle timeout
  EXPECT_EQ(t.size(), 10u);
}

}  // namespace
}  // namespace sluice::dataplane

// Renumbering forwarded segments: sequence, acknowledgement and SACK
// edges rewritten in place with the TCP checksum patched incrementally. Each
// rewritten frame is compared byte for byte with the original, patched by
// hand and summed again from scratch by an independent byte-by-byte checksum,
// so a stray write or a checksum off by one word fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "reference_checksum.h"
#include "dataplane/checksum.h"
#include "dataplane/frame.h"
#include "dataplane/segment_rewrite.h"
#include "dataplane/segment_writer.h"
#include "dataplane/seq_shift.h"

namespace sluice::dataplane {
namespace {

using Frame = std::vector<uint8_t>;

using test::reference_sum;

// The frames here have no IPv6 extension headers: the TCP header follows the
// fixed IP header.
size_t tcp_offset(const Frame& f, size_t l3) { return (f[l3] >> 4) == 4 ? l3 + (f[l3] & 0x0f) * 4u : l3 + 40; }

// The TCP checksum of `f` summed again from nothing (its own field zeroed).
uint16_t reference_tcp_checksum(const Frame& f, size_t l3) {
  const bool v4 = (f[l3] >> 4) == 4;
  const size_t l4 = tcp_offset(f, l3);
  const size_t end = v4 ? l3 + (f[l3 + 2] << 8 | f[l3 + 3]) : l3 + 40 + (f[l3 + 4] << 8 | f[l3 + 5]);
  const size_t tcp_len = end - l4;
  std::vector<uint8_t> b;
  if (v4) {
    b.insert(b.end(), f.begin() + static_cast<long>(l3 + 12), f.begin() + static_cast<long>(l3 + 20));
    b.insert(b.end(), {0, 6, static_cast<uint8_t>(tcp_len >> 8), static_cast<uint8_t>(tcp_len)});
  } else {
    b.insert(b.end(), f.begin() + static_cast<long>(l3 + 8), f.begin() + static_cast<long>(l3 + 40));
    b.insert(b.end(), {0, 0, static_cast<uint8_t>(tcp_len >> 8), static_cast<uint8_t>(tcp_len), 0, 0, 0, 6});
  }
  std::vector<uint8_t> tcp(f.begin() + static_cast<long>(l4), f.begin() + static_cast<long>(end));
  tcp[16] = 0;
  tcp[17] = 0;
  b.insert(b.end(), tcp.begin(), tcp.end());
  return static_cast<uint16_t>(~reference_sum(b));
}

void put32(Frame& f, size_t at, uint32_t v) {
  f[at] = static_cast<uint8_t>(v >> 24);
  f[at + 1] = static_cast<uint8_t>(v >> 16);
  f[at + 2] = static_cast<uint8_t>(v >> 8);
  f[at + 3] = static_cast<uint8_t>(v);
}
uint32_t get32(const Frame& f, size_t at) {
  return static_cast<uint32_t>(f[at]) << 24 | static_cast<uint32_t>(f[at + 1]) << 16 |
         static_cast<uint32_t>(f[at + 2]) << 8 | f[at + 3];
}

// Puts the from-scratch TCP checksum into an expected frame.
void seal(Frame& f, size_t l3) {
  const uint16_t c = reference_tcp_checksum(f, l3);
  const size_t l4 = tcp_offset(f, l3);
  f[l4 + 16] = static_cast<uint8_t>(c >> 8);
  f[l4 + 17] = static_cast<uint8_t>(c);
}

// A TCP options area under construction, with where its SACK edges lie.
struct Options {
  std::vector<uint8_t> bytes;
  std::vector<size_t> edges;  // offsets of SACK edges within the options area

  Options& nop() {
    bytes.push_back(1);
    return *this;
  }
  Options& timestamp(uint32_t tsval, uint32_t tsecr) {
    bytes.insert(bytes.end(), {8, 10});
    for (const uint32_t x : {tsval, tsecr}) {
      for (int s = 24; s >= 0; s -= 8) bytes.push_back(static_cast<uint8_t>(x >> s));
    }
    return *this;
  }
  Options& sack(const std::vector<std::pair<uint32_t, uint32_t>>& blocks) {
    bytes.insert(bytes.end(), {5, static_cast<uint8_t>(2 + 8 * blocks.size())});
    for (const auto& [left, right] : blocks) {
      for (const uint32_t x : {left, right}) {
        edges.push_back(bytes.size());
        for (int s = 24; s >= 0; s -= 8) bytes.push_back(static_cast<uint8_t>(x >> s));
      }
    }
    return *this;
  }
  Options& raw(std::initializer_list<uint8_t> b) {
    bytes.insert(bytes.end(), b);
    return *this;
  }
  // Pads to the 4-byte data offset with end-of-list bytes.
  Options& end() {
    while (bytes.size() % 4 != 0) bytes.push_back(0);
    return *this;
  }
};

std::vector<uint8_t> l2(int ip_version, int tags) {
  std::vector<uint8_t> h = {2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1};
  for (int i = 0; i < tags; ++i) h.insert(h.end(), {0x81, 0x00, 0x00, static_cast<uint8_t>(10 + i)});
  h.insert(h.end(), {static_cast<uint8_t>(ip_version == 4 ? 0x08 : 0x86), static_cast<uint8_t>(ip_version == 4 ? 0x00 : 0xdd)});
  return h;
}

struct Seg {
  int ip_version = 4;
  int tags = 0;
  uint32_t seq = 1000, ack = 2000;
  uint8_t flags = tcp_flag::kAck;
  std::vector<uint8_t> options;  // a multiple of 4 bytes
  std::string_view payload = "GET / HTTP/1.1\r\n\r\n";
};

// The segment writer's frame, with `options` slipped in between the fixed
// header and the payload: written as the head of the payload, then claimed
// by a larger data offset and summed again.
Frame build(const Seg& g) {
  EXPECT_EQ(g.options.size() % 4, 0u);
  EXPECT_LE(g.options.size(), 40u);
  std::vector<uint8_t> body = g.options;
  body.insert(body.end(), g.payload.begin(), g.payload.end());
  const auto hdr = l2(g.ip_version, g.tags);
  SegmentSpec s;
  s.l2 = hdr;
  s.ip_version = static_cast<uint8_t>(g.ip_version);
  s.src = *net::parse_ip(g.ip_version == 4 ? "198.18.0.10" : "2001:db8::10");
  s.dst = *net::parse_ip(g.ip_version == 4 ? "198.18.0.20" : "2001:db8::20");
  s.sport = 40000;
  s.dport = 80;
  s.seq = g.seq;
  s.ack = g.ack;
  s.flags = g.flags;
  s.window = 512;
  s.ip_id = 0x1234;
  s.payload = body;
  Frame f(segment_size(s));
  EXPECT_EQ(write_segment(f, s), f.size());
  const size_t l4 = tcp_offset(f, hdr.size());
  f[l4 + 12] = static_cast<uint8_t>(((20 + g.options.size()) / 4) << 4);
  const FrameView v = parse_frame(f);
  EXPECT_EQ(v.kind, FrameKind::kTcp);
  set_tcp_checksum(f.data(), v);
  EXPECT_EQ(v.payload_offset - v.l4_offset, 20 + g.options.size());
  EXPECT_EQ(reference_tcp_checksum(f, v.l3_offset), load16(f.data() + l4 + 16));
  return f;
}

// After a rewrite: the frame is exactly `expected` (once that is summed from
// scratch), the library agrees the checksum is right, and a v4 header is as
// it was.
void expect_frame(const Frame& got, Frame expected) {
  const FrameView v = parse_frame(got);
  ASSERT_EQ(v.kind, FrameKind::kTcp);
  seal(expected, v.l3_offset);
  EXPECT_EQ(got, expected);
  EXPECT_TRUE(tcp_checksum_ok(got.data(), v));
  if (v.ip_version == 4) {
    EXPECT_TRUE(ipv4_checksum_ok(got.data(), v));
  }
}

struct Shape {
  int ip_version;
  int tags;
};
constexpr Shape kShapes[] = {{4, 0}, {4, 1}, {4, 2}, {6, 0}, {6, 1}, {6, 2}};

// Insertions in place (fields and kept answers growing an origin segment):
// the frame equals one written from scratch with the edited payload, for
// every frame shape, payloads of odd and even lengths, insertions of odd and
// even lengths at the start, inside and at the end, one or several, with
// options, across the sequence wrap; the patched checksum is the full sum's.
TEST(SegmentRewrite, InsertionsInPlaceEqualASegmentWrittenWithThem) {
  const std::string payloads[] = {"", "x", "HTTP/1.1 200 OK\r\n\r\n", std::string(1001, 'b') + "tail"};
  const std::vector<std::vector<std::pair<uint32_t, std::string>>> plans = {
      {{0, "A"}},
      {{0, "RateLimit-Limit: 60\r\n"}},
      {{1, "odd"}, {1, "ev"}},
      {{0, "a"}, {1, "bc"}, {1, "def"}},
  };
  unsigned checked = 0;
  for (const Shape& shape : kShapes) {
    for (const std::string& payload : payloads) {
      for (const auto& plan : plans) {
        for (const bool with_options : {false, true}) {
          // Offsets past the payload go to its end.
          std::vector<Insertion> ins;
          std::string want;
          uint32_t pos = 0;
          for (const auto& [at, text] : plan) {
            const uint32_t k = std::min<uint32_t>(at, static_cast<uint32_t>(payload.size()));
            want += payload.substr(pos, k - pos);
            want += text;
            pos = k;
            ins.push_back({k, static_cast<uint32_t>(text.size()), text.data()});
          }
          want += payload.substr(pos);
          Seg g;
          g.ip_version = shape.ip_version;
          g.tags = shape.tags;
          g.seq = 0xfffffff0u;
          g.ack = 77;
          if (with_options) g.options = Options().nop().nop().timestamp(5, 6).nop().nop().sack({{10, 20}}).end().bytes;
          g.payload = payload;
          Frame f = build(g);
          const size_t built = f.size();
          f.resize(built + want.size() - payload.size() + 64);
          FrameView v = parse_frame({f.data(), built});
          insert_in_place(f.data(), v, ins, 0x10u, 99);
          f.resize(v.frame_len);
          Seg e = g;
          e.seq = 0x10u;
          e.ack = 99;
          e.payload = want;
          Frame expected = build(e);
          expect_frame(f, expected);
          EXPECT_EQ(v.payload_len, want.size());
          EXPECT_EQ(v.seq, 0x10u);
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, std::size(kShapes) * 4 * 4 * 2);
}

TEST(SegmentRewrite, SeqAndAckAcrossShapesAndTheWrap) {
  const std::pair<uint32_t, uint32_t> cases[] = {
      {0xfffffff0u, 0x00000010u}, {0x00000010u, 0xfffffff0u}, {0, 0xffffffffu}, {0xffffffffu, 0}, {1234, 1234},
      {0x12345678u, 0x87654321u}};
  for (const Shape sh : kShapes) {
    for (const auto& [from, to] : cases) {
      Seg g;
      g.ip_version = sh.ip_version;
      g.tags = sh.tags;
      g.seq = from;
      g.ack = from ^ 0x5a5a5a5au;
      g.options = std::move(Options().nop().nop().timestamp(7, 9).bytes);
      Frame f = build(g);
      const Frame original = f;
      FrameView v = parse_frame(f);
      const size_t l4 = v.l4_offset;

      rewrite_seq(f.data(), v, to);
      EXPECT_EQ(v.seq, to);
      Frame want = original;
      put32(want, l4 + 4, to);
      expect_frame(f, want);
      EXPECT_EQ(parse_frame(f).seq, to);

      rewrite_ack(f.data(), v, ~to);
      EXPECT_EQ(v.ack, ~to);
      put32(want, l4 + 8, ~to);
      expect_frame(f, want);
      EXPECT_EQ(parse_frame(f).ack, ~to);
      EXPECT_EQ(parse_frame(f).seq, to);
      // The timestamp option is where it was.
      EXPECT_EQ(parse_frame(f).options.tsval, 7u);
    }
  }
}

TEST(SegmentRewrite, IncrementalChecksumMatchesAFullSumForManyValues) {
  // A cheap LCG: many checksums and field values, including the ones whose
  // sums land on 0x0000/0xffff, each compared exactly with a full sum.
  uint32_t x = 12345;
  const auto next = [&x] { return x = x * 1664525u + 1013904223u; };
  std::string payload(37, 'a');
  for (int round = 0; round < 3000; ++round) {
    for (char& c : payload) c = static_cast<char>(next() >> 24);
    Seg g;
    g.ip_version = round % 2 == 0 ? 4 : 6;
    g.tags = round % 3;
    g.seq = next();
    g.ack = next();
    g.payload = payload;
    Frame f = build(g);
    Frame want = f;
    FrameView v = parse_frame(f);
    // Only the high or only the low half changing too, and both.
    const uint32_t seq = round % 4 == 0 ? (g.seq & 0xffff0000u) | (next() & 0xffff)
                         : round % 4 == 1 ? (g.seq & 0xffffu) | (next() & 0xffff0000u)
                                          : next();
    const uint32_t ack = next();
    rewrite_seq(f.data(), v, seq);
    rewrite_ack(f.data(), v, ack);
    put32(want, v.l4_offset + 4, seq);
    put32(want, v.l4_offset + 8, ack);
    expect_frame(f, want);
    if (::testing::Test::HasFailure()) break;
  }
}

TEST(SegmentRewrite, SackEdgesMapBackThroughAnInsertion) {
  // Where the SACK option sits decides whether its edges are on checksum
  // words or straddle them (a lone NOP in front): every layout a stack sends.
  struct Layout {
    const char* name;
    Options (*prefix)();
  };
  const Layout layouts[] = {
      {"sack first", [] { return Options(); }},
      {"nop sack (odd)", [] { return Options().nop(); }},
      {"nop nop sack", [] { return Options().nop().nop(); }},
      {"nop nop ts nop nop sack", [] { return Options().nop().nop().timestamp(1, 2).nop().nop(); }},
      {"ts sack", [] { return Options().timestamp(1, 2); }},
      {"ts nop sack (odd)", [] { return Options().timestamp(1, 2).nop(); }},
      {"nop nop nop sack (odd)", [] { return Options().nop().nop().nop(); }},
  };
  for (const uint32_t isn : {1000u, 0xffffff80u}) {  // the second wraps inside the insertion
    SeqShift shift;
    ASSERT_TRUE(shift.add(isn + 100, 0, 60));  // 60 header bytes before sender byte 100
    // Receiver-side edges: before the insertion, inside it, at its end, after it.
    const std::vector<std::pair<uint32_t, uint32_t>> all = {
        {isn + 200, isn + 260}, {isn + 50, isn + 130}, {isn + 160, isn + 170}, {isn + 300, isn + 1300}};
    // What backward() must give, worked out by hand.
    const std::vector<std::pair<uint32_t, uint32_t>> want_all = {
        {isn + 140, isn + 200}, {isn + 50, isn + 100}, {isn + 100, isn + 110}, {isn + 240, isn + 1240}};
    for (const Layout& layout : layouts) {
      for (unsigned n = 1; n <= 4; ++n) {
        Options o = layout.prefix();
        const size_t prefix = o.bytes.size();
        if (prefix + 2 + 8 * n > 40) continue;
        const std::vector<std::pair<uint32_t, uint32_t>> blocks(all.begin(), all.begin() + n);
        o.sack(blocks).end();
        for (const Shape sh : kShapes) {
          SCOPED_TRACE(testing::Message() << layout.name << ", " << n << " blocks, IPv" << sh.ip_version << ", "
                                          << sh.tags << " tags, isn " << isn);
          Seg g;
          g.ip_version = sh.ip_version;
          g.tags = sh.tags;
          g.ack = isn + 30;
          g.options = std::vector<uint8_t>(o.bytes);
          Frame f = build(g);
          Frame want = f;
          FrameView v = parse_frame(f);
          const size_t area = v.l4_offset + 20u;
          EXPECT_EQ((area + o.edges[0] - v.l4_offset) % 2, prefix % 2);
          for (size_t e = 0; e < o.edges.size(); ++e) {
            const auto& b = want_all[e / 2];
            const uint32_t edge = e % 2 == 0 ? b.first : b.second;
            EXPECT_EQ(shift.backward(get32(want, area + o.edges[e])), edge) << e;
            put32(want, area + o.edges[e], edge);
          }
          EXPECT_EQ(rewrite_sack(f.data(), v, shift), n);
          expect_frame(f, want);
        }
      }
    }
  }
}

TEST(SegmentRewrite, MalformedOptionListsAreLeftUntouched) {
  SeqShift shift;
  ASSERT_TRUE(shift.add(5000, 0, 40));
  const std::pair<uint32_t, uint32_t> block{6000, 6100};  // maps to 5960..6060: would change
  const std::vector<std::pair<const char*, Options>> bad = {
      {"length 0 after a sack", Options().nop().nop().sack({block}).raw({3, 0}).end()},
      {"length 0 before a sack", Options().raw({3, 0, 1, 1}).sack({block}).end()},
      {"length 1", Options().nop().nop().sack({block}).raw({8, 1}).end()},
      {"running past the header", Options().nop().nop().sack({block}).raw({8, 10, 0, 0}).end()},
      {"sack running past the header", Options().nop().nop().raw({5, 18}).raw({0, 0, 0x17, 0x70, 0, 0, 0x17, 0xd4})},
      {"kind without a length at the end", Options().nop().sack({block}).nop().nop().nop().nop().raw({8})},
      {"sack of 3 bytes over a block", Options().nop().nop().raw({5, 13, 0, 0, 0x17, 0x70, 0, 0, 0x17, 0xd4, 9, 9, 9}).end()},
      {"sack with no block", Options().nop().nop().raw({5, 2}).sack({block}).end()},
      {"sack claiming five blocks", Options().raw({5, 42}).end()},
  };
  for (const auto& [name, o] : bad) {
    for (const Shape sh : kShapes) {
      SCOPED_TRACE(testing::Message() << name << ", IPv" << sh.ip_version << ", " << sh.tags << " tags");
      ASSERT_LE(o.bytes.size(), 40u);
      Seg g;
      g.ip_version = sh.ip_version;
      g.tags = sh.tags;
      g.options = std::vector<uint8_t>(o.bytes);
      Frame f = build(g);
      const Frame original = f;
      FrameView v = parse_frame(f);
      EXPECT_EQ(rewrite_sack(f.data(), v, shift), 0u);
      EXPECT_EQ(f, original);
      // The acknowledgement is still mapped; only the SACK edges are left.
      g.ack = 6000;
      f = build(g);
      Frame want = f;
      v = parse_frame(f);
      shift_client_segment(f.data(), v, shift);
      EXPECT_EQ(v.ack, 5960u);
      put32(want, v.l4_offset + 8, 5960);
      expect_frame(f, want);
    }
  }
}

TEST(SegmentRewrite, EndOfListStopsTheWalk) {
  SeqShift shift;
  ASSERT_TRUE(shift.add(5000, 0, 40));
  // After end-of-list the rest is padding: even bytes that look malformed.
  Options o = Options().nop().sack({{6000, 6100}}).raw({0, 3, 0, 5, 1}).end();
  Seg g;
  g.options = std::vector<uint8_t>(o.bytes);
  Frame f = build(g);
  Frame want = f;
  FrameView v = parse_frame(f);
  put32(want, v.l4_offset + 20 + o.edges[0], 5960);
  put32(want, v.l4_offset + 20 + o.edges[1], 6060);
  EXPECT_EQ(rewrite_sack(f.data(), v, shift), 1u);
  expect_frame(f, want);

  // A SACK after end-of-list is padding too.
  Options late = Options().nop().raw({0}).sack({{6000, 6100}}).end();
  g.options = std::vector<uint8_t>(late.bytes);
  f = build(g);
  const Frame original = f;
  v = parse_frame(f);
  EXPECT_EQ(rewrite_sack(f.data(), v, shift), 0u);
  EXPECT_EQ(f, original);
}

TEST(SegmentRewrite, NoOptionsAndNoSack) {
  SeqShift shift;
  ASSERT_TRUE(shift.add(5000, 0, 40));
  for (const auto& o : {Options(), Options().nop().nop().timestamp(3, 4), Options().raw({2, 4, 5, 0xb4})}) {
    Seg g;
    g.options = std::vector<uint8_t>(o.bytes);
    Frame f = build(g);
    const Frame original = f;
    const FrameView v = parse_frame(f);
    EXPECT_EQ(rewrite_sack(f.data(), v, shift), 0u);
    EXPECT_EQ(f, original);
  }
}

TEST(SegmentRewrite, ClientSegmentsMapAckAndSackBackOnlyWithTheAckFlag) {
  for (const Shape sh : kShapes) {
    SCOPED_TRACE(testing::Message() << "IPv" << sh.ip_version << ", " << sh.tags << " tags");
    // Across the wrap: 60 bytes inserted before origin byte 0xfffffff8.
    SeqShift shift;
    ASSERT_TRUE(shift.add(0xfffffff8u, 0, 60));
    Options o = Options().nop().nop().timestamp(11, 12).nop().nop().sack({{0x00000050u, 0x00000080u}}).end();
    Seg g;
    g.ip_version = sh.ip_version;
    g.tags = sh.tags;
    g.ack = 0x00000034u;  // 0x34 = 0xfffffff8 + 60: right after the insertion
    g.options = std::vector<uint8_t>(o.bytes);
    Frame f = build(g);
    Frame want = f;
    FrameView v = parse_frame(f);
    shift_client_segment(f.data(), v, shift);
    EXPECT_EQ(v.ack, 0xfffffff8u);
    EXPECT_EQ(v.seq, 1000u);
    put32(want, v.l4_offset + 8, 0xfffffff8u);
    put32(want, v.l4_offset + 20 + o.edges[0], 0x00000014u);
    put32(want, v.l4_offset + 20 + o.edges[1], 0x00000044u);
    expect_frame(f, want);

    // No ACK flag (a SYN): nothing to map, nothing written.
    g.flags = tcp_flag::kSyn;
    f = build(g);
    const Frame original = f;
    v = parse_frame(f);
    shift_client_segment(f.data(), v, shift);
    EXPECT_EQ(f, original);
    EXPECT_EQ(v.ack, 0x34u);
  }
}

TEST(SegmentRewrite, OriginSegmentsMapSeqForward) {
  for (const Shape sh : kShapes) {
    SCOPED_TRACE(testing::Message() << "IPv" << sh.ip_version << ", " << sh.tags << " tags");
    SeqShift shift;
    ASSERT_TRUE(shift.add(0xfffffff8u, 0, 60));
    // Before the insertion (unchanged, not even rewritten), after it across
    // the wrap; at it, wherever forward() puts a segment that starts there.
    const std::pair<uint32_t, uint32_t> cases[] = {
        {0xfffffff0u, 0xfffffff0u}, {0x00000010u, 0x0000004cu}, {0xfffffff8u, shift.forward(0xfffffff8u)}};
    for (const auto& [seq, want_seq] : cases) {
      Seg g;
      g.ip_version = sh.ip_version;
      g.tags = sh.tags;
      g.seq = seq;
      g.ack = 0x00000050u;  // an origin's acknowledgement is the client's number: left alone
      g.options = std::move(Options().nop().sack({{0x00000050u, 0x00000080u}}).end().bytes);
      Frame f = build(g);
      Frame want = f;
      FrameView v = parse_frame(f);
      shift_origin_segment(f.data(), v, shift);
      EXPECT_EQ(v.seq, want_seq);
      EXPECT_EQ(v.ack, 0x50u);
      put32(want, v.l4_offset + 4, want_seq);
      expect_frame(f, want);
    }
  }
}

TEST(SegmentRewrite, AnEmptyShiftOrANonTcpFrameIsLeftAlone) {
  const SeqShift none;
  Seg g;
  g.options = std::move(Options().nop().sack({{10, 20}}).end().bytes);
  Frame f = build(g);
  const Frame original = f;
  FrameView v = parse_frame(f);
  shift_client_segment(f.data(), v, none);
  shift_origin_segment(f.data(), v, none);
  EXPECT_EQ(f, original);

  // A view that is not a whole TCP segment describes no TCP header to write.
  SeqShift shift;
  ASSERT_TRUE(shift.add(0, 0, 40));
  FrameView other = v;
  other.kind = FrameKind::kTcpFragment;
  rewrite_seq(f.data(), other, 99);
  rewrite_ack(f.data(), other, 99);
  EXPECT_EQ(rewrite_sack(f.data(), other, shift), 0u);
  shift_client_segment(f.data(), other, shift);
  shift_origin_segment(f.data(), other, shift);
  EXPECT_EQ(f, original);
}

}  // namespace
}  // namespace sluice::dataplane

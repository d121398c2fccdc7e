// The one's-complement sum against RFC 1071's slow reading: every length and
// alignment a frame can have, the AVX2 and the 8-byte sums against each
// other, a buffer long enough to fill the vector lanes, the verdicts of the
// receive checks on a segment with one bit flipped, and which verdict wins
// where the port verified the segment itself.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "dataplane/checksum.h"
#include "dataplane/frame.h"
#include "dataplane/receive_checksum.h"
#include "dataplane/segment_writer.h"
#include "reference_checksum.h"

namespace sluice::dataplane {
namespace {

using test::reference_sum;

uint16_t folded(uint64_t native) {
  // What checksum_add does with a native sum, as a big-endian word.
  while (native >> 16) native = (native & 0xffff) + (native >> 16);
  return static_cast<uint16_t>((native << 8) | (native >> 8));
}

TEST(Checksum, EveryLengthAndAlignmentSumsAsRfc1071) {
  std::mt19937 rng(7);
  std::vector<uint8_t> buf(600 + 8);
  for (int round = 0; round < 4; ++round) {
    for (auto& b : buf) b = round == 0 ? 0xff : static_cast<uint8_t>(rng());
    for (size_t at = 0; at < 8; ++at) {
      for (size_t n = 0; n <= 600; ++n) {
        const std::vector<uint8_t> part(buf.begin() + static_cast<std::ptrdiff_t>(at),
                                        buf.begin() + static_cast<std::ptrdiff_t>(at + n));
        ASSERT_EQ(checksum_fold(checksum_add(0, buf.data() + at, n)), reference_sum(part))
            << "round " << round << " offset " << at << " length " << n;
      }
    }
  }
}

TEST(Checksum, VectorAndScalarSumsAgree) {
  if (!__builtin_cpu_supports("avx2")) GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(11);
  std::vector<uint8_t> buf(4096 + 32);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (size_t n = 0; n <= 4096; n += 1 + (n % 13)) {
    for (size_t at : {0, 1, 3, 31}) {
      ASSERT_EQ(folded(checksum_detail::native_sum_avx2(buf.data() + at, n)),
                folded(checksum_detail::native_sum_scalar(buf.data() + at, n)))
          << "offset " << at << " length " << n;
    }
  }
}

TEST(Checksum, AllOnesLongerThanOneVectorRoundSumsAsRfc1071) {
  // 0xffff words in every lane for more than the 2^15 blocks a round adds
  // before its lanes are emptied: an overflow there would lose carries.
  const std::vector<uint8_t> ones((size_t{1} << 20) + 96 + 5, 0xff);
  EXPECT_EQ(checksum_fold(checksum_add(0, ones.data(), ones.size())), reference_sum(ones));
  std::vector<uint8_t> mixed(ones.size());
  std::mt19937 rng(13);
  for (auto& b : mixed) b = static_cast<uint8_t>(rng() | 0xf0);
  EXPECT_EQ(checksum_fold(checksum_add(0, mixed.data(), mixed.size())), reference_sum(mixed));
}

std::vector<uint8_t> request_segment(int ip_version, size_t payload_len) {
  static const uint8_t kL2v4[] = {2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00};
  static const uint8_t kL2v6[] = {2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x86, 0xdd};
  std::vector<uint8_t> payload(payload_len);
  for (size_t i = 0; i < payload_len; ++i) payload[i] = static_cast<uint8_t>('a' + i % 26);
  SegmentSpec s;
  s.l2 = ip_version == 4 ? std::span<const uint8_t>(kL2v4) : std::span<const uint8_t>(kL2v6);
  s.ip_version = static_cast<uint8_t>(ip_version);
  s.src = *net::parse_ip(ip_version == 4 ? "198.18.0.10" : "2001:db8::10");
  s.dst = *net::parse_ip(ip_version == 4 ? "198.18.0.20" : "2001:db8::20");
  s.sport = 40000;
  s.dport = 80;
  s.seq = 1000;
  s.ack = 2000;
  s.flags = tcp_flag::kAck | tcp_flag::kPsh;
  s.window = 1000;
  s.timestamp = true;
  s.payload = payload;
  std::vector<uint8_t> f(segment_size(s));
  EXPECT_EQ(write_segment(f, s), f.size());
  return f;
}

TEST(Checksum, AnyFlippedBitOfASegmentFailsItsCheck) {
  for (int version : {4, 6}) {
    for (size_t len : {0, 1, 87, 300}) {
      std::vector<uint8_t> f = request_segment(version, len);
      const FrameView v = parse_frame(f);
      ASSERT_EQ(v.kind, FrameKind::kTcp);
      ASSERT_TRUE(tcp_checksum_ok(f.data(), v));
      if (version == 4) {
        ASSERT_TRUE(ipv4_checksum_ok(f.data(), v));
      }
      // Every bit the TCP checksum covers: the addresses (pseudo-header),
      // the TCP header and the payload.
      const size_t addresses = v.l3_offset + (version == 4 ? 12 : 8);
      for (size_t at = addresses; at < f.size(); ++at) {
        if (at >= addresses + (version == 4 ? 8 : 32) && at < v.l4_offset) continue;
        for (int bit = 0; bit < 8; bit += 3) {
          f[at] ^= static_cast<uint8_t>(1 << bit);
          const FrameView flipped = parse_frame(f);
          EXPECT_FALSE(flipped.kind == FrameKind::kTcp && tcp_checksum_ok(f.data(), flipped))
              << "IPv" << version << " payload " << len << ": byte " << at << " bit " << bit;
          f[at] ^= static_cast<uint8_t>(1 << bit);
        }
      }
      if (version == 4) {
        for (size_t at = v.l3_offset; at < v.l4_offset; ++at) {
          f[at] ^= 0x10;
          EXPECT_FALSE(ipv4_checksum_ok(f.data(), v)) << "IPv4 header byte " << at;
          f[at] ^= 0x10;
        }
      }
    }
  }
}

TEST(ReceivedChecksums, ThePortsVerdictWinsWhereItGaveOneAndTheSumDecidesElsewhere) {
  for (int version : {4, 6}) {
    std::vector<uint8_t> good = request_segment(version, 87);
    std::vector<uint8_t> bad_tcp = good;
    bad_tcp.back() ^= 0x01;  // a payload byte: the TCP checksum no longer holds
    const FrameView v = parse_frame(good);
    ASSERT_EQ(v.kind, FrameKind::kTcp);
    const uint64_t ip_good = version == 4 ? RTE_MBUF_F_RX_IP_CKSUM_GOOD : 0;
    // No verdict (AF_PACKET, AF_XDP, a port without the offload): summed.
    EXPECT_TRUE(received_checksums_right(0, good.data(), v));
    EXPECT_FALSE(received_checksums_right(0, bad_tcp.data(), v));
    // "Intact but not filled in" cannot be forwarded as it is: summed, and
    // the stale field fails.
    EXPECT_FALSE(received_checksums_right(RTE_MBUF_F_RX_L4_CKSUM_NONE | ip_good, bad_tcp.data(), v));
    // The port said bad: dropped even where the bytes sum right.
    EXPECT_FALSE(received_checksums_right(RTE_MBUF_F_RX_L4_CKSUM_BAD | ip_good, good.data(), v));
    // The port said good: not summed again.
    EXPECT_TRUE(received_checksums_right(RTE_MBUF_F_RX_L4_CKSUM_GOOD | ip_good, bad_tcp.data(), v));
    if (version == 4) {
      std::vector<uint8_t> bad_ip = good;
      bad_ip[v.l3_offset + 8] ^= 0x01;  // the TTL: only the header checksum covers it
      EXPECT_FALSE(received_checksums_right(0, bad_ip.data(), v));
      EXPECT_FALSE(received_checksums_right(RTE_MBUF_F_RX_L4_CKSUM_GOOD, bad_ip.data(), v))
          << "the port verified only the TCP checksum: the header's is summed";
      EXPECT_FALSE(received_checksums_right(RTE_MBUF_F_RX_L4_CKSUM_GOOD | RTE_MBUF_F_RX_IP_CKSUM_BAD, good.data(), v));
      EXPECT_TRUE(received_checksums_right(RTE_MBUF_F_RX_L4_CKSUM_GOOD | RTE_MBUF_F_RX_IP_CKSUM_GOOD, bad_ip.data(), v));
    }
  }
}

}  // namespace
}  // namespace sluice::dataplane

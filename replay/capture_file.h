// The capture file formats, below the flows: a pcap or pcapng file read a
// packet at a time (PacketReader), from a stream (a file or a pipe, gzip,
// xz or zstd undone as it is read: input_stream.h) or from an image in
// memory, and each packet's link layer (Ethernet, Linux cooked SLL and
// SLL2, raw IP, BSD loopback) walked to its TCP segment with the data
// plane's own frame walk (dataplane/frame.h). Bounds-safe on any bytes:
// damage is a problem naming the packet (or the byte offset of what is not
// a packet), skipped where the framing allows.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "dataplane/frame.h"
#include "replay/input_stream.h"
#include "replay/record.h"
#include "time/clock.h"

namespace sluice::replay {

enum class CaptureFormat : uint8_t { kUnknown, kPcap, kPcapng };

// From the file's first four bytes (fewer: kUnknown).
[[nodiscard]] CaptureFormat capture_format(std::span<const uint8_t> first_bytes) noexcept;

// Link types (LINKTYPE_* of the pcap registry) the walk reads.
namespace link_type {
inline constexpr uint32_t kNull = 0;  // BSD loopback: a 4-byte address family
inline constexpr uint32_t kEthernet = 1;
inline constexpr uint32_t kRaw = 101;  // the IP header first
inline constexpr uint32_t kLoop = 108;  // OpenBSD loopback: like kNull
inline constexpr uint32_t kLinuxSll = 113;
inline constexpr uint32_t kIpv4 = 228;
inline constexpr uint32_t kIpv6 = 229;
inline constexpr uint32_t kLinuxSll2 = 276;
}  // namespace link_type

struct CapturedPacket {
  std::span<const uint8_t> data;  // the captured bytes: in the image, or in the reader's buffer until its next packet
  time::Nanos at = 0;             // UTC
  uint64_t number = 0;            // 1-based, in file order
  uint32_t link_type = 0;
  uint32_t original_length = 0;   // on the wire (more than data.size() when the snap length cut it)
};

// A problem and the packet number it comes before or at, so problems found
// by different passes can be merged in file order.
struct CaptureProblem {
  uint64_t packet = 0;
  InputProblem problem;
};

// Blocks and records longer than this are taken for lost framing, not read:
// no real packet comes near it, and a streamed reader would have to hold it.
inline constexpr size_t kMaxCaptureBlock = size_t{64} << 20;

// A capture's packets, one at a time, in file order. Holds one block (one
// packet record) and the read-ahead of its stream, whatever the capture's
// length.
class PacketReader {
 public:
  // Streamed from `in`, which has not been read from yet (peeked at most).
  // `name` is the file's name for the problems' `where` ("NAME: packet N",
  // "NAME: byte OFFSET").
  PacketReader(std::unique_ptr<InputStream> in, std::string name);
  // Over an image in memory: the packets are views into it.
  PacketReader(std::span<const uint8_t> image, std::string name);
  ~PacketReader();
  PacketReader(const PacketReader&) = delete;
  PacketReader& operator=(const PacketReader&) = delete;

  // The next readable packet; false once nothing more can be read (the
  // end, a fatal problem, framing that is lost). A streamed packet's bytes
  // stay valid until the next call.
  [[nodiscard]] bool next(CapturedPacket& out);

  // Every packet record met so far, damaged ones included.
  [[nodiscard]] uint64_t packet_count() const noexcept { return packet_count_; }
  // Set (by the first next()) when the input is not a readable capture at all.
  [[nodiscard]] const std::optional<InputProblem>& fatal() const noexcept { return fatal_; }
  // The problems met since they were last taken, in file order.
  [[nodiscard]] std::vector<CaptureProblem> take_problems() { return std::exchange(problems_, {}); }
  // Once next() has said false: the stream's own failure (damaged
  // compressed data, a read error), empty if it was read whole.
  [[nodiscard]] std::string stream_error() const;
  [[nodiscard]] const std::string& name() const noexcept { return name_; }

 private:
  struct Section;  // pcapng: the byte order and interfaces of the section being read
  bool start();
  bool next_pcap(CapturedPacket& out);
  bool next_pcapng(CapturedPacket& out);
  // At least `n` bytes from the cursor in the window; false at the end
  // with fewer (left() says how many).
  bool ensure(size_t n);
  [[nodiscard]] size_t left() const noexcept { return window_.size() - at_; }
  [[nodiscard]] uint64_t offset() const noexcept { return base_ + at_; }
  void problem(uint64_t packet, std::string where, std::string message);

  std::string name_;
  std::unique_ptr<InputStream> in_;  // null over an image
  std::vector<uint8_t> buffer_;      // a streamed reader's read-ahead
  std::span<const uint8_t> window_;  // the image, or the buffer's filled part
  size_t at_ = 0;                    // the cursor in window_
  uint64_t base_ = 0;                // the file offset of window_[0]
  bool eof_ = false;                 // the stream has nothing more
  bool started_ = false, done_ = false;
  CaptureFormat format_ = CaptureFormat::kUnknown;
  bool big_ = false, nanos_ = false;  // pcap: byte order, time resolution
  uint32_t snap_ = 0, link_ = 0;      // pcap: the file's snap length and link type
  std::unique_ptr<Section> section_;
  uint64_t packet_count_ = 0;
  std::optional<InputProblem> fatal_;
  std::vector<CaptureProblem> problems_;
};

struct CaptureIndex {
  std::vector<CapturedPacket> packets;   // the readable ones
  uint64_t packet_count = 0;             // every packet record met, damaged ones included
  std::vector<CaptureProblem> problems;  // in file order
  std::optional<InputProblem> fatal;     // set: not a readable capture at all
};

// The packets of a whole capture image (views into it).
[[nodiscard]] CaptureIndex index_capture(std::span<const uint8_t> image, const std::string& name);

// A packet's TCP segment as the frame walk sees it.
struct PacketFrame {
  dataplane::FrameView view;           // kind, addresses, ports, seq/ack, flags
  std::span<const uint8_t> payload;    // the TCP payload, in the packet's bytes (when view.kind is kTcp)
  bool link_supported = true;          // false: a link type the walk cannot read (view.kind is kNonIp)
};

// Walks one packet's headers. Frames of other link types than Ethernet are
// given a made-up Ethernet header in `scratch` (the caller's, reused) so the
// data plane's walk reads them as it reads the wire.
[[nodiscard]] PacketFrame walk_packet(const CapturedPacket& packet, std::vector<uint8_t>& scratch);

}  // namespace sluice::replay

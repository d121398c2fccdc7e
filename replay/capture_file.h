// The capture file formats, below the flows: a pcap or pcapng file read whole
// (mapped), indexed into its packets (time, link type, captured bytes, all
// views into the mapping), and each packet's link layer (Ethernet, Linux
// cooked SLL and SLL2, raw IP, BSD loopback) walked to its TCP segment with
// the data plane's own frame walk (dataplane/frame.h). Bounds-safe on any
// bytes: damage is a problem naming the packet (or the byte offset of what
// is not a packet), skipped where the framing allows.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "dataplane/frame.h"
#include "replay/record.h"
#include "time/clock.h"

namespace sluice::replay {

// A file mapped read-only for the life of the object. An empty file maps to
// no bytes (and is no capture).
class FileImage {
 public:
  // nullopt, with a one-line `error` (why, without the path), when the file
  // cannot be opened or mapped.
  [[nodiscard]] static std::optional<FileImage> open(const std::string& path, std::string& error);
  FileImage(FileImage&& other) noexcept;
  FileImage& operator=(FileImage&&) = delete;
  FileImage(const FileImage&) = delete;
  FileImage& operator=(const FileImage&) = delete;
  ~FileImage();

  [[nodiscard]] std::span<const uint8_t> bytes() const noexcept { return {data_, size_}; }

 private:
  FileImage(const uint8_t* data, size_t size) noexcept : data_(data), size_(size) {}
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

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
  std::span<const uint8_t> data;  // the captured bytes, in the file image
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

struct CaptureIndex {
  std::vector<CapturedPacket> packets;   // the readable ones
  uint64_t packet_count = 0;             // every packet record met, damaged ones included
  std::vector<CaptureProblem> problems;  // in file order
  std::optional<InputProblem> fatal;     // set: not a readable capture at all
};

// The packets of a whole capture image. `name` is the file's name for the
// problems' `where` ("NAME: packet N", "NAME: byte OFFSET").
[[nodiscard]] CaptureIndex index_capture(std::span<const uint8_t> image, const std::string& name);

// A packet's TCP segment as the frame walk sees it.
struct PacketFrame {
  dataplane::FrameView view;           // kind, addresses, ports, seq/ack, flags
  std::span<const uint8_t> payload;    // the TCP payload, in the file image (when view.kind is kTcp)
  bool link_supported = true;          // false: a link type the walk cannot read (view.kind is kNonIp)
};

// Walks one packet's headers. Frames of other link types than Ethernet are
// given a made-up Ethernet header in `scratch` (the caller's, reused) so the
// data plane's walk reads them as it reads the wire.
[[nodiscard]] PacketFrame walk_packet(const CapturedPacket& packet, std::vector<uint8_t>& scratch);

}  // namespace sluice::replay

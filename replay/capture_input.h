// Requests from a packet capture (pcap or pcapng; Ethernet, VLAN-tagged or
// not, Linux cooked SLL/SLL2, raw IP or loopback frames): each TCP flow to a
// service port reassembled in both directions with the data plane's frame
// walk (dataplane/frame.h) and the limiter's own request and response
// streams (lib/http), so a head is cut exactly where the appliance would cut
// it, and a response's reported tokens (DQ05) are known. A flow whose SYN is
// not in the capture is adopted, as the appliance adopts it, at the first
// client segment that begins a request line. Several captures are read as
// one: a capture split by direction (tcpdump -Q in / -Q out, one file per
// interface) or cut into ring-buffer files holds each connection in pieces,
// and only the merged stream has both halves of it, in time order.
// capture_file.h reads the formats; capture_flows.h reassembles.
#pragma once

#include <bitset>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "http/field_set.h"
#include "http/request_stream.h"
#include "replay/record.h"

namespace sluice::replay {

struct CaptureOptions {
  std::bitset<65536> service_ports;  // TCP destination ports whose flows are parsed (the policy's service_ports)
  const http::FieldSet* fields = nullptr;  // the policy's (compiled) field set; nullptr: the built-in names only
  http::StreamConfig stream;               // the policy's head and body limits, protocol switches
  // DQ05: the response field with a request's tokens, lowercase, at most 32
  // bytes (the policy loader's bound; a longer one is not watched); empty: none.
  std::string usage_field;
};

// One capture among those read together. `input` is the input's index
// (RequestRecord::input).
struct CaptureFile {
  std::string path;
  uint32_t input = 0;
};

// Reads every file whole (mapped) and replays them as one packet stream:
// the service-port segments of all files merged by packet time (ties: the
// file given first, then the packet number; each file's own order is kept),
// and grouped into flows by 4-tuple across the files, so a connection whose
// halves, or whose beginning and end, are in different files is replayed
// whole. Packets seen twice (the same traffic in two files) are read once.
// One result per file, in the order given: its packets (units_read), its
// problems (a truncated record, a frame that does not parse, a flow that
// cannot be framed any more: "FILE: packet N", skipped) and the records
// whose head was completed by one of its packets. `fatal` only for a file
// that cannot be opened or is not a capture (the others are still read).
// Records: one per request head (or head refused by the parser), each
// flow's together and in stream order, flows in the order they first
// appear; RequestRecord::connection is unique across all the files.
// Heads completed by the same packet share `order`: sort stably.
[[nodiscard]] std::vector<InputResult> read_captures(std::span<const CaptureFile> files, const CaptureOptions& options);

// read_captures of the one file.
[[nodiscard]] InputResult read_capture(const std::string& path, uint32_t input, const CaptureOptions& options);

}  // namespace sluice::replay

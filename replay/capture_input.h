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
// and only the merged stream has both halves of it, in time order. Read as
// a stream: no capture is ever held whole. capture_file.h reads the
// formats; capture_flows.h reassembles.
#pragma once

#include <bitset>
#include <cstdint>
#include <memory>
#include <queue>
#include <span>
#include <string>
#include <vector>

#include "http/field_set.h"
#include "http/request_stream.h"
#include "replay/input_stream.h"
#include "replay/record.h"
#include "replay/record_source.h"

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

// How long the stream lets a record's time go back within one input before
// it counts it late (time_merge.h): a capture's own clock may step back.
inline constexpr time::Nanos kCaptureLookBack = 2 * time::kNanosPerSecond;

class FlowReplay;
struct FlowOutput;
struct ParseBuffers;

// Every capture given, read as one packet stream, streamed: each file a
// packet at a time (compressed or not, a pipe or a file), the files'
// packets merged by time (ties: the file given first; each file's own order
// is kept), service-port segments grouped by 4-tuple across the files, so a
// connection whose halves, or whose beginning and end, are in different
// files is replayed whole. Packets seen twice (the same traffic in two
// files) are read once. Records come as the packets completing them are
// read: in time order, but for a file whose clock steps back.
//
// Memory stays bounded by what is live, not by the capture's length: a file
// is opened only when the merge reaches its first packet (ring-buffer files
// are read one at a time) and closed at its end; a flow is forgotten when
// the appliance's flow table would forget it (closed 5 s, half-open 10 s,
// idle 600 s after its last segment, on the capture's clock); a flow holds
// copies only of what it must (bytes after a gap, a head split across
// segments, requests waiting for responses, each at most 1 MiB).
//
// Each file's result (`results[i]`, the caller's, alive as long as the
// stream) gets its packets (units_read), its problems (a truncated record, a
// frame that does not parse, a flow that cannot be framed any more: "FILE:
// packet N", skipped) and `fatal` when it cannot be opened, is not a
// capture, or turns out not to be whole (damaged compressed data).
class CaptureStream final : public RecordSource {
 public:
  // `opened[i]`, where not null, is file i already opened (a pipe, which
  // cannot be opened twice), not read from but peeked.
  CaptureStream(std::vector<CaptureFile> files, std::vector<std::unique_ptr<InputStream>> opened,
                const CaptureOptions& options, std::span<InputResult* const> results);
  ~CaptureStream() override;
  CaptureStream(const CaptureStream&) = delete;
  CaptureStream& operator=(const CaptureStream&) = delete;

  bool next(std::vector<RequestRecord>& out) override;

  // A file could not be opened or is not a capture (known at construction).
  [[nodiscard]] bool fatal() const noexcept { return fatal_; }
  // The earliest packet time of every file (0 if none has a packet).
  [[nodiscard]] time::Nanos starts() const noexcept { return starts_; }
  // Most flows live at once, for the report on memory.
  [[nodiscard]] size_t most_flows() const noexcept { return most_flows_; }

 private:
  struct File;
  struct Entry {
    time::Nanos at;
    uint32_t file;
    bool operator>(const Entry& o) const noexcept { return at != o.at ? at > o.at : file > o.file; }
  };
  [[nodiscard]] bool open(File& f);
  void read_ahead(File& f);
  void replay_packet(File& f);
  void sweep();
  void hand_out_problems();

  CaptureOptions options_;
  std::vector<CaptureFile> files_;
  std::vector<std::unique_ptr<File>> state_;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> merge_;
  std::unique_ptr<FlowOutput> out_;
  std::unique_ptr<ParseBuffers> shared_;
  std::vector<std::unique_ptr<ParseBuffers>> free_;
  std::unique_ptr<http::FieldSet> builtin_;
  struct Flows;
  std::unique_ptr<Flows> flows_;
  std::vector<uint8_t> scratch_;
  time::Nanos now_ = 0, last_sweep_ = 0, starts_ = 0;
  uint64_t since_sweep_ = 0;
  size_t most_flows_ = 0;
  bool fatal_ = false, ended_ = false;
};

// Every file read through a CaptureStream to its end, for tests and tools
// that want a capture whole: one result per file, in the order given, its
// records those completed by its packets, in stream order. A response's end
// is folded into the request it answers (has_usage, usage_at), as a log
// gives it. RequestRecord::connection is unique across all the files.
[[nodiscard]] std::vector<InputResult> read_captures(std::span<const CaptureFile> files, const CaptureOptions& options);

// read_captures of the one file.
[[nodiscard]] InputResult read_capture(const std::string& path, uint32_t input, const CaptureOptions& options);

}  // namespace sluice::replay

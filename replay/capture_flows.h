// A capture's TCP flows to service ports put back together: each flow's
// segments (in capture order) reassembled in both directions, the client's
// bytes cut into requests by http::RequestStream and the origin's into
// responses by http::ResponseStream, as the data plane's request and
// response paths do, so heads are cut where the appliance cuts them and each
// response's reported tokens (DQ05) land on the request they answer.
// InOrderBytes puts one direction back in sequence order. read_captures
// (capture_input.h) walks the packets of every file read together, merges
// them by time and replays the flows in parallel; one flow is replayed by one
// thread, start to end, whichever files its segments came from.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "dataplane/flow_key.h"
#include "http/request_head.h"
#include "replay/capture_file.h"
#include "replay/capture_input.h"

namespace sluice::replay {

// A packet among the files read together: which file (its place in the
// list read_captures was given) and its number there. Problems and records
// name the file the packet came from, not the flow's first.
struct PacketAt {
  uint32_t file = 0;
  uint64_t number = 0;
};

// One TCP segment of a service-port flow, as reassembly needs it.
struct FlowSegment {
  std::span<const uint8_t> payload;  // in its file's image
  time::Nanos at = 0;                // the packet's time
  uint64_t number = 0;               // the packet's number in its file
  uint32_t seq = 0;
  uint32_t ack = 0;
  uint32_t file = 0;  // PacketAt::file
  uint8_t flags = 0;  // dataplane::tcp_flag
  bool from_client = false;
  [[nodiscard]] PacketAt where() const noexcept { return {file, number}; }
};

// A flow's problem and the file whose packet it is about.
struct FlowProblem {
  uint32_t file = 0;
  CaptureProblem problem;
};

// What one flow gave: its records in stream order (each with the file of
// the packet that completed it), and its problems.
struct FlowOutput {
  std::vector<RequestRecord> records;
  std::vector<uint32_t> record_files;  // parallel to records
  std::vector<FlowProblem> problems;
};

// The parser buffers a request stream borrows (one set per thread).
struct StreamBuffers {
  std::vector<http::FieldLine> fields;
  std::vector<char> spill;
};

// What every flow of the captures read together shares.
struct FlowContext {
  const CaptureOptions& options;
  const http::FieldSet& fields;          // options.fields, or the built-in names
  std::span<const CaptureFile> files;    // FlowSegment::file indexes these: names for problems, inputs for records
};

// Bytes one direction of a flow may hold after a gap, waiting for it to
// fill; past it the flow is dropped (with a problem).
inline constexpr size_t kMaxHeldBytes = size_t{1} << 20;

// One direction's bytes in sequence order from its first byte: bytes seen
// before are dropped, bytes past a gap held (views, at most kMaxHeldBytes)
// until the gap fills. Positions are unwrapped around the next byte due.
class InOrderBytes {
 public:
  enum class Took : uint8_t { kFed, kHeld, kOld, kOverflow };

  [[nodiscard]] bool started() const noexcept { return started_; }
  void start(uint32_t first_seq) noexcept {
    stop();
    started_ = true;
    next_seq_ = first_seq;
  }
  void stop() noexcept { *this = InOrderBytes{}; }
  void fin_at(uint32_t seq) noexcept { fin_ = offset(seq); }
  [[nodiscard]] bool finished() const noexcept { return next_ >= fin_; }
  [[nodiscard]] size_t held_bytes() const noexcept { return held_bytes_; }
  [[nodiscard]] PacketAt first_held() const noexcept { return held_.empty() ? PacketAt{} : held_.begin()->second.packet; }

  // Hands `sink` the bytes of this segment that are next in order, and any
  // held ones they let through.
  template <class Sink>
  Took take(uint32_t seq, std::span<const uint8_t> bytes, PacketAt packet, Sink&& sink) {
    const uint64_t at = offset(seq);
    if (bytes.empty() || at + bytes.size() <= next_) return Took::kOld;
    if (at > next_) return hold(at, bytes, packet);
    deliver(at, bytes, sink);
    while (!held_.empty() && held_.begin()->first <= next_) {
      auto node = held_.extract(held_.begin());
      held_bytes_ -= node.mapped().bytes.size();
      deliver(node.key(), node.mapped().bytes, sink);
    }
    return Took::kFed;
  }

 private:
  static constexpr uint64_t kBase = uint64_t{1} << 32;  // room below for old sequence numbers
  struct Held {
    std::span<const uint8_t> bytes;
    PacketAt packet;
  };

  [[nodiscard]] uint64_t offset(uint32_t seq) const noexcept {
    return next_ + static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(seq - next_seq_)));
  }
  Took hold(uint64_t at, std::span<const uint8_t> bytes, PacketAt packet) {
    const auto it = held_.find(at);
    const size_t before = it == held_.end() ? 0 : it->second.bytes.size();
    if (bytes.size() <= before) return Took::kHeld;  // a repeat of what is held
    if (held_bytes_ - before + bytes.size() > kMaxHeldBytes) return Took::kOverflow;
    held_bytes_ += bytes.size() - before;
    held_[at] = Held{bytes, packet};
    return Took::kHeld;
  }
  template <class Sink>
  void deliver(uint64_t at, std::span<const uint8_t> bytes, Sink& sink) {
    if (at + bytes.size() <= next_) return;
    const std::span<const uint8_t> fresh = bytes.subspan(next_ - at);
    next_ += fresh.size();
    next_seq_ += static_cast<uint32_t>(fresh.size());
    sink(fresh);
  }

  bool started_ = false;
  uint32_t next_seq_ = 0;
  uint64_t next_ = kBase;
  uint64_t fin_ = ~uint64_t{0};
  std::map<uint64_t, Held> held_;
  size_t held_bytes_ = 0;
};

// Replays one flow (every connection on its 4-tuple, in time order across
// the files).
// `buffers` are (re)sized to the policy's limits here.
void replay_flow(std::span<const FlowSegment> segments, const dataplane::FlowKey& key, const FlowContext& context,
                 StreamBuffers& buffers, FlowOutput& out);

}  // namespace sluice::replay

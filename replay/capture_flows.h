// A capture's TCP flows to service ports put back together: each flow's
// segments (in capture order) reassembled in both directions, the client's
// bytes cut into requests by http::RequestStream and the origin's into
// responses by http::ResponseStream, as the data plane's request and
// response paths do, so heads are cut where the appliance cuts them and each
// response's reported tokens (DQ05) land on the request they answer.
// InOrderBytes puts one direction back in sequence order. read_capture
// (capture_input.h) walks the packets and replays the flows in parallel; one
// flow is replayed by one thread, start to end.
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

// One TCP segment of a service-port flow, as reassembly needs it.
struct FlowSegment {
  std::span<const uint8_t> payload;  // in the file image
  time::Nanos at = 0;                // the packet's time
  uint64_t number = 0;               // the packet's number
  uint32_t seq = 0;
  uint32_t ack = 0;
  uint8_t flags = 0;  // dataplane::tcp_flag
  bool from_client = false;
};

// What one flow gave: its records in stream order, and its problems.
struct FlowOutput {
  std::vector<RequestRecord> records;
  std::vector<CaptureProblem> problems;
};

// The parser buffers a request stream borrows (one set per thread).
struct StreamBuffers {
  std::vector<http::FieldLine> fields;
  std::vector<char> spill;
};

// What every flow of one capture shares.
struct FlowContext {
  const CaptureOptions& options;
  const http::FieldSet& fields;  // options.fields, or the built-in names
  const std::string& name;       // the file, for problems
  uint32_t input = 0;
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
  [[nodiscard]] uint64_t first_held_packet() const noexcept { return held_.empty() ? 0 : held_.begin()->second.number; }

  // Hands `sink` the bytes of this segment that are next in order, and any
  // held ones they let through.
  template <class Sink>
  Took take(uint32_t seq, std::span<const uint8_t> bytes, uint64_t number, Sink&& sink) {
    const uint64_t at = offset(seq);
    if (bytes.empty() || at + bytes.size() <= next_) return Took::kOld;
    if (at > next_) return hold(at, bytes, number);
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
    uint64_t number;
  };

  [[nodiscard]] uint64_t offset(uint32_t seq) const noexcept {
    return next_ + static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(seq - next_seq_)));
  }
  Took hold(uint64_t at, std::span<const uint8_t> bytes, uint64_t number) {
    const auto it = held_.find(at);
    const size_t before = it == held_.end() ? 0 : it->second.bytes.size();
    if (bytes.size() <= before) return Took::kHeld;  // a repeat of what is held
    if (held_bytes_ - before + bytes.size() > kMaxHeldBytes) return Took::kOverflow;
    held_bytes_ += bytes.size() - before;
    held_[at] = Held{bytes, number};
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

// Replays one flow (every connection on its 4-tuple, in capture order).
// `buffers` are (re)sized to the policy's limits here.
void replay_flow(std::span<const FlowSegment> segments, const dataplane::FlowKey& key, const FlowContext& context,
                 StreamBuffers& buffers, FlowOutput& out);

}  // namespace sluice::replay

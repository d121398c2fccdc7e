// A capture's TCP flows to service ports put back together: each flow's
// segments (in capture order) reassembled in both directions, the client's
// bytes cut into requests by http::RequestStream and the origin's into
// responses by http::ResponseStream, as the data plane's request and
// response paths do, so heads are cut where the appliance cuts them, and
// each response's end (with the tokens it reported, DQ05) is a record of its
// own naming the request it answers. InOrderBytes puts one direction back in
// sequence order. CaptureStream (capture_input.h) feeds every flow its
// segments as the merged packet stream reaches them, one packet at a time:
// nothing of a packet is kept past its turn but the bytes a flow must hold
// (after a gap, a head split across segments, requests waiting for
// responses), which the flow copies.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "dataplane/flow_key.h"
#include "http/request_head.h"
#include "http/request_stream.h"
#include "http/response_stream.h"
#include "replay/capture_file.h"
#include "replay/capture_input.h"

namespace sluice::replay {

// A packet among the files read together: which file (its place in the
// list the stream was given) and its number there. Problems and records
// name the file the packet came from, not the flow's first.
struct PacketAt {
  uint32_t file = 0;
  uint64_t number = 0;
};

// One TCP segment of a service-port flow, as reassembly needs it. The
// payload is valid only while the segment is being replayed.
struct FlowSegment {
  std::span<const uint8_t> payload;
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

// What the flows gave, in the order it was completed (packet order):
// records (heads and response ends) and problems. The stream moves them
// out after every packet.
struct FlowOutput {
  std::vector<RequestRecord> records;
  std::vector<FlowProblem> problems;
  uint64_t connections = 0;  // numbers given out (RequestRecord::connection)
  uint64_t requests = 0;     // numbers given out (RequestRecord::response)
};

// The parser buffers a request stream is built on: fields and spill, and a
// copy of a head that goes on past its segment.
struct ParseBuffers {
  std::vector<http::FieldLine> fields;
  std::vector<char> spill;
  std::vector<char> head;
};

// What every flow of the captures read together shares.
struct FlowContext {
  const CaptureOptions& options;
  const http::FieldSet& fields;        // options.fields, or the built-in names
  std::span<const CaptureFile> files;  // FlowSegment::file indexes these: names for problems, inputs for records
  FlowOutput& out;
  // Heads parsed within one segment use the shared buffers; a head that goes
  // on past its segment borrows a set of its own (from `free`) until its
  // message ends, as the data plane lends its parse contexts.
  ParseBuffers& shared;
  std::vector<std::unique_ptr<ParseBuffers>>& free;
};

// Bytes one direction of a flow may hold after a gap, waiting for it to
// fill; past it the flow is dropped (with a problem).
inline constexpr size_t kMaxHeldBytes = size_t{1} << 20;

// One direction's bytes in sequence order from its first byte: bytes seen
// before are dropped, bytes past a gap held (copied, at most kMaxHeldBytes)
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
      deliver(node.key(), std::span<const uint8_t>(node.mapped().bytes), sink);
    }
    return Took::kFed;
  }

 private:
  static constexpr uint64_t kBase = uint64_t{1} << 32;  // room below for old sequence numbers
  struct Held {
    std::vector<uint8_t> bytes;
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
    held_[at] = Held{{bytes.begin(), bytes.end()}, packet};
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

enum class FlowTimeout : uint8_t { kHalfOpen, kIdle, kClosed };

// Every connection on one 4-tuple, one segment at a time in time order.
class FlowReplay {
 public:
  FlowReplay(const dataplane::FlowKey& key, FlowContext& c);
  ~FlowReplay();
  FlowReplay(const FlowReplay&) = delete;
  FlowReplay& operator=(const FlowReplay&) = delete;

  void segment(const FlowSegment& s);
  // The flow is forgotten (its time is up, or the capture ended) at `at`:
  // what is still held after a gap never filled is reported, and the
  // requests still waiting for a response end there.
  void finish(time::Nanos at);
  // How long the flow may go without a segment before the appliance's flow
  // table forgets it (dataplane/flow_table.h's FlowTimeouts).
  [[nodiscard]] FlowTimeout timeout() const noexcept;
  [[nodiscard]] time::Nanos last_at() const noexcept { return last_at_; }

 private:
  enum class Client : uint8_t { kParsing, kParked, kStopped };

  void take_segment(const FlowSegment& s);
  void restart();
  void client_syn(const FlowSegment& s);
  void client_segment(const FlowSegment& s);
  void origin_segment(const FlowSegment& s);
  template <class Sink>
  void take(InOrderBytes& side, const FlowSegment& s, const char* who, Sink&& sink);
  void feed_requests(std::span<const char> bytes);
  // The stream's first bytes: a PROXY protocol header, taken off and noted,
  // or none (everything goes to the request parser).
  void read_relay(std::span<const char> bytes);
  void parse_requests(std::span<const char> bytes);
  // A head goes on past this segment: it moves to buffers of its own.
  void hold_head();
  void release_head_buffers();
  void build_stream(ParseBuffers& b);
  // A head the parser refuses: recorded, and the client's side read no more.
  void refuse(http::ParseError e);
  void park(std::span<const char> bytes);
  void resume_requests();
  void on_head();
  void record(http::ParseError error);
  // A record of this connection's, appended to the output.
  RequestRecord& emit(RequestRecord::Kind kind, time::Nanos at, PacketAt where);
  void feed_responses(std::span<const char> bytes);
  void on_response_end();
  // A response that will not come (the connection ended, its framing was
  // lost): the request's wait ends at `at`, without usage.
  void end_waits(time::Nanos at);
  void end_wait(uint64_t request, time::Nanos at, PacketAt where, const http::ResponseHead* head);
  void stop_framing(http::ResponseError e);
  // The connection is over: a record says so, if it carried requests.
  void end_connection(time::Nanos at);
  // What is still held after a gap never filled, said.
  void report_held();
  void problem(PacketAt packet, const std::string& message);

  FlowContext& c_;
  dataplane::FlowKey key_;
  limiter::ConnectionFacts conn_;
  std::unique_ptr<http::RequestStream> requests_;  // on c_.shared, or on own_
  std::unique_ptr<ParseBuffers> own_;            // a head split across segments: its copy and parser buffers
  size_t own_len_ = 0;                           // bytes of the head in own_->head
  http::ResponseStream responses_;
  InOrderBytes client_, origin_;
  const FlowSegment* now_ = nullptr;  // the packet being replayed: what completes a head or response
  time::Nanos last_at_ = 0;
  PacketAt last_where_;  // the last segment's packet: where a wait that ends with no packet of its own is said to end
  uint32_t isn_ = 0;
  // Until the first bytes show whether a PROXY header begins the stream:
  // what came so far (at most net::kMaxProxyHeader).
  bool at_start_ = true;
  std::string start_;
  RequestRecord::Relay relay_ = RequestRecord::Relay::kNone;
  uint8_t relay_version_ = 0;
  net::IpAddress relayed_{};
  bool over_ = false;  // reset, or dropped: only a new SYN starts the tuple again
  bool client_fin_ = false, origin_fin_ = false;
  bool any_bytes_ = false;  // a payload byte was taken: the connection is past its handshake
  Client client_state_ = Client::kParsing;
  bool in_head_ = true;
  std::string head_;  // the head's bytes as fed so far
  std::string parked_;  // client bytes waiting (a switch, or 32 unanswered requests), copied
  bool framing_ = true;  // the responses are still framed
  bool answered_and_closed_ = false;  // a head the parser refused: the appliance answered it and closed
  uint64_t connection_ = 0;  // this connection's number (FlowOutput::connections)
  bool carried_requests_ = false;  // a record names connection_
  bool origin_closed_ = false;
  std::deque<uint64_t> awaiting_;  // RequestRecord::response of the requests whose responses are due
};

}  // namespace sluice::replay

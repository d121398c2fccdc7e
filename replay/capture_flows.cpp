// Flow reassembly and read_captures: each file's packets walked in
// parallel, the files' segments merged by time and grouped by 4-tuple across
// files (a connection may be split between them by direction or by time),
// and each flow replayed (in parallel across flows) through the limiter's
// request and response streams, fed as dataplane/request_path.cpp and
// response_path.cpp feed them. Payloads stay views into the mapped files:
// nothing is copied but the heads the records own.
#include "replay/capture_flows.h"


#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <deque>
#include <iterator>
#include <unordered_map>

#include "dataplane/flow_adopter.h"
#include "http/response_stream.h"
#include "net/proxy_header.h"

namespace sluice::replay {
namespace {

namespace flag = dataplane::tcp_flag;

std::span<const char> as_chars(std::span<const uint8_t> b) noexcept {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

std::string endpoint(const net::IpAddress& a, uint16_t port) {
  const std::string s = a.to_string();
  return (a.is_v4() ? s : "[" + s + "]") + ":" + std::to_string(port);
}

// Every connection on one 4-tuple, one segment at a time in time order.
class FlowReplay {
 public:
  FlowReplay(const dataplane::FlowKey& key, const FlowContext& c, StreamBuffers& b, FlowOutput& out)
      : c_(c),
        out_(out),
        key_(key),
        conn_{key.client, key.origin, key.origin_port},
        requests_(c.fields, c.options.stream, b.fields, b.spill) {
    if (c.options.usage_field.size() <= 32) responses_.set_usage_field(c.options.usage_field);
  }

  void segment(const FlowSegment& s);
  // A connection is over (a new one starts, or the capture ends): what is
  // still held after a gap never filled is reported.
  void finish();

 private:
  enum class Client : uint8_t { kParsing, kParked, kStopped };

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
  void park(std::span<const char> bytes);
  void resume_requests();
  void on_head();
  void record(http::ParseError error);
  void feed_responses(std::span<const char> bytes);
  void on_response_end();
  void stop_framing(http::ResponseError e);
  void problem(PacketAt packet, const std::string& message);

  const FlowContext& c_;
  FlowOutput& out_;
  dataplane::FlowKey key_;
  limiter::ConnectionFacts conn_;
  http::RequestStream requests_;
  http::ResponseStream responses_;
  InOrderBytes client_, origin_;
  const FlowSegment* now_ = nullptr;  // the packet being replayed: what completes a head or response
  uint32_t isn_ = 0;
  // Until the first bytes show whether a PROXY header begins the stream:
  // what came so far (at most net::kMaxProxyHeader).
  bool at_start_ = true;
  std::string start_;
  RequestRecord::Relay relay_ = RequestRecord::Relay::kNone;
  uint8_t relay_version_ = 0;
  net::IpAddress relayed_{};
  bool over_ = false;  // reset, or dropped: only a new SYN starts the tuple again
  Client client_state_ = Client::kParsing;
  bool in_head_ = true;
  std::string head_;  // the head's bytes as fed so far
  std::vector<std::span<const char>> parked_;  // client bytes waiting (a switch, or 32 unanswered requests)
  size_t parked_bytes_ = 0;
  bool framing_ = true;  // the responses are still framed
  bool answered_and_closed_ = false;  // a head the parser refused: the appliance answered it and closed
  uint64_t connection_ = 1;  // which connection on this 4-tuple (a new SYN after the last starts another)
  bool origin_closed_ = false;
  std::deque<size_t> awaiting_;  // out_.records indices of the requests whose responses are due
};

void FlowReplay::segment(const FlowSegment& s) {
  now_ = &s;
  if ((s.flags & flag::kRst) != 0) {
    if (client_.started()) over_ = true;
    return;
  }
  if ((s.flags & flag::kSyn) != 0) {
    if (s.from_client && (s.flags & flag::kAck) == 0) client_syn(s);
    if (!s.from_client && !origin_.started() && !over_) origin_.start(s.seq + 1);
    return;
  }
  if (over_) return;
  if (s.from_client) {
    client_segment(s);
  } else {
    origin_segment(s);
  }
}

void FlowReplay::client_syn(const FlowSegment& s) {
  const bool known = client_.started() || over_;
  if (known && !over_ && s.seq == isn_) return;  // the SYN again
  if (known) restart();
  isn_ = s.seq;
  client_.start(s.seq + 1);
  at_start_ = true;
}

void FlowReplay::restart() {
  finish();
  requests_.reset();
  responses_.reset();
  client_.stop();
  origin_.stop();
  over_ = false;
  client_state_ = Client::kParsing;
  in_head_ = true;
  head_.clear();
  parked_.clear();
  parked_bytes_ = 0;
  framing_ = true;
  answered_and_closed_ = false;
  origin_closed_ = false;
  awaiting_.clear();
  at_start_ = false;  // a SYN starts it again
  start_.clear();
  relay_ = RequestRecord::Relay::kNone;
  ++connection_;
}

void FlowReplay::client_segment(const FlowSegment& s) {
  if (!client_.started()) {
    // No SYN: adopted, as the appliance adopts, at a segment that begins a request.
    if (s.payload.empty() || !dataplane::FlowAdopter::begins_request(s.payload)) return;
    client_.start(s.seq);
    at_start_ = false;  // mid-stream: whatever header there was is gone
  }
  // Without the SYN-ACK, the client's acknowledgement says where the origin's stream stands.
  if (!origin_.started() && (s.flags & flag::kAck) != 0) origin_.start(s.ack);
  take(client_, s, "client", [this](std::span<const uint8_t> b) { feed_requests(as_chars(b)); });
}

void FlowReplay::origin_segment(const FlowSegment& s) {
  if (!origin_.started()) {
    if (s.payload.empty() || !client_.started()) return;
    origin_.start(s.seq);
  }
  if ((s.flags & flag::kFin) != 0) origin_.fin_at(s.seq + static_cast<uint32_t>(s.payload.size()));
  take(origin_, s, "origin", [this](std::span<const uint8_t> b) { feed_responses(as_chars(b)); });
  if (!origin_closed_ && origin_.finished()) {
    origin_closed_ = true;
    if (!framing_) return;
    const http::ResponseStep st = responses_.close();
    if (st.event == http::ResponseEvent::kResponseEnd) on_response_end();
    if (st.event == http::ResponseEvent::kError) stop_framing(st.error);
  }
}

template <class Sink>
void FlowReplay::take(InOrderBytes& side, const FlowSegment& s, const char* who, Sink&& sink) {
  if (side.take(s.seq, s.payload, s.where(), sink) != InOrderBytes::Took::kOverflow) return;
  problem(s.where(), std::string("more than 1 MiB of the ") + who + "'s stream held after a gap: the rest of the connection is dropped");
  client_.stop();
  origin_.stop();
  over_ = true;
}

void FlowReplay::read_relay(std::span<const char> bytes) {
  const size_t taken = std::min(bytes.size(), net::kMaxProxyHeader + 1 - start_.size());
  start_.append(bytes.data(), taken);
  const net::ProxyHeader h = net::read_proxy_header({start_.data(), start_.size()});
  if (h.status == net::ProxyHeader::Status::kIncomplete && start_.size() <= net::kMaxProxyHeader) return;
  at_start_ = false;
  const std::span<const char> rest = bytes.subspan(taken);  // what the buffer did not take goes on after it
  size_t skip = 0;
  if (h.status == net::ProxyHeader::Status::kRelayed || h.status == net::ProxyHeader::Status::kLocal) {
    relay_ = h.status == net::ProxyHeader::Status::kRelayed ? RequestRecord::Relay::kRelayed : RequestRecord::Relay::kLocal;
    relay_version_ = h.version;
    relayed_ = h.source;
    skip = h.length;
  }
  // start_ lives as long as the connection: the parser may hold views into it.
  if (skip < start_.size()) feed_requests({start_.data() + skip, start_.size() - skip});
  if (!rest.empty()) feed_requests(rest);
}

void FlowReplay::feed_requests(std::span<const char> bytes) {
  if (at_start_) return read_relay(bytes);
  if (client_state_ == Client::kParsing) {
    parse_requests(bytes);
  } else if (client_state_ == Client::kParked) {
    park(bytes);
  }
}

// RequestPath::parse's loop: until the stream needs more bytes, or stops.
void FlowReplay::parse_requests(std::span<const char> bytes) {
  for (;;) {
    if (requests_.idle() && framing_ && responses_.outstanding() >= http::ResponseStream::kMaxOutstanding) {
      return park(bytes);  // the appliance holds the next request back until a response ends
    }
    const http::StreamStep st = requests_.next(bytes);
    if (in_head_) head_.append(bytes.data(), st.consumed);
    bytes = bytes.subspan(st.consumed);
    switch (st.event) {
      case http::StreamEvent::kNeedMore: return;
      case http::StreamEvent::kHead: on_head(); continue;
      case http::StreamEvent::kMessageEnd:
        in_head_ = true;
        head_.clear();
        continue;
      case http::StreamEvent::kAwaitSwitch: return park(bytes);
      case http::StreamEvent::kPassThrough: client_state_ = Client::kStopped; return;
      case http::StreamEvent::kError:
        // The appliance answers (400, 431, 501, 505) and closes: that
        // answer, after the responses still owed, is not the origin's.
        record(st.error);
        client_state_ = Client::kStopped;
        answered_and_closed_ = true;
        return;
    }
  }
}

void FlowReplay::park(std::span<const char> bytes) {
  client_state_ = Client::kParked;
  if (bytes.empty()) return;
  if (parked_bytes_ + bytes.size() > kMaxHeldBytes) {
    problem(now_->where(), "more than 1 MiB of the client's stream waiting for responses: its requests are not read any more");
    client_state_ = Client::kStopped;
    return;
  }
  parked_.push_back(bytes);
  parked_bytes_ += bytes.size();
}

void FlowReplay::resume_requests() {
  if (client_state_ != Client::kParked) return;
  client_state_ = Client::kParsing;
  std::vector<std::span<const char>> pieces;
  pieces.swap(parked_);
  parked_bytes_ = 0;
  for (const std::span<const char> piece : pieces) feed_requests(piece);  // parks again, in order, if need be
}

void FlowReplay::on_head() {
  in_head_ = false;
  if (framing_ && responses_.expect(http::request_kind(requests_.head()))) awaiting_.push_back(out_.records.size());
  record(http::ParseError::kNone);
  head_.clear();
}

void FlowReplay::record(http::ParseError error) {
  const uint32_t input = c_.files[now_->file].input;
  RequestRecord& r = out_.records.emplace_back();
  out_.record_files.push_back(now_->file);
  r.at = now_->at;
  r.order = record_order(input, now_->number);
  r.conn = conn_;
  if (error == http::ParseError::kNone) r.head = head_;
  r.parse_error = error;
  r.input = input;
  r.record_number = now_->number;
  r.connection = connection_;  // made unique across the files by merge()
  r.relay = relay_;
  r.relay_version = relay_version_;
  r.relayed = relayed_;
}

void FlowReplay::feed_responses(std::span<const char> bytes) {
  while (framing_) {
    const http::ResponseStep st = responses_.next(bytes);
    bytes = bytes.subspan(st.consumed);
    switch (st.event) {
      case http::ResponseEvent::kNeedMore: return;
      case http::ResponseEvent::kStatusLine:
      case http::ResponseEvent::kHead: continue;
      case http::ResponseEvent::kResponseEnd: on_response_end(); continue;
      case http::ResponseEvent::kPassThrough:
        // 101 to an Upgrade, 2xx to a CONNECT: neither side is HTTP any more.
        framing_ = false;
        requests_.resolve_switch(true);
        client_state_ = Client::kStopped;
        return;
      case http::ResponseEvent::kError: stop_framing(st.error); return;
    }
  }
}

void FlowReplay::on_response_end() {
  if (!awaiting_.empty()) {
    RequestRecord& r = out_.records[awaiting_.front()];
    awaiting_.pop_front();
    const http::ResponseHead& h = responses_.head();
    if (h.has_usage) {
      r.has_usage = true;
      r.usage_tokens = h.usage;
      r.usage_at = now_->at;
    }
  }
  // ResponsePath::response_end: an Upgrade or CONNECT answered without a switch.
  if (responses_.outstanding() == 0) requests_.resolve_switch(false);
  resume_requests();
}

void FlowReplay::stop_framing(http::ResponseError e) {
  if (answered_and_closed_ && e == http::ResponseError::kUnsolicited) {  // the appliance's own answer
    framing_ = false;
    return;
  }
  problem(now_->where(), "a response that cannot be framed (" + std::string(http::to_string(e)) +
                            "): the connection's later responses are not read");
  framing_ = false;
  awaiting_.clear();
  resume_requests();
}

void FlowReplay::finish() {
  for (const auto& [side, who] : {std::pair<const InOrderBytes*, const char*>{&client_, "client"}, {&origin_, "origin"}}) {
    if (side->held_bytes() == 0) continue;
    problem(side->first_held(), std::to_string(side->held_bytes()) + " bytes of the " + who +
                                           "'s stream after a gap the capture does not fill: not read");
  }
}

void FlowReplay::problem(PacketAt packet, const std::string& message) {
  out_.problems.push_back({packet.file,
                           {packet.number, {c_.files[packet.file].path + ": packet " + std::to_string(packet.number),
                                            "flow " + endpoint(key_.client, key_.client_port) + " -> " +
                                                endpoint(key_.origin, key_.origin_port) + ": " + message}}});
}

// ---- read_captures' passes ----------------------------------------------------------

enum class Walk : uint8_t { kOther, kSegment, kMalformed, kFragment, kUnsupportedLink };

struct WalkedPacket {
  FlowSegment segment;
  dataplane::FlowKey key;
  Walk walk = Walk::kOther;
};

WalkedPacket walk_one(const CapturedPacket& p, const std::bitset<65536>& ports, std::vector<uint8_t>& scratch) {
  WalkedPacket w;
  const PacketFrame f = walk_packet(p, scratch);
  const dataplane::FrameView& v = f.view;
  const bool ours = (v.kind == dataplane::FrameKind::kTcp || v.kind == dataplane::FrameKind::kTcpFragment) &&
                    (ports.test(v.dport) || ports.test(v.sport));
  if (!f.link_supported) w.walk = Walk::kUnsupportedLink;
  if (v.kind == dataplane::FrameKind::kMalformed) w.walk = Walk::kMalformed;
  if (!ours) return w;
  if (v.kind == dataplane::FrameKind::kTcpFragment) {
    w.walk = Walk::kFragment;
    return w;
  }
  // The client is the side that sends to the service port.
  const bool from_client = ports.test(v.dport);
  w.key = from_client ? dataplane::FlowKey{v.src, v.dst, v.sport, v.dport} : dataplane::FlowKey{v.dst, v.src, v.dport, v.sport};
  w.segment = {.payload = f.payload, .at = p.at, .number = p.number, .seq = v.seq, .ack = v.ack, .flags = v.flags,
               .from_client = from_client};
  w.walk = Walk::kSegment;
  return w;
}

struct KeyHash {
  size_t operator()(const dataplane::FlowKey& k) const noexcept { return dataplane::flow_hash(k); }
};

// The service-port segments grouped by flow (each flow's in time order,
// flows contiguous).
struct Flows {
  std::vector<FlowSegment> segments;
  std::vector<size_t> begin;  // flow f is segments[begin[f], begin[f + 1])
  std::vector<dataplane::FlowKey> keys;
};

void walk_problem(const CapturedPacket& p, Walk walk, const std::string& name, std::vector<uint32_t>& links,
                  std::vector<CaptureProblem>& problems) {
  std::string message;
  if (walk == Walk::kMalformed) {
    message = "headers that do not parse (the appliance drops such a frame)";
    if (p.data.size() < p.original_length) {
      message += ": only " + std::to_string(p.data.size()) + " of its " + std::to_string(p.original_length) +
                 " bytes were captured";
    }
  } else if (walk == Walk::kFragment) {
    message = "a fragment of a TCP segment to a service port: not reassembled";
  } else if (walk == Walk::kUnsupportedLink && std::find(links.begin(), links.end(), p.link_type) == links.end()) {
    links.push_back(p.link_type);
    message = "link type " + std::to_string(p.link_type) + " is not read (Ethernet, Linux cooked, raw IP, loopback are): "
              "its packets are skipped";
  }
  if (!message.empty()) problems.push_back({p.number, {name + ": packet " + std::to_string(p.number), std::move(message)}});
}

// The service-port segments of every file, each file's in its own packet
// order, one file after another; each segment's flow key beside it.
struct Walked {
  std::vector<FlowSegment> segments;
  std::vector<dataplane::FlowKey> keys;
  std::vector<size_t> file_begin{0};  // the files' runs: [file_begin[i], file_begin[i + 1])
};

void walk_file(const CaptureIndex& index, uint32_t file, const CaptureOptions& options, const std::string& name,
               Walked& all, std::vector<CaptureProblem>& problems) {
  std::vector<WalkedPacket> walked(index.packets.size());
  tbb::enumerable_thread_specific<std::vector<uint8_t>> scratch;
  tbb::parallel_for(tbb::blocked_range<size_t>(0, walked.size(), 1024), [&](const tbb::blocked_range<size_t>& r) {
    std::vector<uint8_t>& s = scratch.local();
    for (size_t i = r.begin(); i != r.end(); ++i) walked[i] = walk_one(index.packets[i], options.service_ports, s);
  });
  // Room for this file's segments, growing geometrically: ring buffers come
  // as many files, and an exact reserve per file would copy the whole list
  // each time.
  const size_t needed = all.segments.size() + static_cast<size_t>(std::count_if(
                                                  walked.begin(), walked.end(), [](const WalkedPacket& w) { return w.walk == Walk::kSegment; }));
  if (needed > all.segments.capacity()) {
    all.segments.reserve(std::max(needed, 2 * all.segments.capacity()));
    all.keys.reserve(all.segments.capacity());
  }
  std::vector<uint32_t> links;
  for (size_t i = 0; i < walked.size(); ++i) {
    if (walked[i].walk != Walk::kSegment) {
      walk_problem(index.packets[i], walked[i].walk, name, links, problems);
      continue;
    }
    all.segments.push_back(walked[i].segment);
    all.segments.back().file = file;
    all.keys.push_back(walked[i].key);
  }
  all.file_begin.push_back(all.segments.size());
}

// Visits the walked segments' positions in time order: a k-way merge of the
// files' runs, ties to the file given first, so each file's own order stands
// (a file whose clock steps back is read as it was written) and one file is
// read exactly in capture order.
template <class Visit>
void in_time_order(const Walked& all, Visit&& visit) {
  struct Head {
    time::Nanos at;
    uint32_t file;
    size_t at_position;
  };
  std::vector<Head> heads;
  for (uint32_t f = 0; f + 1 < all.file_begin.size(); ++f) {
    if (all.file_begin[f] != all.file_begin[f + 1]) heads.push_back({all.segments[all.file_begin[f]].at, f, all.file_begin[f]});
  }
  if (heads.size() <= 1) {  // nothing to merge
    for (size_t i = 0; i < all.segments.size(); ++i) visit(i);
    return;
  }
  const auto later = [](const Head& a, const Head& b) { return a.at != b.at ? a.at > b.at : a.file > b.file; };
  std::make_heap(heads.begin(), heads.end(), later);
  while (!heads.empty()) {
    std::pop_heap(heads.begin(), heads.end(), later);
    Head& h = heads.back();
    visit(h.at_position);
    if (++h.at_position == all.file_begin[h.file + 1]) {
      heads.pop_back();
      continue;
    }
    h.at = all.segments[h.at_position].at;
    std::push_heap(heads.begin(), heads.end(), later);
  }
}

// The segments grouped by flow across the files, each flow's in time order,
// flows numbered as they first appear.
Flows group_flows(const Walked& all) {
  Flows flows;
  std::unordered_map<dataplane::FlowKey, uint32_t, KeyHash> ids;
  std::vector<uint32_t> flow_of(all.segments.size());
  std::vector<size_t> count;
  in_time_order(all, [&](size_t i) {
    const auto [it, fresh] = ids.try_emplace(all.keys[i], static_cast<uint32_t>(flows.keys.size()));
    if (fresh) {
      flows.keys.push_back(all.keys[i]);
      count.push_back(0);
    }
    flow_of[i] = it->second;
    ++count[it->second];
  });
  // Counting sort: each flow's segments together, in time order.
  flows.begin.assign(count.size() + 1, 0);
  for (size_t f = 0; f < count.size(); ++f) flows.begin[f + 1] = flows.begin[f] + count[f];
  flows.segments.resize(flows.begin.back());
  std::vector<size_t> next(flows.begin.begin(), flows.begin.end() - 1);
  in_time_order(all, [&](size_t i) { flows.segments[next[flow_of[i]]++] = all.segments[i]; });
  return flows;
}

// Each flow's records moved to the result of the file that completed them
// (in parallel: every record's place is counted first), and every file's
// problems in its packet order. Connections are numbered across all the
// files, under the first file's input.
void merge(std::vector<FlowOutput>& outputs, std::vector<std::vector<CaptureProblem>>& problems,
           std::span<const CaptureFile> files, std::vector<InputResult>& results) {
  std::vector<size_t> at(outputs.size() + 1, 0);
  for (size_t f = 0; f < outputs.size(); ++f) {
    at[f + 1] = at[f] + outputs[f].records.size();
    for (FlowProblem& p : outputs[f].problems) problems[p.file].push_back(std::move(p.problem));
  }
  std::vector<size_t> slot(at.back());
  std::vector<size_t> count(files.size(), 0);
  for (size_t f = 0; f < outputs.size(); ++f) {
    for (size_t j = 0; j < outputs[f].record_files.size(); ++j) slot[at[f] + j] = count[outputs[f].record_files[j]]++;
  }
  for (size_t i = 0; i < files.size(); ++i) results[i].records.resize(count[i]);
  const uint32_t space = files.front().input;
  tbb::parallel_for(tbb::blocked_range<size_t>(0, outputs.size()), [&](const tbb::blocked_range<size_t>& r) {
    for (size_t f = r.begin(); f != r.end(); ++f) {
      FlowOutput& out = outputs[f];
      for (size_t j = 0; j < out.records.size(); ++j) {
        RequestRecord& rec = out.records[j];
        // The flow's number (24 bits) and its connection on that 4-tuple (16).
        rec.connection = record_order(space, ((f + 1) & 0xffffff) | ((rec.connection & 0xffff) << 24));
        results[out.record_files[j]].records[slot[at[f] + j]] = std::move(rec);
      }
      out = FlowOutput{};
    }
  });
  for (size_t i = 0; i < files.size(); ++i) {
    std::stable_sort(problems[i].begin(), problems[i].end(),
                     [](const CaptureProblem& a, const CaptureProblem& b) { return a.packet < b.packet; });
    for (CaptureProblem& p : problems[i]) results[i].problem(std::move(p.problem.where), std::move(p.problem.message));
  }
}

}  // namespace

void replay_flow(std::span<const FlowSegment> segments, const dataplane::FlowKey& key, const FlowContext& context,
                 StreamBuffers& buffers, FlowOutput& out) {
  buffers.fields.resize(context.options.stream.head.max_fields);
  buffers.spill.resize(context.options.stream.head.max_head_bytes);
  FlowReplay flow(key, context, buffers, out);
  for (const FlowSegment& s : segments) flow.segment(s);
  flow.finish();
}

std::vector<InputResult> read_captures(std::span<const CaptureFile> files, const CaptureOptions& options) {
  std::vector<InputResult> results(files.size());
  if (files.empty()) return results;
  // The images outlive the replay: every segment's payload is a view into one.
  std::vector<FileImage> images;
  images.reserve(files.size());
  std::vector<std::vector<CaptureProblem>> problems(files.size());
  Walked all;
  for (uint32_t i = 0; i < files.size(); ++i) {
    const std::string& path = files[i].path;
    InputResult& result = results[i];
    std::string error;
    std::optional<FileImage> image = FileImage::open(path, error);
    if (!image) {
      result.fatal = true;
      result.problem(path, error);
      all.file_begin.push_back(all.segments.size());
      continue;
    }
    CaptureIndex index = index_capture(image->bytes(), path);
    result.units_read = index.packet_count;
    if (index.fatal) {
      result.fatal = true;
      result.problem(std::move(index.fatal->where), std::move(index.fatal->message));
      all.file_begin.push_back(all.segments.size());
      continue;
    }
    problems[i] = std::move(index.problems);
    walk_file(index, i, options, path, all, problems[i]);
    images.push_back(std::move(*image));
  }
  Flows flows = group_flows(all);
  all = Walked{};  // the flows' segments hold all that is needed now

  const http::FieldSet builtin;
  const FlowContext context{options, options.fields != nullptr ? *options.fields : builtin, files};
  std::vector<FlowOutput> outputs(flows.keys.size());
  tbb::enumerable_thread_specific<StreamBuffers> buffers;
  tbb::parallel_for(tbb::blocked_range<size_t>(0, outputs.size()), [&](const tbb::blocked_range<size_t>& r) {
    StreamBuffers& b = buffers.local();
    for (size_t f = r.begin(); f != r.end(); ++f) {
      const std::span<const FlowSegment> mine(flows.segments.data() + flows.begin[f], flows.begin[f + 1] - flows.begin[f]);
      replay_flow(mine, flows.keys[f], context, b, outputs[f]);
    }
  });
  merge(outputs, problems, files, results);
  return results;
}

InputResult read_capture(const std::string& path, uint32_t input, const CaptureOptions& options) {
  const CaptureFile file{path, input};
  return std::move(read_captures({&file, 1}, options).front());
}

}  // namespace sluice::replay

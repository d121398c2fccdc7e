// Flow reassembly: each segment of a flow, as the merged packet stream
// reaches it, put in order in its direction and fed to the limiter's
// request and response streams as dataplane/request_path.cpp and
// response_path.cpp feed them. A segment's payload is the packet reader's
// until the next packet, so whatever a flow keeps past its segment (bytes
// after a gap, a head that goes on, requests waiting) it copies.
#include "replay/capture_flows.h"

#include <algorithm>
#include <cstring>

#include "dataplane/flow_adopter.h"
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

}  // namespace

FlowReplay::FlowReplay(const dataplane::FlowKey& key, FlowContext& c)
    : c_(c), key_(key), conn_{key.client, key.origin, key.origin_port}, connection_(++c.out.connections) {
  build_stream(c_.shared);
  if (c.options.usage_field.size() <= 32) responses_.set_usage_field(c.options.usage_field);
}

FlowReplay::~FlowReplay() { release_head_buffers(); }

void FlowReplay::build_stream(ParseBuffers& b) {
  requests_ = std::make_unique<http::RequestStream>(c_.fields, c_.options.stream, std::span<http::FieldLine>(b.fields),
                                                    std::span<char>(b.spill));
}

FlowTimeout FlowReplay::timeout() const noexcept {
  if (over_ || (client_fin_ && origin_fin_)) return FlowTimeout::kClosed;
  // Past its handshake (the origin answered, or data flowed), a connection
  // is established, however long before its first request.
  return any_bytes_ || origin_.started() ? FlowTimeout::kIdle : FlowTimeout::kHalfOpen;
}

void FlowReplay::segment(const FlowSegment& s) {
  now_ = &s;
  last_at_ = s.at;
  last_where_ = s.where();
  take_segment(s);
  now_ = nullptr;  // the segment is the reader's again
}

void FlowReplay::take_segment(const FlowSegment& s) {
  if ((s.flags & flag::kRst) != 0) {
    if (client_.started() && !over_) {
      over_ = true;
      end_waits(s.at);  // the appliance gives a reset connection's slots back
    }
    return;
  }
  if ((s.flags & flag::kSyn) != 0) {
    if (s.from_client && (s.flags & flag::kAck) == 0) client_syn(s);
    if (!s.from_client && !origin_.started() && !over_) origin_.start(s.seq + 1);
    return;
  }
  if (over_) return;
  if ((s.flags & flag::kFin) != 0) (s.from_client ? client_fin_ : origin_fin_) = true;
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
  report_held();
  end_waits(now_->at);
  end_connection(now_->at);
  release_head_buffers();
  requests_->reset();
  responses_.reset();
  client_.stop();
  origin_.stop();
  over_ = false;
  client_fin_ = origin_fin_ = false;
  any_bytes_ = false;
  client_state_ = Client::kParsing;
  in_head_ = true;
  head_.clear();
  parked_.clear();
  framing_ = true;
  answered_and_closed_ = false;
  origin_closed_ = false;
  at_start_ = false;  // a SYN starts it again
  start_.clear();
  relay_ = RequestRecord::Relay::kNone;
  connection_ = ++c_.out.connections;
}

void FlowReplay::client_segment(const FlowSegment& s) {
  if (!client_.started()) {
    // No SYN: adopted, as the appliance adopts, at a segment that begins a request.
    if (s.payload.empty() || !dataplane::FlowAdopter::begins_request(s.payload)) return;
    client_.start(s.seq);
    at_start_ = false;  // mid-stream: whatever header there was is gone
  }
  if (!s.payload.empty()) any_bytes_ = true;
  // Without the SYN-ACK, the client's acknowledgement says where the origin's stream stands.
  if (!origin_.started() && (s.flags & flag::kAck) != 0) origin_.start(s.ack);
  take(client_, s, "client", [this](std::span<const uint8_t> b) { feed_requests(as_chars(b)); });
}

void FlowReplay::origin_segment(const FlowSegment& s) {
  if (!origin_.started()) {
    if (s.payload.empty() || !client_.started()) return;
    origin_.start(s.seq);
  }
  if (!s.payload.empty()) any_bytes_ = true;
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
  end_waits(s.at);
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
  // start_ lives as long as the connection: a head begun in it is copied
  // (hold_head) before the segment ends like any other.
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
    if (requests_->idle() && framing_ && responses_.outstanding() >= http::ResponseStream::kMaxOutstanding) {
      return park(bytes);  // the appliance holds the next request back until a response ends
    }
    // A head that went on past an earlier segment is fed from its copy,
    // where the parser's views into it stay valid.
    std::span<const char> piece = bytes;
    const bool copied = own_ && in_head_;
    if (copied) {
      const size_t take = std::min(own_->head.size() - own_len_, bytes.size());
      std::memcpy(own_->head.data() + own_len_, bytes.data(), take);
      piece = {own_->head.data() + own_len_, take};
      own_len_ += take;
    }
    const http::StreamStep st = requests_->next(piece);
    if (copied) {
      own_len_ -= piece.size() - st.consumed;  // the copy keeps what the head took
    } else if (in_head_) {
      head_.append(piece.data(), st.consumed);
    }
    bytes = bytes.subspan(st.consumed);
    switch (st.event) {
      case http::StreamEvent::kNeedMore:
        if (copied && !bytes.empty()) return refuse(http::ParseError::kHeadTooLarge);  // past the copy's room
        if (!own_ && requests_->head_in_progress()) hold_head();
        return;
      case http::StreamEvent::kHead: on_head(); continue;
      case http::StreamEvent::kMessageEnd:
        in_head_ = true;
        head_.clear();
        own_len_ = 0;
        if (own_ && requests_->idle()) release_head_buffers();
        continue;
      case http::StreamEvent::kAwaitSwitch: return park(bytes);
      case http::StreamEvent::kPassThrough: client_state_ = Client::kStopped; return;
      case http::StreamEvent::kError: return refuse(st.error);
    }
  }
}

// As the data plane does with a head split across segments: the part so
// far is copied and fed again from the copy, on parser buffers of the
// flow's own (the shared ones are the next flow's), until its message ends.
void FlowReplay::hold_head() {
  if (c_.free.empty()) {
    auto b = std::make_unique<ParseBuffers>();
    b->fields.resize(c_.options.stream.head.max_fields);
    b->spill.resize(c_.options.stream.head.max_head_bytes);
    b->head.resize(size_t{c_.options.stream.head.max_head_bytes} + 1);  // one past: the parser says it is too large
    c_.free.push_back(std::move(b));
  }
  own_ = std::move(c_.free.back());
  c_.free.pop_back();
  auto moved = std::make_unique<http::RequestStream>(c_.fields, c_.options.stream, std::span<http::FieldLine>(own_->fields),
                                                     std::span<char>(own_->spill));
  (void)moved->carry_on(*requests_);  // a head in progress always carries, left at its start
  requests_ = std::move(moved);
  if (head_.size() > own_->head.size()) return refuse(http::ParseError::kHeadTooLarge);
  own_len_ = head_.size();
  std::memcpy(own_->head.data(), head_.data(), own_len_);
  head_.clear();
  const http::StreamStep again = requests_->next({own_->head.data(), own_len_});
  if (again.event == http::StreamEvent::kError) refuse(again.error);  // it did not fail before: never, but not silently
}

void FlowReplay::release_head_buffers() {
  if (!own_) return;
  // Called between messages (nothing is lost) or as the connection ends.
  build_stream(c_.shared);
  c_.free.push_back(std::move(own_));
  own_len_ = 0;
}

void FlowReplay::refuse(http::ParseError e) {
  // The appliance answers (400, 431, 501, 505) and closes: that answer,
  // after the responses still owed, is not the origin's.
  record(e);
  client_state_ = Client::kStopped;
  answered_and_closed_ = true;
}

void FlowReplay::park(std::span<const char> bytes) {
  client_state_ = Client::kParked;
  if (bytes.empty()) return;
  if (parked_.size() + bytes.size() > kMaxHeldBytes) {
    problem(now_->where(), "more than 1 MiB of the client's stream waiting for responses: its requests are not read any more");
    client_state_ = Client::kStopped;
    parked_.clear();
    return;
  }
  parked_.append(bytes.data(), bytes.size());
}

void FlowReplay::resume_requests() {
  if (client_state_ != Client::kParked) return;
  client_state_ = Client::kParsing;
  std::string waiting;
  waiting.swap(parked_);
  // Parks again, in order, if need be; a head that begins in what waited
  // and goes on is copied by hold_head like any other.
  feed_requests({waiting.data(), waiting.size()});
}

void FlowReplay::on_head() {
  in_head_ = false;
  if (own_) head_.assign(own_->head.data(), own_len_);
  uint64_t response = 0;
  if (framing_ && responses_.expect(http::request_kind(requests_->head()))) {
    response = ++c_.out.requests;
    awaiting_.push_back(response);
  }
  record(http::ParseError::kNone);
  c_.out.records.back().response = response;
  head_.clear();
}

void FlowReplay::record(http::ParseError error) {
  carried_requests_ = true;
  RequestRecord& r = emit(RequestRecord::Kind::kRequest, now_->at, now_->where());
  if (error == http::ParseError::kNone) r.head = head_;
  r.parse_error = error;
  r.relay = relay_;
  r.relay_version = relay_version_;
  r.relayed = relayed_;
}

RequestRecord& FlowReplay::emit(RequestRecord::Kind kind, time::Nanos at, PacketAt where) {
  const uint32_t input = c_.files[where.file].input;
  RequestRecord& r = c_.out.records.emplace_back();
  r.kind = kind;
  r.at = at;
  r.order = record_order(input, where.number);
  r.conn = conn_;
  r.input = input;
  r.record_number = where.number;
  r.connection = record_order(c_.files.front().input, connection_);
  return r;
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
        // 101 to an Upgrade, 2xx to a CONNECT: neither side is HTTP any
        // more. The switching request's slot is held while the tunnel is.
        framing_ = false;
        requests_->resolve_switch(true);
        client_state_ = Client::kStopped;
        return;
      case http::ResponseEvent::kError: stop_framing(st.error); return;
    }
  }
}

void FlowReplay::on_response_end() {
  if (!awaiting_.empty()) {
    end_wait(awaiting_.front(), now_->at, now_->where(), &responses_.head());
    awaiting_.pop_front();
  }
  // ResponsePath::response_end: an Upgrade or CONNECT answered without a switch.
  if (responses_.outstanding() == 0) requests_->resolve_switch(false);
  resume_requests();
}

void FlowReplay::end_wait(uint64_t request, time::Nanos at, PacketAt where, const http::ResponseHead* head) {
  RequestRecord& r = emit(RequestRecord::Kind::kResponseEnd, at, where);
  r.response = request;
  if (head != nullptr && head->has_usage) {
    r.has_usage = true;
    r.usage_tokens = head->usage;
    r.usage_at = at;
  }
}

void FlowReplay::end_waits(time::Nanos at) {
  for (const uint64_t request : awaiting_) end_wait(request, at, last_where_, nullptr);
  awaiting_.clear();
}

void FlowReplay::stop_framing(http::ResponseError e) {
  if (answered_and_closed_ && e == http::ResponseError::kUnsolicited) {  // the appliance's own answer
    framing_ = false;
    return;
  }
  problem(now_->where(), "a response that cannot be framed (" + std::string(http::to_string(e)) +
                            "): the connection's later responses are not read");
  framing_ = false;
  end_waits(now_->at);  // when they end is not known any more: the slots are given back now
  resume_requests();
}

void FlowReplay::report_held() {
  for (const auto& [side, who] : {std::pair<const InOrderBytes*, const char*>{&client_, "client"}, {&origin_, "origin"}}) {
    if (side->held_bytes() == 0) continue;
    problem(side->first_held(), std::to_string(side->held_bytes()) + " bytes of the " + who +
                                           "'s stream after a gap the capture does not fill: not read");
  }
}

void FlowReplay::finish(time::Nanos at) {
  report_held();
  end_waits(at);
  end_connection(at);
  release_head_buffers();
}

void FlowReplay::end_connection(time::Nanos at) {
  if (!carried_requests_) return;
  carried_requests_ = false;
  (void)emit(RequestRecord::Kind::kConnectionEnd, at, last_where_);
}

void FlowReplay::problem(PacketAt packet, const std::string& message) {
  c_.out.problems.push_back({packet.file,
                             {packet.number, {c_.files[packet.file].path + ": packet " + std::to_string(packet.number),
                                              "flow " + endpoint(key_.client, key_.client_port) + " -> " +
                                                  endpoint(key_.origin, key_.origin_port) + ": " + message}}});
}

}  // namespace sluice::replay

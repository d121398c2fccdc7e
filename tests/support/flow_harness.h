// Test support for the data plane's flow engine: one TCP connection between
// a client and an origin, written as the segments each side sends (real
// frames, built and checksummed), fed to a FlowEngine with a small policy,
// and a sink that keeps every segment the engine sends in the flow's name.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dataplane/checksum.h"
#include "dataplane/flow_engine.h"
#include "dataplane/segment_writer.h"
#include "flow_policies.h"
#include "http/http1_policy.h"
#include "limiter/decide.h"
#include "policy/policy_loader.h"

namespace sluice::test {

// What the engine sent, parsed back.
struct SentSegment {
  dataplane::Side to;
  std::vector<uint8_t> bytes;
  dataplane::FrameView view;
  [[nodiscard]] std::string payload() const {
    return std::string(reinterpret_cast<const char*>(bytes.data()) + view.payload_offset, view.payload_len);
  }
};

class RecordingSink final : public dataplane::PacketSink {
 public:
  std::span<uint8_t> allocate(dataplane::Side, size_t len) noexcept override {
    buf_.assign(len, 0);
    return buf_;
  }
  void send(dataplane::Side to, size_t len) noexcept override {
    buf_.resize(len);
    SentSegment s{to, buf_, {}};
    s.view = dataplane::parse_frame(s.bytes);
    sent.push_back(std::move(s));
  }
  std::vector<SentSegment> sent;

 private:
  std::vector<uint8_t> buf_;
};

// A compiled policy and the shared limiter state behind an engine.
struct EngineWorld {
  explicit EngineWorld(std::string_view policy_text = kSmallPolicy, dataplane::EngineConfig config = small_config()) {
    std::array<uint8_t, limiter::KeyHasher::kSecretSize> secret{};
    for (size_t i = 0; i < secret.size(); ++i) secret[i] = static_cast<uint8_t>(i * 13 + 1);
    hasher = std::make_unique<limiter::KeyHasher>(secret);
    policy::LoadResult loaded = policy::load_policy_text(policy_text, "test.yaml");
    for (const auto& e : loaded.errors) ADD_FAILURE() << e.to_string();
    std::vector<policy::PolicyError> errors;
    auto compiled = http::compile_http1_policy(*loaded.policy, *hasher, errors);
    for (const auto& e : errors) ADD_FAILURE() << e.to_string();
    snapshot = std::make_unique<dataplane::PolicySnapshot>();
    snapshot->policy = std::move(*compiled);
    // Tests of everything but the SYN proxy read a proxied flow's segments
    // as a bridged flow's, one for one: its origin's connection is opened
    // with the handshake (binding: immediate) unless the policy itself asks
    // for delayed binding (syn_proxy_test.cpp, delayed_binding_test.cpp).
    if (policy_text.find("binding:") == std::string_view::npos) snapshot->policy.delayed_binding = false;
    for (uint16_t p : snapshot->policy.source.service_ports) snapshot->service_ports.set(p);
    buckets = std::make_unique<limiter::BucketTable>(limiter::BucketTable::Options{
        .capacity = 4096, .regions = 4, .bucket_kinds = static_cast<uint16_t>(snapshot->policy.buckets.size())});
    records = std::make_unique<limiter::BucketTable>(limiter::BucketTable::Options{
        .capacity = 1024, .regions = 4, .bucket_kinds = 1, .words = std::max(2u, (snapshot->policy.max_slots + 1) & ~1u)});
    runs = std::make_unique<limiter::DigestMap>(64);
    users = std::make_unique<limiter::DigestMap>(64);
    state = std::make_unique<limiter::LimiterState>(
        limiter::LimiterState{*buckets, *records, *runs, *users, *hasher, *hasher});
    config.cookie_seed = kCookieSeed;
    config.max_head_bytes = snapshot->policy.stream.head.max_head_bytes;
    config.max_fields = snapshot->policy.stream.head.max_fields;
    engine = std::make_unique<dataplane::FlowEngine>(config, *state, counters, 42);
  }
  // Responses pass unchanged here (the tests of the request path count on
  // the origin's numbers); insertion has its tests, with_fields().
  static dataplane::EngineConfig small_config() {
    dataplane::EngineConfig c;
    c.flows = 64;
    c.contexts = 8;
    // One client address holds every flow and context in most tests: the
    // shares have tests of their own (fair_share_test.cpp).
    c.flows_per_client = 1u << 20;
    c.contexts_per_client = 1u << 20;
    c.insert_fields = false;
    return c;
  }
  static dataplane::EngineConfig with_fields() {
    dataplane::EngineConfig c = small_config();
    c.insert_fields = true;
    return c;
  }

  // The worker's sweep at `now`: every slot of a small table looked at.
  void sweep(size_t slots = 1024) { engine->sweep(now, slots, *snapshot, *out); }

  // The engine's SYN cookie keys, and the same cookies computed here: the
  // harness's clients know the cookie without reading the engine's SYN-ACK
  // (tests that count allocations send the engine's segments nowhere).
  static constexpr std::array<uint8_t, 32> kCookieSeed = {7, 1, 4, 9, 2, 8, 5, 3, 6, 0, 11, 13, 17, 19, 23, 29,
                                                          31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97, 101};
  dataplane::SynCookies cookies{kCookieSeed};

  std::unique_ptr<limiter::KeyHasher> hasher;
  std::unique_ptr<dataplane::PolicySnapshot> snapshot;
  std::unique_ptr<limiter::BucketTable> buckets, records;
  std::unique_ptr<limiter::DigestMap> runs, users;
  std::unique_ptr<limiter::LimiterState> state;
  dataplane::WorkerCounters counters;
  std::unique_ptr<dataplane::FlowEngine> engine;
  RecordingSink sink;
  dataplane::PacketSink* out = &sink;  // where the engine's own segments go
  // Bytes each fed frame's buffer holds (ServiceFrame::room); 0: frames may
  // not grow, so edited origin segments are written again, not grown.
  uint32_t frame_room = 0;
  // Called around every engine call (the hot-path test counts allocations there).
  void (*before_engine)() = nullptr;
  void (*after_engine)() = nullptr;
  time::Nanos now = 1'768'464'000ull * time::kNanosPerSecond;
};

// What happened to one segment fed to the engine.
struct Fed {
  dataplane::FrameAction action;
  std::vector<uint8_t> bytes;  // the frame as forwarded (cut short if it was)
  dataplane::FrameView view;
  size_t sent_before = 0;      // sink.sent.size() before the segment
  [[nodiscard]] bool forwarded() const { return action == dataplane::FrameAction::kForward; }
  // None of the segment's payload went to the origin: dropped, or (a request
  // refused on a connection kept open) forwarded as a bare acknowledgement.
  [[nodiscard]] bool payload_withheld() const { return !forwarded() || view.payload_len == 0; }
  [[nodiscard]] std::string payload() const {
    return std::string(reinterpret_cast<const char*>(bytes.data()) + view.payload_offset, view.payload_len);
  }
};

// The segments the engine wrote towards `side`, from the `from`-th written on.
inline std::vector<SentSegment> sent_to(const EngineWorld& w, dataplane::Side side, size_t from = 0) {
  std::vector<SentSegment> out;
  for (size_t i = from; i < w.sink.sent.size(); ++i) {
    if (w.sink.sent[i].to == side) out.push_back(w.sink.sent[i]);
  }
  return out;
}

// One direction's byte stream as its receiver gets it, placed by sequence
// number from every segment that reaches it (forwarded, or written by the
// engine); bytes sent twice must agree.
class StreamView {
 public:
  explicit StreamView(uint32_t first) : first_(first) {}
  void add(uint32_t seq, std::string_view payload) {
    for (size_t i = 0; i < payload.size(); ++i) {
      const uint32_t at = seq + static_cast<uint32_t>(i) - first_;
      auto [it, fresh] = bytes_.emplace(at, payload[i]);
      if (!fresh && it->second != payload[i]) ADD_FAILURE() << "byte " << at << " sent twice, differently";
    }
  }
  void add(const Fed& f) {
    if (f.forwarded()) add(f.view.seq, f.payload());
  }
  // What the engine wrote towards `side`, from its `from`-th segment on.
  void add_sent(const EngineWorld& w, dataplane::Side side, size_t from) {
    for (const SentSegment& s : sent_to(w, side, from)) add(s.view.seq, s.payload());
  }
  // The bytes from the first on, up to the first hole.
  [[nodiscard]] std::string contiguous() const {
    std::string out;
    for (auto it = bytes_.find(0); it != bytes_.end() && it->first == out.size(); ++it) out += it->second;
    return out;
  }

 private:
  uint32_t first_;
  std::map<uint32_t, char> bytes_;
};

// Whether the engine wrote, towards `side` since the `from`-th, a segment
// with all of `flags`.
inline bool sent_with(const EngineWorld& w, dataplane::Side side, uint8_t flags, size_t from = 0) {
  for (const SentSegment& s : sent_to(w, side, from)) {
    if ((s.view.flags & flags) == flags) return true;
  }
  return false;
}

// One TCP connection through the engine.
class Connection {
 public:
  Connection(EngineWorld& w, bool ipv6 = false, uint16_t client_port = 40000, bool timestamps = true)
      : w_(w), ipv6_(ipv6), timestamps_(timestamps) {
    client_ = ipv6 ? *net::parse_ip("2001:db8::10") : *net::parse_ip("198.18.0.10");
    origin_ = ipv6 ? *net::parse_ip("2001:db8::20") : *net::parse_ip("198.18.0.20");
    cport_ = client_port;
    const uint8_t cmac[6] = {0x02, 0, 0, 0, 0, 0x10}, omac[6] = {0x02, 0, 0, 0, 0, 0x20};
    build_l2(l2_to_origin_, omac, cmac);
    build_l2(l2_to_client_, cmac, omac);
  }

  // Both sides' frames carry these VLAN tags (an 802.1ad outer tag first
  // when there are two), as a trunk port would deliver them.
  void set_vlan_tags(int tags) {
    for (auto* l2 : {&l2_to_origin_, &l2_to_client_}) {
      std::vector<uint8_t> tagged(l2->begin(), l2->begin() + 12);
      for (int i = 0; i < tags; ++i) {
        const uint8_t tpid_hi = (tags == 2 && i == 0) ? 0x88 : 0x81;
        const uint8_t tpid_lo = (tags == 2 && i == 0) ? 0xa8 : 0x00;
        tagged.insert(tagged.end(), {tpid_hi, tpid_lo, 0x00, static_cast<uint8_t>(10 + i)});
      }
      tagged.insert(tagged.end(), l2->end() - 2, l2->end());
      *l2 = tagged;
    }
  }

  // Another client address (of the connection's family), before the handshake.
  void set_client_address(std::string_view address) { client_ = *net::parse_ip(address); }

  // The handshake; afterwards client_seq/origin_seq are the next bytes.
  // Through the SYN proxy when the policy has it (the default).
  void handshake(uint16_t mss = 1460) {
    if (w_.snapshot->policy.syn_proxy) {
      proxied_handshake(mss);
      return;
    }
    Fed syn = client(dataplane::tcp_flag::kSyn, "", client_seq_ - 1, 0, mss);
    ASSERT_TRUE(syn.forwarded());
    Fed synack = origin(dataplane::tcp_flag::kSyn | dataplane::tcp_flag::kAck, "", origin_seq_ - 1, client_seq_);
    ASSERT_TRUE(synack.forwarded());
    Fed ack = client(dataplane::tcp_flag::kAck, "");
    ASSERT_TRUE(ack.forwarded());
  }

  // The SYN proxy's handshake. The origin takes the cookie for its ISN and
  // the cookie's TSval for its clock, so that the two ends' numbers agree
  // and tests of everything else read them as on a bridged flow; the SYN
  // proxy's own tests give the origin numbers of its own.
  void proxied_handshake(uint16_t mss) {
    namespace flag = dataplane::tcp_flag;
    const bool recorded = w_.out == &w_.sink;
    const size_t mark = w_.sink.sent.size();
    // The cookie the engine answers with, computed as the engine does (the
    // origin's profile promises timestamps: the harness's origins show them).
    dataplane::TcpOptions syn_options;
    syn_options.mss = mss;
    syn_options.has_timestamp = timestamps_;
    syn_options.tsval = client_ts_ + 1;
    const dataplane::FlowKey key{client_, origin_, cport_, 80};
    const dataplane::SynCookieOffer offer =
        w_.cookies.offer(key, client_seq_ - 1, syn_options, dataplane::SynProxy::kClientWscale, w_.now);
    const Fed syn = client(flag::kSyn, "", client_seq_ - 1, 0, mss);
    ASSERT_EQ(syn.action, dataplane::FrameAction::kDrop);
    if (recorded) {
      const std::vector<SentSegment> synack = sent_to(w_, dataplane::Side::kClient, syn.sent_before);
      ASSERT_EQ(synack.size(), 1u);
      ASSERT_TRUE(synack[0].view.has(flag::kSyn | flag::kAck));
      ASSERT_EQ(synack[0].view.seq, offer.isn);
    }
    cookie_ = offer.isn;
    origin_seq_ = cookie_ + 1;
    origin_ts_ = offer.tsval;  // the client's ACK echoes it exactly
    const Fed ack = client(flag::kAck, "");
    ASSERT_EQ(ack.action, dataplane::FrameAction::kDrop);
    // Its last segment is the SYN to the origin (making room for the flow
    // may have sent others before it).
    if (recorded) {
      ASSERT_GT(w_.sink.sent.size(), ack.sent_before);
      ASSERT_EQ(w_.sink.sent.back().to, dataplane::Side::kOrigin);
      ASSERT_TRUE(w_.sink.sent.back().view.has(flag::kSyn));
    }
    const size_t origin_syn = w_.sink.sent.size() - 1;
    --origin_ts_;  // the SYN-ACK's TSval is the cookie's
    const Fed answer = origin(flag::kSyn | flag::kAck, "", cookie_, client_seq_);
    ASSERT_EQ(answer.action, dataplane::FrameAction::kDrop);
    if (recorded) {
      ASSERT_EQ(sent_to(w_, dataplane::Side::kOrigin, answer.sent_before).size(), 1u);  // the SYN-ACK acknowledged
      ASSERT_EQ(sent_to(w_, dataplane::Side::kClient, answer.sent_before).size(), 1u);  // the client's window opened
      // Checked: the handshake's own segments forgotten, so that what tests
      // count from here is what a bridged flow's would be (whose handshake
      // the appliance sends nothing of); any others stay.
      w_.sink.sent.resize(answer.sent_before);
      w_.sink.sent.erase(w_.sink.sent.begin() + static_cast<long>(origin_syn));
      w_.sink.sent.erase(w_.sink.sent.begin() + static_cast<long>(mark));  // the cookie SYN-ACK
    }
  }

  // A client segment with `payload` at `seq` (default: the next byte), which
  // then advances the client's sequence.
  Fed client(uint8_t flags, std::string_view payload, std::optional<uint32_t> seq = {},
             std::optional<uint32_t> ack = {}, uint16_t mss = 0) {
    const uint32_t s = seq.value_or(client_seq_);
    Fed f = feed(dataplane::Side::kClient, flags, payload, s, ack.value_or(origin_seq_), mss);
    if (!seq) client_seq_ += static_cast<uint32_t>(payload.size());
    return f;
  }
  Fed origin(uint8_t flags, std::string_view payload, std::optional<uint32_t> seq = {},
             std::optional<uint32_t> ack = {}) {
    const uint32_t s = seq.value_or(origin_seq_);
    Fed f = feed(dataplane::Side::kOrigin, flags, payload, s, ack.value_or(client_seq_), 0);
    if (!seq) origin_seq_ += static_cast<uint32_t>(payload.size());
    return f;
  }
  Fed data(std::string_view payload) { return client(dataplane::tcp_flag::kAck | dataplane::tcp_flag::kPsh, payload); }
  Fed respond(std::string_view payload) { return origin(dataplane::tcp_flag::kAck | dataplane::tcp_flag::kPsh, payload); }

  uint32_t client_seq_ = 1000001;
  uint32_t origin_seq_ = 5000001;
  uint32_t client_ts_ = 111;
  uint32_t origin_ts_ = 999;
  uint32_t cookie_ = 0;  // the SYN proxy's ISN towards the client (proxied_handshake)

 private:
  void build_l2(std::vector<uint8_t>& l2, const uint8_t* dst, const uint8_t* src) const {
    uint8_t h[14];
    std::memcpy(h, dst, 6);
    std::memcpy(h + 6, src, 6);
    h[12] = ipv6_ ? 0x86 : 0x08;
    h[13] = ipv6_ ? 0xdd : 0x00;
    l2.assign(h, h + sizeof h);
  }

  Fed feed(dataplane::Side from, uint8_t flags, std::string_view payload, uint32_t seq, uint32_t ack, uint16_t mss) {
    dataplane::SegmentSpec s;
    const bool c = from == dataplane::Side::kClient;
    s.l2 = c ? l2_to_origin_ : l2_to_client_;
    s.ip_version = ipv6_ ? 6 : 4;
    s.src = c ? client_ : origin_;
    s.dst = c ? origin_ : client_;
    s.sport = c ? cport_ : 80;
    s.dport = c ? 80 : cport_;
    s.seq = seq;
    s.ack = (flags & dataplane::tcp_flag::kAck) ? ack : 0;
    s.flags = flags;
    s.window = 502;
    s.timestamp = timestamps_;
    s.tsval = c ? ++client_ts_ : ++origin_ts_;
    s.tsecr = c ? origin_ts_ : client_ts_;
    s.payload = {reinterpret_cast<const uint8_t*>(payload.data()), payload.size()};
    std::vector<uint8_t> frame(dataplane::segment_size(s) + (mss ? 4 : 0));
    EXPECT_NE(dataplane::write_segment(frame, s), 0u);
    frame.resize(dataplane::segment_size(s));
    if (mss != 0) add_mss(frame, mss);
    const size_t built = frame.size();
    if (w_.frame_room > built) frame.resize(w_.frame_room);
    Fed out;
    out.sent_before = w_.sink.sent.size();
    out.view = dataplane::parse_frame({frame.data(), built});
    dataplane::ServiceFrame sf;
    EXPECT_TRUE(dataplane::service_frame(out.view, from, w_.snapshot->service_ports, sf));
    sf.room = static_cast<uint32_t>(frame.size() > built ? frame.size() : 0);
    if (w_.before_engine) w_.before_engine();
    const dataplane::FrameResult r =
        w_.engine->on_frame(sf, frame.data(), out.view, *w_.snapshot, w_.now, *w_.out);
    if (r.answer_after != nullptr) w_.engine->send_answer(*r.answer_after, *w_.out);
    if (w_.after_engine) w_.after_engine();
    out.action = r.action;
    frame.resize(r.frame_len);
    out.bytes = frame;
    out.view = dataplane::parse_frame(out.bytes);
    return out;
  }

  // Rewrites a SYN built without options to carry an MSS option as well.
  void add_mss(std::vector<uint8_t>& frame, uint16_t mss) const {
    dataplane::FrameView v = dataplane::parse_frame(frame);
    const size_t tcp_hdr = v.payload_offset - v.l4_offset;
    std::vector<uint8_t> out(frame.begin(), frame.begin() + v.l4_offset + tcp_hdr);
    out.insert(out.end(), {2, 4, static_cast<uint8_t>(mss >> 8), static_cast<uint8_t>(mss)});
    out[v.l4_offset + 12] = static_cast<uint8_t>(((tcp_hdr + 4) / 4) << 4);
    uint8_t* ip = out.data() + v.l3_offset;
    if (v.ip_version == 4) {
      dataplane::store16(ip + 2, static_cast<uint16_t>(dataplane::load16(ip + 2) + 4));
      dataplane::set_ipv4_checksum(ip, 20);
    } else {
      dataplane::store16(ip + 4, static_cast<uint16_t>(dataplane::load16(ip + 4) + 4));
    }
    frame = out;
    v = dataplane::parse_frame(frame);
    dataplane::set_tcp_checksum(frame.data(), v);
  }

  EngineWorld& w_;
  bool ipv6_;
  bool timestamps_;
  net::IpAddress client_, origin_;
  uint16_t cport_;
  std::vector<uint8_t> l2_to_origin_, l2_to_client_;
};

}  // namespace sluice::test

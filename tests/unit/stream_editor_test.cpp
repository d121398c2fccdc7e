// The stream editor (dataplane/stream_editor.h) against a byte model of both
// streams. The model: the origin's stream O and the client's stream C as
// each end sends them; the appliance inserts two responses' rate-limit
// fields and a kept answer into O, and cuts the refused request out of C.
// The edits are recorded through the editor as the flow engine records them
// (a request plan's kept refusal, a response plan's points); then both
// streams are cut into segments at random places, sent through the editor,
// and put back together by sequence number on the other side: the client
// must see exactly O with the insertions, the origin exactly C without the
// removal, every byte the same however often it is sent, and
// acknowledgements must map back onto the sender's bytes.
#include "dataplane/stream_editor.h"
#include "http/limiter_answer.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "flow_harness.h"

namespace sluice::test {
namespace {

using dataplane::FrameAction;
using dataplane::FrameResult;
using dataplane::Side;
namespace flag = dataplane::tcp_flag;

constexpr uint32_t kClientIsn = 0xfffffe00;  // both streams wrap past 2^32 on the way
constexpr uint32_t kOriginIsn = 0xffffff00;

// One flow's editor, with the model's edits recorded.
class EditorBench {
 public:
  EditorBench(uint16_t client_mss, bool timestamps)
      : shares_(4, dataplane::ShareCaps{}, 1),
        lender_(2, w_.snapshot->policy.stream.head.max_head_bytes, w_.snapshot->policy.stream.head.max_fields, 2, 1,
                shares_),
        answers_(1 << 16),
        editor_(lender_, answers_, emitter_, w_.counters) {
    flow_.key = dataplane::FlowKey{*net::parse_ip("198.18.0.10"), *net::parse_ip("198.18.0.20"), 40000, 80};
    const uint8_t to_origin[14] = {2, 0, 0, 0, 0, 0x20, 2, 0, 0, 0, 0, 0x10, 0x08, 0x00};
    const uint8_t to_client[14] = {2, 0, 0, 0, 0, 0x10, 2, 0, 0, 0, 0, 0x20, 0x08, 0x00};
    std::memcpy(flow_.client.l2, to_origin, 14);
    std::memcpy(flow_.origin.l2, to_client, 14);
    flow_.client.l2_len = flow_.origin.l2_len = 14;
    flow_.ip_version = 4;
    flow_.timestamps = timestamps;
    flow_.client.isn = kClientIsn;
    flow_.origin.isn = kOriginIsn;
    flow_.client.mss = client_mss;
    flow_.origin.mss = 1460;
    flow_.state = dataplane::FlowState::kEstablished;
    flow_.client.next = kClientIsn + 1;
    flow_.origin.next = kOriginIsn + 1;
    flow_.origin.ack = kClientIsn + 1;
    EXPECT_EQ(lender_.borrow(flow_, *w_.snapshot), dataplane::Lent::kYes);
  }

  // The client's request at C[from, to) refused and kept open: its answer
  // goes after the `after`-th response.
  void keep_open(uint32_t from, uint32_t to, uint32_t after, std::string_view answer) {
    dataplane::RequestPlan plan;
    plan.kept = 1;
    plan.refusals[0] = dataplane::KeptRefusal{kClientIsn + 1 + from, kClientIsn + 1 + to, after,
                                              static_cast<uint16_t>(answer.size()), answers_.put(answer)};
    ASSERT_EQ(editor_.keep_open(flow_, ctx(), plan, sink_), dataplane::EditOutcome::kDone);
    EXPECT_TRUE(sink_.sent.empty());  // responses before it are outstanding: nothing sent yet
  }
  // What the response path found in O: fields after status lines, response ends.
  void fields_at(uint32_t at, const limiter::RateLimitFields& fields) {
    texts_.push_back(fields);
    points_.push_back({dataplane::ResponsePoint::Kind::kFields, kOriginIsn + 1 + at, 0, nullptr});
  }
  void response_end_at(uint32_t at, uint32_t ended) {
    points_.push_back({dataplane::ResponsePoint::Kind::kResponseEnd, kOriginIsn + 1 + at, ended, nullptr});
  }
  void record_points() {
    dataplane::ResponsePlan plan;
    size_t t = 0;
    for (dataplane::ResponsePoint p : points_) {
      if (p.kind == dataplane::ResponsePoint::Kind::kFields) p.fields = &texts_[t++];
      plan.at[plan.points++] = p;
    }
    editor_.add_response_points(flow_, ctx(), plan);
  }

  // An origin segment with O[from, from + n), through the editor; what
  // reaches the client goes into `client`.
  void origin_sends(const std::string& o, uint32_t from, uint32_t n, uint32_t room, bool again, StreamView& client) {
    std::vector<uint8_t> frame = segment(Side::kOrigin, kOriginIsn + 1 + from, kClientIsn + 1, o.substr(from, n), room);
    dataplane::FrameView v = dataplane::parse_frame({frame.data(), frame.size() - room_extra_});
    FrameResult r{FrameAction::kForward, v.frame_len, nullptr};
    const size_t before = sink_.sent.size();
    // A fresh segment: the stream was framed up to its start; a
    // retransmission: up to the end of what was sent.
    const uint32_t framed_before = again ? kOriginIsn + 1 + static_cast<uint32_t>(o.size()) : v.seq;
    ASSERT_EQ(editor_.to_client(flow_, frame.data(), v, room, framed_before, sink_, r), dataplane::EditOutcome::kDone);
    if (r.action == FrameAction::kForward) {
      frame.resize(r.frame_len);
      const dataplane::FrameView out = dataplane::parse_frame(frame);
      EXPECT_TRUE(checksums_ok(frame, out));
      client.add(out.seq, payload(frame, out));
    }
    for (size_t i = before; i < sink_.sent.size(); ++i) {
      ASSERT_EQ(sink_.sent[i].to, Side::kClient);
      EXPECT_LE(sink_.sent[i].view.payload_len, flow_.client.mss);
      client.add(sink_.sent[i].view.seq, sink_.sent[i].payload());
    }
  }
  // A client segment with C[from, from + n) acknowledging client number
  // `ack` of the origin's edited stream; what reaches the origin goes into `origin`.
  void client_sends(const std::string& c, uint32_t from, uint32_t n, uint32_t ack, StreamView& origin) {
    std::vector<uint8_t> frame = segment(Side::kClient, kClientIsn + 1 + from, ack, c.substr(from, n), 0);
    dataplane::FrameView v = dataplane::parse_frame(frame);
    ASSERT_EQ(editor_.to_origin(flow_, frame.data(), v, v.seq, sink_), dataplane::EditOutcome::kDone);
    frame.resize(v.frame_len);
    const dataplane::FrameView out = dataplane::parse_frame(frame);
    EXPECT_TRUE(checksums_ok(frame, out));
    origin.add(out.seq, payload(frame, out));
  }

  [[nodiscard]] dataplane::ParseContext& ctx() { return lender_.context(flow_); }
  [[nodiscard]] dataplane::TcpFlow& flow() { return flow_; }
  [[nodiscard]] dataplane::StreamEditor& editor() { return editor_; }

 private:
  std::vector<uint8_t> segment(Side from, uint32_t seq, uint32_t ack, std::string_view bytes, uint32_t room) {
    dataplane::SegmentSpec s = dataplane::SegmentEmitter::from(flow_, from);
    s.seq = seq;
    s.ack = ack;
    s.flags = flag::kAck | flag::kPsh;
    s.window = 500;
    s.tsval += 7;
    s.payload = {reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()};
    std::vector<uint8_t> frame(dataplane::segment_size(s));
    EXPECT_NE(dataplane::write_segment(frame, s), 0u);
    room_extra_ = room > frame.size() ? room - frame.size() : 0;
    frame.resize(frame.size() + room_extra_);
    return frame;
  }
  static std::string payload(const std::vector<uint8_t>& f, const dataplane::FrameView& v) {
    return std::string(reinterpret_cast<const char*>(f.data()) + v.payload_offset, v.payload_len);
  }
  static bool checksums_ok(const std::vector<uint8_t>& f, const dataplane::FrameView& v) {
    std::vector<uint8_t> copy(f);
    dataplane::set_tcp_checksum(copy.data(), v);
    return copy == f;
  }

  EngineWorld w_;
  dataplane::ClientShares shares_;
  dataplane::ContextLender lender_;
  dataplane::AnswerStore answers_;
  dataplane::SegmentEmitter emitter_;
  dataplane::StreamEditor editor_;
  RecordingSink sink_;
  dataplane::TcpFlow flow_;
  std::vector<dataplane::ResponsePoint> points_;
  std::vector<limiter::RateLimitFields> texts_;
  size_t room_extra_ = 0;
};

std::string text(char c, size_t n, std::string_view tag) {
  std::string s(tag);
  while (s.size() < n) s += static_cast<char>(c + s.size() % 7);
  return s;
}

limiter::RateLimitFields seed_fields(uint32_t limit, uint32_t remaining, uint32_t reset) {
  limiter::RateLimitFields f;
  f.style = policy::HeaderStyle::kSeed;
  f.limit = limit;
  f.remaining = remaining;
  f.reset = reset;
  f.window = 60;
  return f;
}

std::string rendered(const limiter::RateLimitFields& f) {
  char text[256];
  const size_t n = http::write_ratelimit_fields(f, text);
  EXPECT_NE(n, SIZE_MAX);
  return std::string(text, n == SIZE_MAX ? 0 : n);
}

struct Model {
  std::string o = text('a', 2900, "origin:");
  std::string c = text('A', 700, "client:");
  // Into O: fields at two status lines, a kept answer at a response's end.
  uint32_t fields1_at = 60, answer_at = 1200, fields2_at = 1900;
  limiter::RateLimitFields values1 = seed_fields(10, 9, 6), values2 = seed_fields(10, 8, 12);
  std::string fields1 = rendered(values1);
  std::string answer = "HTTP/1.1 429 Too Many Requests\r\nContent-Length: 9\r\n\r\nslow down";
  std::string fields2 = rendered(values2);
  // Out of C: the refused request.
  uint32_t removed_from = 250, removed_to = 420;

  [[nodiscard]] std::string client_sees() const {
    return o.substr(0, fields1_at) + fields1 + o.substr(fields1_at, answer_at - fields1_at) + answer +
           o.substr(answer_at, fields2_at - answer_at) + fields2 + o.substr(fields2_at);
  }
  [[nodiscard]] std::string origin_sees() const { return c.substr(0, removed_from) + c.substr(removed_to); }
  void record(EditorBench& b) const {
    b.keep_open(removed_from, removed_to, 2, answer);
    b.fields_at(fields1_at, values1);
    b.response_end_at(answer_at, 2);
    b.fields_at(fields2_at, values2);
    b.record_points();
  }
};

// Random cut points of a stream of `n` bytes, the segments at most `max` long.
std::vector<std::pair<uint32_t, uint32_t>> cuts(std::mt19937& rng, size_t n, uint32_t max) {
  std::vector<std::pair<uint32_t, uint32_t>> out;
  for (uint32_t at = 0; at < n;) {
    const uint32_t len = std::min<uint32_t>(1 + rng() % max, static_cast<uint32_t>(n) - at);
    out.emplace_back(at, len);
    at += len;
  }
  return out;
}

void run_model(unsigned seed, uint16_t mss, bool timestamps, uint32_t room) {
  SCOPED_TRACE(testing::Message() << "seed " << seed << " mss " << mss << " ts " << timestamps << " room " << room);
  std::mt19937 rng(seed);
  const Model m;
  EditorBench b(mss, timestamps);
  m.record(b);

  StreamView client(kOriginIsn + 1), origin(kClientIsn + 1);
  const auto o_cuts = cuts(rng, m.o.size(), seed % 2 ? 1400 : 200);
  for (const auto& [from, n] : o_cuts) b.origin_sends(m.o, from, n, room, false, client);
  // Retransmissions, some starting right at an insertion point: written
  // again the same way.
  for (int i = 0; i < 6; ++i) {
    const auto& [from, n] = o_cuts[rng() % o_cuts.size()];
    b.origin_sends(m.o, from, n, room, true, client);
  }
  b.origin_sends(m.o, m.answer_at, 100, room, true, client);
  EXPECT_EQ(client.contiguous(), m.client_sees());

  for (const auto& [from, n] : cuts(rng, m.c.size(), 300)) b.client_sends(m.c, from, n, kOriginIsn + 1, origin);
  EXPECT_EQ(origin.contiguous(), m.origin_sees());
}

TEST(StreamEditor, BothStreamsArriveAsTheModelEditsThem) {
  for (unsigned seed = 1; seed <= 40; ++seed) {
    run_model(seed, 1460, seed % 3 == 0, 0);     // written again
    run_model(seed, 1460, seed % 3 == 0, 4096);  // grown in place where it fits
    run_model(seed, 200, seed % 3 == 1, 4096);   // split at a small MSS
  }
}

TEST(StreamEditor, AcknowledgementsMapBackOntoTheSendersBytes) {
  const Model m;
  EditorBench b(1460, true);
  m.record(b);
  StreamView client(kOriginIsn + 1), origin(kClientIsn + 1);
  for (uint32_t at = 0; at < m.o.size(); at += 500) {
    b.origin_sends(m.o, at, std::min<uint32_t>(500, static_cast<uint32_t>(m.o.size()) - at), 0, false, client);
  }
  const dataplane::TcpFlow& f = b.flow();
  const uint32_t o0 = kOriginIsn + 1, c0 = kClientIsn + 1;
  const uint32_t seen = static_cast<uint32_t>(m.client_sees().size());
  // The client's acknowledgement of everything: all of O.
  EXPECT_EQ(b.editor().to_origin_ack(f, o0 + seen), o0 + static_cast<uint32_t>(m.o.size()));
  // Inside inserted fields: the origin's bytes up to the insertion only.
  EXPECT_EQ(b.editor().to_origin_ack(f, o0 + m.fields1_at + 5), o0 + m.fields1_at);
  // Before any insertion: unchanged.
  EXPECT_EQ(b.editor().to_origin_ack(f, o0 + 10), o0 + 10);

  // The origin acknowledges all it got of C: in the client's numbers all of
  // C, but capped at the refused request while the client lacks its answer.
  const uint32_t origin_got = static_cast<uint32_t>(m.origin_sees().size());
  EXPECT_EQ(b.editor().to_client_ack(f, c0 + origin_got), c0 + m.removed_from);
  // Before the removal the numbers agree.
  EXPECT_EQ(b.editor().to_client_ack(f, c0 + 100), c0 + 100);

  // The client acknowledges past the answer: the cap goes, and the origin's
  // acknowledgement covers the refused request too.
  const uint32_t answer_end = static_cast<uint32_t>(m.fields1.size() + m.answer_at + m.answer.size());
  b.client_sends(m.c, 0, 0, o0 + answer_end, origin);
  EXPECT_EQ(b.ctx().kept_count, 0u);
  EXPECT_EQ(b.editor().to_client_ack(f, c0 + origin_got), c0 + static_cast<uint32_t>(m.c.size()));
  // What the origin's sequence numbers become for the client: shifted past
  // every insertion before them.
  EXPECT_EQ(b.editor().to_client_seq(f, o0 + static_cast<uint32_t>(m.o.size())), o0 + seen);
  EXPECT_EQ(b.editor().to_origin_seq(f, c0 + static_cast<uint32_t>(m.c.size())), c0 + origin_got);
}

}  // namespace
}  // namespace sluice::test

// The request path on its own (dataplane/request_path.h): a client
// segment's bytes in, a plan out, with no TCP in sight. Each test feeds
// bytes at client sequence numbers to a flow that has a parse context, runs
// parse() as the flow engine does (again after a held head is released),
// and reads what the plan asks: how much goes to the origin, what is held,
// what is cut out of a kept-open connection, what is answered.
#include "dataplane/request_path.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flow_harness.h"

namespace sluice::test {
namespace {

using dataplane::RequestPlan;
using Stop = dataplane::RequestPlan::Stop;

constexpr std::string_view kGet = "GET /v1/models HTTP/1.1\r\nHost: api.example\r\n\r\n";
constexpr uint32_t kFirst = 1'000'001;  // the client's first byte

// What the engine would do with one segment: every plan parse() returned
// (more than one when a held head was released), with a closing answer's
// text copied out of the scratch.
struct Segment {
  std::vector<RequestPlan> plans;
  std::string answer;
  [[nodiscard]] const RequestPlan& last() const { return plans.back(); }
  [[nodiscard]] bool released_held() const { return plans.size() > 1 && plans.front().stop == Stop::kReleaseHeld; }
};

class RequestBench {
 public:
  explicit RequestBench(std::string_view policy = kSmallPolicy)
      : w_(policy),
        contexts_(1, w_.snapshot->policy.stream.head.max_head_bytes, w_.snapshot->policy.stream.head.max_fields),
        answers_(1 << 16),
        path_(*w_.state, contexts_, answers_, w_.counters, 7) {
    path_.set_insert_fields(false);
    flow_.key = dataplane::FlowKey{*net::parse_ip("198.18.0.10"), *net::parse_ip("198.18.0.20"), 40000, 80};
    flow_.state = dataplane::FlowState::kEstablished;
    flow_.client.next = kFirst;
    flow_.context = contexts_.acquire();
    contexts_.start(flow_.context, w_.snapshot->policy, w_.snapshot->generation);
  }

  // `bytes` as one segment from client sequence `seq` (default: the next
  // byte to parse).
  Segment feed(std::string_view bytes, std::optional<uint32_t> seq = {}) {
    const uint32_t at = seq.value_or(flow_.client.next);
    dataplane::RequestCursor cur = dataplane::RequestPath::cursor(flow_, ctx(), at);
    Segment s;
    for (;;) {
      s.plans.push_back(path_.parse(flow_, ctx(), *w_.snapshot, bytes, cur, contexts_scarce, w_.now));
      if (s.last().stop == Stop::kAnswerClose) s.answer.assign(s.last().answer.data(), s.last().answer.size());
      if (s.last().stop != Stop::kReleaseHeld) return s;
    }
  }
  // The text of a kept-open refusal's answer.
  [[nodiscard]] std::string kept_answer(const dataplane::KeptRefusal& k) const {
    const std::span<const char> a = answers_.get(k.pos, k.len);
    return std::string(a.data(), a.size());
  }
  // The origin answered every request so far.
  void answer_all() {
    std::string responses;
    for (size_t n = ctx().responses.outstanding(); n != 0; --n)
      responses += "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    std::string_view rest = responses;
    for (;;) {
      const http::ResponseStep st = ctx().responses.next(rest);
      rest.remove_prefix(st.consumed);
      if (st.event == http::ResponseEvent::kResponseEnd) (void)ctx().take_usage();
      if (st.event != http::ResponseEvent::kHead && st.event != http::ResponseEvent::kResponseEnd) break;
    }
    ASSERT_EQ(ctx().responses.outstanding(), 0u);
  }

  [[nodiscard]] dataplane::ParseContext& ctx() { return contexts_.at(flow_.context); }
  [[nodiscard]] dataplane::TcpFlow& flow() { return flow_; }
  [[nodiscard]] dataplane::WorkerCounters& counters() { return w_.counters; }

  bool contexts_scarce = false;

 private:
  EngineWorld w_;
  dataplane::ContextPool contexts_;
  dataplane::AnswerStore answers_;
  dataplane::RequestPath path_;
  dataplane::TcpFlow flow_;
};

uint32_t len(std::string_view s) {
  return static_cast<uint32_t>(s.size());
}

TEST(RequestPath, AWholeAdmittedRequestGoesOnWhole) {
  RequestBench b;
  const Segment s = b.feed(kGet);
  ASSERT_EQ(s.plans.size(), 1u);
  EXPECT_EQ(s.last().stop, Stop::kEnd);
  EXPECT_EQ(s.last().forward_bytes, len(kGet));
  EXPECT_EQ(s.last().kept, 0u);
  EXPECT_FALSE(s.last().absorbed);
  EXPECT_EQ(b.flow().client.next, kFirst + len(kGet));
  EXPECT_EQ(b.ctx().responses.outstanding(), 1u);  // its response is expected
  EXPECT_EQ(b.counters().admitted.get(), 1u);
}

TEST(RequestPath, AHeadSplitAcrossSegmentsIsHeldThenReleasedAheadOfTheRest) {
  RequestBench b;
  const Segment first = b.feed(kGet.substr(0, 10));
  EXPECT_EQ(first.last().stop, Stop::kHeld);
  EXPECT_EQ(first.last().forward_bytes, 0u);  // nothing of it reaches the origin yet
  EXPECT_EQ(b.flow().client.held_seq, kFirst);
  EXPECT_EQ(b.flow().client.next, kFirst + 10);  // the held bytes count as parsed
  EXPECT_EQ(b.counters().requests.get(), 0u);

  const Segment second = b.feed(kGet.substr(10));
  ASSERT_TRUE(second.released_held());  // the held 10 bytes go first
  EXPECT_EQ(second.last().stop, Stop::kEnd);
  EXPECT_EQ(second.last().forward_bytes, len(kGet) - 10);
  EXPECT_EQ(b.counters().admitted.get(), 1u);
}

TEST(RequestPath, TheRequestBeforeAHeldHeadGoesOn) {
  RequestBench b;
  const std::string segment = std::string(kGet) + std::string(kGet.substr(0, 12));
  const Segment s = b.feed(segment);
  EXPECT_EQ(s.last().stop, Stop::kHeld);
  EXPECT_EQ(s.last().forward_bytes, len(kGet));  // cut where the held head begins
  EXPECT_EQ(b.flow().client.held_seq, kFirst + len(kGet));
}

TEST(RequestPath, TB14_ARefusalThatClosesIsCutAtItsHeadAndAnswered) {
  RequestBench b;  // two a minute, after_answer: close
  const std::string three = std::string(kGet) + std::string(kGet) + std::string(kGet);
  const Segment s = b.feed(three);
  EXPECT_EQ(s.last().stop, Stop::kAnswerClose);
  EXPECT_EQ(s.last().forward_bytes, 2 * len(kGet));  // the two admitted go on
  EXPECT_EQ(s.last().reset_seq, kFirst + 2 * len(kGet));
  EXPECT_EQ(s.answer.rfind("HTTP/1.1 429 ", 0), 0u) << s.answer;
  EXPECT_NE(s.answer.find("Connection: close"), std::string::npos);
  EXPECT_EQ(b.flow().client.next, kFirst + len(three));  // consumed: never parsed again
  EXPECT_EQ(b.counters().refused.get(), 1u);
}

TEST(RequestPath, TB14_ARefusalKeptOpenIsCutOutAndAnsweredAfterTheResponsesBeforeIt) {
  RequestBench b(kKeepPolicy);
  ASSERT_EQ(b.feed(kTight).last().stop, Stop::kEnd);  // spends /tight's one an hour
  const std::string pipelined = std::string(kLoose) + std::string(kTight) + std::string(kLoose);
  const uint32_t start = b.flow().client.next;
  const Segment s = b.feed(pipelined);
  EXPECT_EQ(s.last().stop, Stop::kEnd);
  EXPECT_EQ(s.last().forward_bytes, len(pipelined));  // the cut is the editor's: a removal
  ASSERT_EQ(s.last().kept, 1u);
  const dataplane::KeptRefusal& k = s.last().refusals[0];
  EXPECT_EQ(k.from, start + len(kLoose));
  EXPECT_EQ(k.to, start + len(kLoose) + len(kTight));
  EXPECT_EQ(k.after, 2u);  // after the responses to the first /tight and the first /loose
  const std::string answer = b.kept_answer(k);
  EXPECT_EQ(answer.rfind("HTTP/1.1 429 ", 0), 0u) << answer;
  EXPECT_EQ(answer.find("Connection: close"), std::string::npos);
  EXPECT_EQ(b.ctx().responses.outstanding(), 3u);  // the refused one expects none
  EXPECT_EQ(b.counters().answers_kept_open.get(), 1u);
}

TEST(RequestPath, AKeptOpenRefusalsBodyIsAbsorbedAsItArrives) {
  RequestBench b(kKeepPolicy);
  ASSERT_EQ(b.feed(kTight).last().stop, Stop::kEnd);
  const std::string_view post = "POST /tight HTTP/1.1\r\nHost: api\r\nContent-Length: 10\r\n\r\n";
  const uint32_t start = b.flow().client.next;
  const Segment head = b.feed(std::string(post) + "01234");
  ASSERT_EQ(head.last().kept, 1u);
  EXPECT_EQ(head.last().refusals[0].from, start);
  EXPECT_EQ(head.last().refusals[0].to, start + len(post) + 5);  // as far as the body came
  EXPECT_TRUE(b.ctx().absorbing);

  // The rest of the body, then an admitted request: the removal grows to the
  // body's end, no further.
  const Segment rest = b.feed(std::string("56789") + std::string(kLoose));
  EXPECT_EQ(rest.last().kept, 0u);
  EXPECT_TRUE(rest.last().absorbed);
  EXPECT_EQ(rest.last().absorbed_to, start + len(post) + 10);
  EXPECT_FALSE(b.ctx().absorbing);
  EXPECT_EQ(rest.last().forward_bytes, 5 + len(kLoose));
}

TEST(RequestPath, WithContextsScarceARefusalCloses) {
  RequestBench b(kKeepPolicy);
  ASSERT_EQ(b.feed(kTight).last().stop, Stop::kEnd);
  b.contexts_scarce = true;  // under a quarter of the pool free
  const Segment s = b.feed(kTight);
  EXPECT_EQ(s.last().stop, Stop::kAnswerClose);
  EXPECT_EQ(s.last().forward_bytes, 0u);
  EXPECT_EQ(s.answer.rfind("HTTP/1.1 429 ", 0), 0u) << s.answer;
  // Sent with FIN, it says so; the body is whole after the head.
  const size_t head_end = s.answer.find("\r\n\r\n");
  ASSERT_NE(head_end, std::string::npos);
  EXPECT_NE(s.answer.substr(0, head_end + 2).find("\r\nConnection: close\r\n"), std::string::npos) << s.answer;
  EXPECT_EQ(s.answer.substr(head_end + 4), "slow down");
}

TEST(RequestPath, WithTheFlowsEditsFullARefusalCloses) {
  RequestBench b(kKeepPolicy);
  ASSERT_EQ(b.feed(kTight).last().stop, Stop::kEnd);
  // As many removals pending as a shift keeps (earlier kept-open refusals
  // whose bytes the origin has not yet acknowledged).
  for (uint32_t i = 0; i < dataplane::SeqShift::kMaxEdits; ++i)
    ASSERT_TRUE(b.ctx().to_origin.add(kFirst - 1000 + i * 10, 5, 0));
  const Segment s = b.feed(kTight);
  EXPECT_EQ(s.last().stop, Stop::kAnswerClose);
  EXPECT_NE(s.answer.find("\r\nConnection: close\r\n"), std::string::npos) << s.answer;
}

TEST(RequestPath, ARemovalNeverStartsBeforeTheLastOne) {
  RequestBench b(kKeepPolicy);
  ASSERT_EQ(b.feed(kTight).last().stop, Stop::kEnd);
  // A removal pending that ends further on than the next request starts.
  ASSERT_TRUE(b.ctx().to_origin.add(b.flow().client.next - 10, 1000, 0));
  EXPECT_EQ(b.feed(kTight).last().stop, Stop::kAnswerClose);
}

TEST(RequestPath, TwoRefusalsInOneSegmentAreBothKeptOpen) {
  RequestBench b(kKeepPolicy);
  ASSERT_EQ(b.feed(kTight).last().stop, Stop::kEnd);
  const uint32_t start = b.flow().client.next;
  const Segment s = b.feed(std::string(kTight) + std::string(kLoose) + std::string(kTight));
  ASSERT_EQ(s.last().kept, 2u);
  EXPECT_EQ(s.last().refusals[0].from, start);
  EXPECT_EQ(s.last().refusals[0].to, start + len(kTight));
  EXPECT_EQ(s.last().refusals[0].after, 1u);
  EXPECT_EQ(s.last().refusals[1].from, start + len(kTight) + len(kLoose));
  EXPECT_EQ(s.last().refusals[1].after, 2u);  // after the /loose between them
}

TEST(RequestPath, PastThirtyTwoUnansweredRequestsTheRestWaitsUncharged) {
  RequestBench wide(kKeepPolicy);  // a budget that admits them all
  std::string many;
  for (int i = 0; i < 33; ++i) many += kLoose;
  const Segment s = wide.feed(many);
  EXPECT_EQ(s.last().stop, Stop::kPaused);
  EXPECT_EQ(s.last().forward_bytes, 32 * len(kLoose));
  EXPECT_EQ(wide.flow().client.next, kFirst + 32 * len(kLoose));  // the 33rd is the client's to send again
  EXPECT_EQ(wide.counters().requests.get(), 32u);
  EXPECT_EQ(wide.counters().backpressure.get(), 1u);

  // Answered, the 33rd goes on when it comes again.
  wide.answer_all();
  const Segment again = wide.feed(kLoose);
  EXPECT_EQ(again.last().stop, Stop::kEnd);
  EXPECT_EQ(again.last().forward_bytes, len(kLoose));
}

TEST(RequestPath, AMalformedHeadIsAnswered400AndCloses) {
  RequestBench b;
  const Segment s = b.feed("GET / HTTP/1.1\r\nBad Header\r\n\r\n");
  EXPECT_EQ(s.last().stop, Stop::kAnswerClose);
  EXPECT_EQ(s.last().forward_bytes, 0u);
  EXPECT_EQ(s.answer.rfind("HTTP/1.1 400 ", 0), 0u) << s.answer;
  EXPECT_EQ(b.counters().parse_errors.get(), 1u);
}

// A path origins read differently (here: '\' and %5C, which some read as
// '/') is refused by the default ambiguous_paths: refuse, counted as such
// beside the verdict, and none of it reaches the origin.
TEST(RequestPath, AnAmbiguousPathIsAnswered400AndCountedAsRefused) {
  RequestBench b;
  const Segment s = b.feed("GET /v1/b1%5c..%5c..%5chealthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(s.last().stop, Stop::kAnswerClose);
  EXPECT_EQ(s.last().forward_bytes, 0u);
  EXPECT_EQ(s.answer.rfind("HTTP/1.1 400 ", 0), 0u) << s.answer;
  EXPECT_EQ(b.counters().paths_refused.get(), 1u);
  EXPECT_EQ(b.counters().answered.get(), 1u);
  EXPECT_EQ(b.counters().paths_strictest.get(), 0u);
  EXPECT_EQ(b.counters().parse_errors.get(), 0u) << "the head was framed: the request is refused, not the stream";
}

TEST(RequestPath, AHeldHeadPastTheLimitIsAnswered431) {
  RequestBench b;
  const size_t limit = b.ctx().head_capacity;
  std::string head = "GET / HTTP/1.1\r\nX-Long: ";
  ASSERT_EQ(b.feed(head).last().stop, Stop::kHeld);
  const Segment s = b.feed(std::string(limit, 'x'));
  EXPECT_EQ(s.last().stop, Stop::kAnswerClose);
  EXPECT_EQ(s.answer.rfind("HTTP/1.1 431 ", 0), 0u) << s.answer;
  EXPECT_EQ(s.last().reset_seq, kFirst);  // the origin never saw the held head
}

TEST(RequestPath, NothingAfterAnUpgradeGoesOnUntilTheOriginAnswers) {
  RequestBench b;
  const std::string_view upgrade = "GET /ws HTTP/1.1\r\nHost: api\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n";
  const Segment s = b.feed(std::string(upgrade) + "more bytes");
  EXPECT_EQ(s.last().stop, Stop::kPaused);
  EXPECT_EQ(s.last().forward_bytes, len(upgrade));
  EXPECT_EQ(b.flow().client.next, kFirst + len(upgrade));
}

// HTTP/2 prior knowledge switches the flow only on the whole
// 24-byte preface; its HTTP/1.1-shaped first part is held until then, so an
// origin that reads HTTP/1.1 never sees a "PRI" it would answer and read on
// after.
const std::string kH2Policy = std::string(kSmallPolicy) + "limits:\n  allow_h2_prior_knowledge: true\n";
constexpr std::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
constexpr std::string_view kSettings = "\x00\x00\x00\x04\x00\x00\x00\x00\x00";

TEST(RequestPath, AWholeHttp2PrefaceIsBridged) {
  RequestBench b(kH2Policy);
  const Segment s = b.feed(std::string(kPreface) + std::string(kSettings));
  EXPECT_EQ(s.last().stop, Stop::kPassThrough);
  EXPECT_EQ(s.last().forward_bytes, len(kPreface) + len(kSettings));
  EXPECT_EQ(b.counters().pass_through.get(), 1u);
}

TEST(RequestPath, AnHttp2PrefaceSplitAcrossSegmentsIsHeldUntilWhole) {
  for (const uint32_t cut : {4u, 18u, 20u, 23u}) {
    RequestBench b(kH2Policy);
    const Segment first = b.feed(kPreface.substr(0, cut));
    EXPECT_EQ(first.last().stop, Stop::kHeld) << cut;
    EXPECT_EQ(first.last().forward_bytes, 0u) << cut;
    EXPECT_EQ(b.flow().client.held_seq, kFirst) << cut;
    const Segment second = b.feed(std::string(kPreface.substr(cut)) + std::string(kSettings));
    ASSERT_TRUE(second.released_held()) << cut;  // the held part goes first
    EXPECT_EQ(second.last().stop, Stop::kPassThrough) << cut;
    EXPECT_EQ(second.last().forward_bytes, len(kPreface) - cut + len(kSettings)) << cut;
    EXPECT_EQ(b.counters().pass_through.get(), 1u) << cut;
  }
}

TEST(RequestPath, APrefaceHeadFollowedByAnythingElseIsAnswered400AndTheOriginSeesNone) {
  RequestBench b(kH2Policy);
  ASSERT_EQ(b.feed("PRI * HTTP/2.0\r\n\r\n").last().stop, Stop::kHeld);
  const Segment s = b.feed(kGet);
  EXPECT_EQ(s.last().stop, Stop::kAnswerClose);
  EXPECT_EQ(s.last().forward_bytes, 0u);
  EXPECT_EQ(s.answer.rfind("HTTP/1.1 400 ", 0), 0u) << s.answer;
  EXPECT_EQ(s.last().reset_seq, kFirst);  // the origin never saw the held preface
  EXPECT_EQ(b.counters().pass_through.get(), 0u);
  EXPECT_EQ(b.counters().requests.get(), 0u);
}

TEST(RequestPath, ARetransmittedPrefixIsNotParsedAgain) {
  RequestBench b;
  ASSERT_EQ(b.feed(kGet).last().stop, Stop::kEnd);
  // The first request again, with a new one after it: only the new one is
  // parsed and charged; the segment goes on whole.
  const Segment s = b.feed(std::string(kGet) + std::string(kGet), kFirst);
  EXPECT_EQ(s.last().stop, Stop::kEnd);
  EXPECT_EQ(s.last().forward_bytes, 2 * len(kGet));
  EXPECT_EQ(b.counters().requests.get(), 2u);
  EXPECT_EQ(b.flow().client.next, kFirst + 2 * len(kGet));
}

TEST(RequestPath, APipelinedRequestAfterAReleasedHeadIsParsedInTheSameSegment) {
  RequestBench b;
  ASSERT_EQ(b.feed(kGet.substr(0, 20)).last().stop, Stop::kHeld);
  // The held head completes, and the next one begins and is held in turn:
  // the first's held bytes leave before the second's are copied over them.
  const Segment s = b.feed(std::string(kGet.substr(20)) + std::string(kGet.substr(0, 15)));
  ASSERT_TRUE(s.released_held());
  EXPECT_EQ(s.last().stop, Stop::kHeld);
  EXPECT_EQ(s.last().forward_bytes, len(kGet) - 20);
  EXPECT_EQ(b.flow().client.held_seq, kFirst + len(kGet));
  EXPECT_EQ(b.counters().admitted.get(), 1u);
}

}  // namespace
}  // namespace sluice::test

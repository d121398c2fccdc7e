// Answers that keep the connection open (policy after_answer:
// keep-alive), whole conversations through the flow engine: a refused
// request's bytes are cut out of the client's stream (the origin never sees
// them, and later client sequence numbers are shifted towards it), its 429 is
// spliced into the origin's stream after the responses to earlier requests,
// and the connection then serves the next admitted request. The refused
// request stays unacknowledged until the client has the whole answer, so a
// lost answer is sent again when the client sends the request again.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "flow_harness.h"

namespace sluice::test {
namespace {

using dataplane::FrameAction;
using dataplane::Side;
namespace flag = dataplane::tcp_flag;

constexpr std::string_view kOk = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
constexpr std::string_view kOther = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nother";

bool is_kept_answer(std::string_view p) {
  return p.rfind("HTTP/1.1 429 ", 0) == 0 && p.find("\r\n\r\nslow down") != std::string_view::npos &&
         p.find("Connection: close") == std::string_view::npos;
}

// The connection's handshake, then /tight's one request an hour spent on
// it, answered: the next /tight request on it is refused.
void spend_tight(Connection& c) {
  c.handshake();
  ASSERT_TRUE(c.data(kTight).forwarded());
  ASSERT_TRUE(c.respond(kOk).forwarded());
}

// A refused request on a kept-open connection: the origin sees nothing of
// it, the client gets the 429 (without Connection: close, no FIN) right
// after the response it has, acknowledging the request only once the answer
// is acknowledged; the next admitted request reaches the origin renumbered.
TEST(KeptAnswer, TB14_TheRefusedRequestIsCutOutAndTheConnectionServesTheNext) {
  EngineWorld w(kKeepPolicy);
  Connection c(w);
  ASSERT_NO_FATAL_FAILURE(spend_tight(c));
  const uint32_t refused_at = c.client_seq_;
  const size_t before = w.sink.sent.size();
  const Fed refused = c.data(kTight);
  EXPECT_TRUE(refused.payload_withheld());
  EXPECT_EQ(w.counters.refused.get(), 1u);
  EXPECT_EQ(w.counters.answers_kept_open.get(), 1u);
  const auto answer = sent_to(w, Side::kClient, before);
  ASSERT_EQ(answer.size(), 1u);
  EXPECT_TRUE(is_kept_answer(answer[0].payload())) << answer[0].payload();
  EXPECT_FALSE(answer[0].view.has(flag::kFin));
  EXPECT_EQ(answer[0].view.seq, c.origin_seq_);  // right after the response
  EXPECT_EQ(answer[0].view.ack, refused_at);      // the request not yet acknowledged
  EXPECT_TRUE(sent_to(w, Side::kOrigin, before).empty());  // no RST: the origin's socket stays
  const uint32_t n = answer[0].view.payload_len;
  const uint32_t cut = static_cast<uint32_t>(kTight.size());

  // The client acknowledges the answer: the origin hears of its own bytes
  // only, and the appliance acknowledges the refused request.
  const size_t before_ack = w.sink.sent.size();
  const Fed ack = c.client(flag::kAck, "", {}, c.origin_seq_ + n);
  ASSERT_TRUE(ack.forwarded());
  EXPECT_EQ(ack.view.ack, c.origin_seq_);
  EXPECT_EQ(ack.view.seq, refused_at);
  const auto acks = sent_to(w, Side::kClient, before_ack);
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_EQ(acks[0].view.payload_len, 0u);
  EXPECT_EQ(acks[0].view.ack, refused_at + cut);
  EXPECT_EQ(acks[0].view.seq, c.origin_seq_ + n);

  // The next request on the same connection: admitted, renumbered.
  const Fed next = c.client(flag::kAck | flag::kPsh, kLoose, {}, c.origin_seq_ + n);
  ASSERT_TRUE(next.forwarded());
  EXPECT_EQ(next.payload(), kLoose);
  EXPECT_EQ(next.view.seq, refused_at);
  EXPECT_EQ(next.view.ack, c.origin_seq_);
  // Its response, in the client's numbers both ways.
  const Fed resp = c.origin(flag::kAck | flag::kPsh, kOther, {}, refused_at + static_cast<uint32_t>(kLoose.size()));
  ASSERT_TRUE(resp.forwarded());
  EXPECT_EQ(resp.payload(), kOther);
  EXPECT_EQ(resp.view.seq, c.origin_seq_ - kOther.size() + n);
  EXPECT_EQ(resp.view.ack, c.client_seq_);
  EXPECT_EQ(w.counters.admitted.get(), 2u);
}

// A client refused again and again on one connection (its budget spent,
// the origin silent): each refusal's removal is folded once the client has
// its answer, so the connection stays open however many there are (it was
// closed every 32, when the removals filled the shift), and the next
// admitted request still reaches the origin where its stream stands.
TEST(KeptAnswer, ManyRefusalsInARowKeepTheConnectionOpen) {
  EngineWorld w(kKeepPolicy);
  Connection c(w);
  ASSERT_NO_FATAL_FAILURE(spend_tight(c));
  const uint32_t origin_next = c.client_seq_;  // the origin has every byte before here
  uint32_t origin_sent = c.origin_seq_;        // the client's view of the origin's stream
  for (int i = 0; i < 100; ++i) {
    const size_t before = w.sink.sent.size();
    // Each request acknowledges the answer before it, as a keep-alive
    // client's next request does.
    ASSERT_TRUE(c.client(flag::kAck | flag::kPsh, kTight, {}, origin_sent).payload_withheld()) << "request " << i;
    // Its answer (and an acknowledgement of the request before, now that
    // the client has that one's answer).
    uint32_t answered = 0;
    for (const SentSegment& seg : sent_to(w, Side::kClient, before)) {
      if (seg.view.payload_len == 0) continue;
      ASSERT_TRUE(is_kept_answer(seg.payload())) << "request " << i << ": " << seg.payload();
      answered += seg.view.payload_len;
    }
    ASSERT_NE(answered, 0u) << "request " << i << " unanswered";
    origin_sent += answered;
  }
  EXPECT_EQ(w.counters.refused.get(), 100u);
  EXPECT_EQ(w.counters.answers_sent.get(), 0u) << "no closing answer";
  const Fed next = c.client(flag::kAck | flag::kPsh, kLoose, {}, origin_sent);
  ASSERT_TRUE(next.forwarded());
  EXPECT_EQ(next.payload(), kLoose);
  EXPECT_EQ(next.view.seq, origin_next) << "the refused requests are not in the origin's stream";
}

// The answer is lost: the client sends the refused request again (it was
// never acknowledged), and gets the same answer at the same place, uncharged;
// the origin gets a bare acknowledgement at most.
TEST(KeptAnswer, ALostAnswerIsSentAgainWhenTheClientSendsItsRequestAgain) {
  EngineWorld w(kKeepPolicy);
  Connection c(w);
  ASSERT_NO_FATAL_FAILURE(spend_tight(c));
  const uint32_t refused_at = c.client_seq_;
  const size_t before = w.sink.sent.size();
  ASSERT_TRUE(c.data(kTight).payload_withheld());
  const auto first = sent_to(w, Side::kClient, before);
  ASSERT_EQ(first.size(), 1u);

  const size_t before_again = w.sink.sent.size();
  const Fed again = c.client(flag::kAck | flag::kPsh, kTight, refused_at);
  EXPECT_TRUE(again.payload_withheld());
  const auto second = sent_to(w, Side::kClient, before_again);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].payload(), first[0].payload());
  EXPECT_EQ(second[0].view.seq, first[0].view.seq);
  EXPECT_EQ(w.counters.refused.get(), 1u);
  EXPECT_EQ(w.counters.kept_answers_resent.get(), 1u);
  EXPECT_TRUE(sent_to(w, Side::kOrigin, before).empty());
}

// Pipelined: an admitted request, a refused one and an admitted one in one
// segment. The origin gets the two admitted ones back to back; the 429 goes
// into the origin's segment between the two responses, in request order.
TEST(KeptAnswer, APipelinedRefusalIsAnsweredInRequestOrder) {
  EngineWorld w(kKeepPolicy);
  Connection c(w);
  c.handshake();
  const uint32_t first_origin = c.origin_seq_;
  const std::string burst = std::string(kTight) + std::string(kTight) + std::string(kLoose);
  const size_t before = w.sink.sent.size();
  const Fed f = c.data(burst);
  ASSERT_TRUE(f.forwarded());
  EXPECT_EQ(f.payload(), std::string(kTight) + std::string(kLoose));
  EXPECT_TRUE(sent_to(w, Side::kClient, before).empty());  // the 429 waits for the first response
  EXPECT_EQ(w.counters.refused.get(), 1u);

  // Both responses in one segment, acknowledging what the origin got.
  const uint32_t origin_got = f.view.seq + f.view.payload_len;
  const std::string both = std::string(kOk) + std::string(kOther);
  const size_t before_resp = w.sink.sent.size();
  const Fed resp = c.origin(flag::kAck | flag::kPsh, both, {}, origin_got);
  EXPECT_EQ(resp.action, FrameAction::kDrop);  // written again with the answer in it
  StreamView view(first_origin);
  view.add_sent(w, Side::kClient, before_resp);
  const std::string got = view.contiguous();
  ASSERT_GT(got.size(), both.size());
  EXPECT_EQ(got.substr(0, kOk.size()), kOk);
  EXPECT_TRUE(is_kept_answer(got.substr(kOk.size(), got.size() - both.size()))) << got;
  EXPECT_EQ(got.substr(got.size() - kOther.size()), kOther);
  // Until the client has the answer, the refused request stays unacknowledged.
  for (const SentSegment& s : sent_to(w, Side::kClient, before_resp)) {
    EXPECT_EQ(s.view.ack, c.client_seq_ - kTight.size() - kLoose.size());
  }
  // The client acknowledges everything: so does the appliance.
  const size_t before_ack = w.sink.sent.size();
  const Fed ack = c.client(flag::kAck, "", {}, first_origin + static_cast<uint32_t>(got.size()));
  ASSERT_TRUE(ack.forwarded());
  EXPECT_EQ(ack.view.ack, c.origin_seq_);
  const auto acks = sent_to(w, Side::kClient, before_ack);
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_EQ(acks[0].view.ack, c.client_seq_);
  // All done: the context goes back; later segments keep the base shifts.
  EXPECT_EQ(w.engine->contexts().free_count(), w.engine->contexts().size());
  const Fed later = c.data(kLoose);
  ASSERT_TRUE(later.forwarded());
  EXPECT_EQ(later.view.seq, origin_got);
}

// A kept answer still owed to the client, overwritten in the answer store
// by newer answers before it could be spliced in: the stream cannot be
// written as promised, so both ends are reset and the origin's segment that
// should have carried it goes nowhere.
TEST(KeptAnswer, AnAnswerLostFromTheStoreEndsTheConnection) {
  dataplane::EngineConfig config = EngineWorld::small_config();
  config.answer_bytes = 8192;  // the least the store keeps: a few dozen answers
  config.contexts = 16;
  config.flows = 256;
  EngineWorld w(kKeepPolicy, config);
  Connection c(w);
  ASSERT_NO_FATAL_FAILURE(spend_tight(c));
  // /loose then /tight, pipelined: the 429 waits for /loose's response.
  ASSERT_TRUE(c.data(std::string(kLoose) + std::string(kTight)).forwarded());
  ASSERT_EQ(w.counters.answers_kept_open.get(), 1u);
  // Other connections' refusals fill the store meanwhile.
  for (uint16_t port = 41000; port < 41100; ++port) {
    Connection other(w, false, port);
    other.handshake();
    ASSERT_TRUE(other.data(kTight).payload_withheld());
  }
  const size_t mark = w.sink.sent.size();
  const size_t free_before = w.engine->contexts().free_count();
  const Fed resp = c.respond(kOk);
  EXPECT_FALSE(resp.forwarded());
  EXPECT_EQ(w.counters.answers_lost.get(), 1u);
  const auto to_client = sent_to(w, Side::kClient, mark);
  const auto to_origin = sent_to(w, Side::kOrigin, mark);
  ASSERT_EQ(to_client.size(), 1u);
  ASSERT_EQ(to_origin.size(), 1u);
  EXPECT_TRUE(to_client[0].view.has(flag::kRst));
  EXPECT_TRUE(to_origin[0].view.has(flag::kRst));
  EXPECT_EQ(w.engine->contexts().free_count(), free_before + 1);  // the flow's context is given back
}

// A refused request's body is cut out as it arrives, however it is split;
// the appliance acknowledges it (once the answer is acknowledged), and the
// request after it reaches the origin renumbered by head and body.
TEST(KeptAnswer, ARefusedRequestsBodyIsAbsorbedAsItArrives) {
  EngineWorld w(kKeepPolicy);
  Connection c(w);
  ASSERT_NO_FATAL_FAILURE(spend_tight(c));
  const uint32_t refused_at = c.client_seq_;
  const std::string head = "POST /tight HTTP/1.1\r\nHost: api\r\nContent-Length: 10\r\n\r\n";
  const size_t before = w.sink.sent.size();
  ASSERT_TRUE(c.data(head + "0123").payload_withheld());
  const auto answer = sent_to(w, Side::kClient, before);
  ASSERT_EQ(answer.size(), 1u);
  ASSERT_TRUE(is_kept_answer(answer[0].payload()));
  const uint32_t n = answer[0].view.payload_len;
  // More of the body before the answer is acknowledged: cut, and not
  // acknowledged yet.
  size_t mark = w.sink.sent.size();
  const Fed more = c.data("45");
  ASSERT_TRUE(more.payload_withheld());
  if (more.forwarded()) {
    EXPECT_EQ(more.view.seq, refused_at);
  }
  auto acks = sent_to(w, Side::kClient, mark);
  EXPECT_TRUE(acks.empty());
  // The answer acknowledged along with the rest of the body.
  mark = w.sink.sent.size();
  ASSERT_TRUE(c.client(flag::kAck | flag::kPsh, "6789", {}, c.origin_seq_ + n).payload_withheld());
  acks = sent_to(w, Side::kClient, mark);
  ASSERT_FALSE(acks.empty());
  EXPECT_EQ(acks.back().view.ack, c.client_seq_);
  const Fed next = c.client(flag::kAck | flag::kPsh, kLoose, {}, c.origin_seq_ + n);
  ASSERT_TRUE(next.forwarded());
  EXPECT_EQ(next.payload(), kLoose);
  EXPECT_EQ(next.view.seq, refused_at);
  EXPECT_EQ(w.counters.refused.get(), 1u);
  EXPECT_EQ(w.counters.admitted.get(), 2u);
}

// With the admitted responses' fields inserted too: both edits in one
// stream, every byte where the client expects it.
TEST(KeptAnswer, TB16_FieldsAndAKeptAnswerShareOneStream) {
  EngineWorld w(kKeepPolicy, EngineWorld::with_fields());
  Connection c(w);
  c.handshake();
  const uint32_t first_origin = c.origin_seq_;
  StreamView view(first_origin);
  size_t mark = w.sink.sent.size();
  ASSERT_TRUE(c.data(kTight).forwarded());
  view.add(c.respond(kOk));
  ASSERT_TRUE(c.data(kTight).payload_withheld());
  view.add_sent(w, Side::kClient, mark);
  std::string got = view.contiguous();
  ASSERT_TRUE(got.rfind("HTTP/1.1 200 OK\r\nRateLimit-Limit: 1\r\n", 0) == 0) << got;
  const size_t answer_at = got.find("HTTP/1.1 429 ");
  ASSERT_NE(answer_at, std::string::npos) << got;
  EXPECT_TRUE(is_kept_answer(got.substr(answer_at))) << got;
  EXPECT_EQ(got.substr(answer_at - 2, 2), "ok");

  const uint32_t client_has = first_origin + static_cast<uint32_t>(got.size());
  mark = w.sink.sent.size();
  const Fed next = c.client(flag::kAck | flag::kPsh, kLoose, {}, client_has);
  ASSERT_TRUE(next.forwarded());
  EXPECT_EQ(next.view.ack, c.origin_seq_);
  view.add(c.origin(flag::kAck | flag::kPsh, kOther, {}, next.view.seq + next.view.payload_len));
  view.add_sent(w, Side::kClient, mark);
  got = view.contiguous();
  const std::string tail = got.substr(answer_at);
  const size_t second = tail.find("HTTP/1.1 200 OK\r\nRateLimit-Limit: 1000\r\n");
  ASSERT_NE(second, std::string::npos) << got;
  EXPECT_EQ(got.substr(got.size() - 5), "other");
  EXPECT_EQ(w.counters.fields_inserted.get(), 2u);
}

// Clients that never acknowledge their 429 keep their contexts; with a
// quarter of the pool left, answers close the connection instead (and give
// their context back), so a flood of refused requests cannot take every
// context.
TEST(KeptAnswer, WithFewContextsLeftAnswersCloseTheConnection) {
  dataplane::EngineConfig config = EngineWorld::small_config();  // 8 contexts
  EngineWorld w(kKeepPolicy, config);
  std::vector<std::unique_ptr<Connection>> conns;
  {
    Connection spend(w, false, 39000);  // /tight's one request an hour, spent
    spend.handshake();
    ASSERT_TRUE(spend.data(kTight).forwarded());
    ASSERT_TRUE(spend.respond(kOk).forwarded());
  }
  for (uint16_t port = 39001; port < 39009; ++port) {
    conns.push_back(std::make_unique<Connection>(w, false, port));
    conns.back()->handshake();
    ASSERT_TRUE(conns.back()->data(kTight).payload_withheld());
  }
  EXPECT_EQ(w.counters.refused.get(), 8u);
  EXPECT_EQ(w.counters.answers_kept_open.get(), 6u);  // until 2 of the 8 contexts were left
  EXPECT_EQ(w.counters.answers_sent.get(), 2u);       // then with FIN, the context given back
  EXPECT_EQ(w.engine->contexts().free_count(), 2u);
}

// Where the answer closes the connection after all (the client asked to
// close), the close path answers as before: 429, Connection: close, FIN,
// the origin reset.
TEST(KeptAnswer, AClientThatAsksToCloseGetsTheClosingAnswer) {
  EngineWorld w(kKeepPolicy);
  Connection c(w);
  ASSERT_NO_FATAL_FAILURE(spend_tight(c));
  const size_t before = w.sink.sent.size();
  EXPECT_EQ(c.data("GET /tight HTTP/1.1\r\nHost: api\r\nConnection: close\r\n\r\n").action, FrameAction::kDrop);
  const auto answer = sent_to(w, Side::kClient, before);
  ASSERT_EQ(answer.size(), 1u);
  EXPECT_NE(answer[0].payload().find("Connection: close\r\n"), std::string::npos);
  EXPECT_TRUE(answer[0].view.has(flag::kFin));
  const auto to_origin = sent_to(w, Side::kOrigin, before);
  ASSERT_EQ(to_origin.size(), 1u);
  EXPECT_TRUE(to_origin[0].view.has(flag::kRst));
  EXPECT_EQ(w.counters.answers_kept_open.get(), 0u);
}

}  // namespace
}  // namespace sluice::test

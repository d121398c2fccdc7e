// The request path: a client segment's new bytes parsed into requests, each
// head decided by the limiter, and a plan for the segment returned. It
// writes no packet and edits no stream; the flow engine applies the plan
// (through the stream editor and the answer sender). Its unit tests feed it
// bytes and read plans, with no TCP in sight.
//
// A plan says, in the client's sequence numbers where a position is meant:
// how much of the segment goes to the origin now (the rest is cut off: a
// refused request's, one held back, or the client's to send again), whether
// a head split across segments is held (and acknowledged to the client in
// the origin's name) or, now admitted, released to the origin ahead of the
// segment, which refused requests are cut out of a kept-open connection
// ([from, to), answered after response k), and whether the connection is
// answered and closed, or leaves HTTP.
//
// Owns: the DecisionScratch, and the buffer answers are written into in
// HTTP/1 (http/limiter_answer.h); the per-rule counting of decisions. Touches: the
// request half of the flow's parse context (request stream, head buffer,
// buffering and absorbing, the queues of what each forwarded request's
// response gets), the flow's client.next and client.held_seq, the bucket table
// (through limiter::decide), and the AnswerStore (a kept-open answer's text is
// put there when it is decided, since the next answer reuses the buffer),
// and the worker's refusal sampler (every refusal and answer offered).
//
// Choices a reader should know:
// - A head that arrives in one segment costs no copy; its views point into
//   the segment. A head split across segments is copied into the context and
//   held, its segments dropped and acknowledged; once it is complete and
//   admitted, the held bytes go to the origin as segments of their own ahead
//   of the completing one. A refused request never reaches the origin, not
//   even in part.
// - Back-pressure: at most http::ResponseStream::kMaxOutstanding requests
//   may await responses on one connection; past that the rest of a
//   pipelined segment is cut off, uncharged, for the client to send again.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>

#include "answer_store.h"
#include "delay_queue.h"
#include "limiter/decide.h"
#include "parse_context.h"
#include "policy_snapshot.h"
#include "penalty_log.h"
#include "refusal_sampler.h"
#include "tcp_flow.h"
#include "worker_counters.h"

namespace sluice::dataplane {

// A refusal answered on a connection that stays open: the request's bytes
// [from, to) are cut out of the client's stream (`to` grows while its body
// arrives), and its answer (pos, len in the AnswerStore) goes to the client
// once `after` responses have ended. Trivial, so a plan's array of them is
// not written until used.
struct KeptRefusal {
  uint32_t from;
  uint32_t to;
  uint32_t after;
  uint16_t len;
  uint64_t pos;
};

struct RequestPlan {
  // Why parsing stopped.
  enum class Stop : uint8_t {
    kEnd,          // every new byte was parsed
    kReleaseHeld,  // a held head was admitted: its held bytes [client.held_seq, segment start) go to the origin
                   // ahead of the segment, then parsing goes on (call parse() again with the same cursor)
    kHeld,         // the rest of the segment belongs to a head held back: the client is acknowledged
    kPaused,       // the rest waits: a protocol switch is pending, or too many requests are unanswered
    kAnswerClose,  // refused (or answered) and the connection closes: `answer`, the origin reset at reset_seq
    kPassThrough,  // the connection left HTTP: bridged from here on
    kReset,        // both ends reset, nothing judged: an adopted connection's request with a body or a protocol
                   // switch (flow_adopter.h), or a PROXY protocol header where none may be or none where one must
    kDelayed,      // a head admitted late (a rule's delay) is held from client.held_seq to client.next: the client
                   // is acknowledged, the rest of the segment is its to send again, the head is in the delay queue
  };
  Stop stop = Stop::kEnd;
  // The segment's payload bytes that go to the origin now, from its start;
  // past them it is cut (a FIN after the cut is not sent). 0: dropped.
  uint32_t forward_bytes = 0;
  // The last kept-open refusal of an earlier segment is still absorbing its
  // body: its removal now ends at absorbed_to.
  bool absorbed = false;
  uint32_t absorbed_to = 0;
  // Refusals cut out of the stream, in request order (the last may still be
  // absorbing its body).
  uint8_t kept = 0;
  std::array<KeptRefusal, http::ResponseStream::kMaxOutstanding> refusals;
  // kAnswerClose: the answer (in the request path's buffer: apply it before
  // the next parse()) and the client byte at which the origin's stream stops.
  std::span<const char> answer;
  uint32_t reset_seq = 0;
  // A PROXY protocol header this long begins the stream (the client's
  // first bytes) and is taken out of the stream to the origin
  // (client_ip proxy_protocol: strip).
  uint32_t strip = 0;
};

// Where a segment's parse stands; kept across parse() calls on one segment.
struct RequestCursor {
  uint32_t seq = 0;         // the sequence number of the segment's first payload byte
  uint32_t skip = 0;        // payload bytes parsed before (a retransmitted prefix)
  uint32_t off = 0;         // new bytes parsed so far
  uint32_t head_start = 0;  // where the head being parsed began in the new bytes, if it began in them
  bool head_began_here = true;
};

class RequestPath {
 public:
  RequestPath(limiter::LimiterState& limiter, ContextPool& contexts, AnswerStore& answers, WorkerCounters& counters,
              uint64_t trace_seed);

  // A cursor for a segment whose payload starts at client sequence `seq`,
  // the flow's parse standing at flow.client.next (inside or at its start).
  [[nodiscard]] static RequestCursor cursor(const TcpFlow& flow, const ParseContext& ctx, uint32_t seq) noexcept {
    return RequestCursor{seq, flow.client.next - seq, 0, 0, !ctx.buffering};
  }

  // Parses the segment's new bytes (`payload` is the whole payload) under
  // the context's policy (moved to `snap`'s between messages), deciding each
  // head. With `contexts_scarce`, no refusal is kept open (a kept answer
  // holds its context until the client acknowledges it).
  [[nodiscard]] RequestPlan parse(TcpFlow& flow, ParseContext& ctx, const PolicySnapshot& snap,
                                  std::span<const char> payload, RequestCursor& cur, bool contexts_scarce,
                                  time::Nanos now) noexcept;

  // A plan that answers a head past its deadline with 408 and closes: the
  // origin reset where the held head began (it never saw a byte of it).
  // Apply it as a kAnswerClose plan of parse().
  [[nodiscard]] RequestPlan time_out(TcpFlow& flow, ParseContext& ctx) noexcept;

  // Whether admitted requests' responses get the decision's rate-limit
  // fields (rendered only then).
  void set_insert_fields(bool on) noexcept;
  // Where admissions on cluster buckets are recorded.
  void set_spend_log(limiter::SpendLog* log) noexcept { scratch_->spends = log; }
  // Where refusals and answers are offered for the audit log
  // (none: not offered).
  void set_refusal_sampler(RefusalSampler* sampler) noexcept { refusals_ = sampler; }
  // Where the keys it boxes are handed on (none: not handed on).
  void set_penalty_log(PenaltyLog* log) noexcept { penalties_ = log; }
  // Where heads admitted late wait for their time (none: no rule delays).
  void set_delay_queue(DelayQueue* queue) noexcept { delays_ = queue; }

 private:
  // The steps of parse(). Those every request takes are forced inline: each
  // runs once per request, and kept apart they spread the request path's
  // code over more instruction-cache lines (it is close to filling L1I).
  struct Pass;
  enum class Next : uint8_t { kContinue, kReturn };
  Next on_need_more(Pass& p) noexcept;
  [[gnu::always_inline]] inline Next on_head(Pass& p, const http::StreamStep& st) noexcept;
  [[gnu::always_inline]] inline void on_message_end(Pass& p, const http::StreamStep& st) noexcept;
  // The head just parsed is forwarded: count it, and queue what its response gets.
  [[gnu::always_inline]] inline void forward_request(Pass& p, const limiter::Decision& d) noexcept;
  // A head about to be forwarded (`held`: from the context's copy) into the
  // context's record of judged heads.
  [[gnu::always_inline]] inline void record_head(Pass& p, bool held) noexcept;
  // Bytes of a forwarded chunked body the stream just consumed, into the
  // same record; the body's end (or an error) stops recording.
  void record_body(Pass& p, const http::StreamStep& st) noexcept;
  [[nodiscard]] bool keep_open(Pass& p, const limiter::Decision& d) noexcept;
  void absorbed_to(Pass& p, uint32_t upto) noexcept;
  // Written with `Connection: close`: the connection closes after it.
  void answer_and_close(Pass& p, const limiter::Decision& d) noexcept;
  // `d`'s answer in HTTP/1, in answer_text_ until the next one; empty if it
  // does not fit.
  [[nodiscard]] std::span<const char> write_answer(const limiter::CompiledPolicy& policy, const limiter::Decision& d,
                                                   bool keep_alive) noexcept;
  void refuse_unparsable(Pass& p, http::ParseError e) noexcept;
  void count_admitted(const limiter::Decision& d) noexcept;
  void count_refused(const limiter::Decision& d) noexcept;
  // A decision of a rule's penalty box: counted, and a boxing handed on.
  void note_penalty(time::Nanos now, const limiter::Decision& d) noexcept;
  // The stream's first bytes, under client_ip proxy_protocol: a PROXY
  // header from a trusted proxy (required of it) names the client and is
  // passed over (or stripped); from anyone else it ends the connection.
  Next read_relay(Pass& p) noexcept;
  // Whether a rule's delay may admit the head just parsed late: the worker
  // has room to hold it, and its bytes fit the context's head buffer.
  [[nodiscard]] bool may_delay(const Pass& p) const noexcept;
  // The head just decided is admitted late: held (copied into the context
  // if it came whole), the segment cut at its start, queued for its time.
  Next hold_delayed(Pass& p, const limiter::Decision& d, bool held) noexcept;

  static constexpr uint32_t kAdmissionSample = 16;  // a power of two

  limiter::LimiterState& limiter_;
  ContextPool& contexts_;
  AnswerStore& answers_;
  WorkerCounters& counters_;
  std::unique_ptr<limiter::DecisionScratch> scratch_;
  std::unique_ptr<char[]> answer_text_;  // http::kMaxAnswerBytes: the latest answer, in HTTP/1
  bool insert_fields_ = true;
  uint32_t admissions_ = 0;  // picks which admissions reach counters_.busy
  RefusalSampler* refusals_ = nullptr;
  PenaltyLog* penalties_ = nullptr;
  DelayQueue* delays_ = nullptr;
};

}  // namespace sluice::dataplane

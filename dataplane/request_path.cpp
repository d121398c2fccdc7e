// A client segment's new bytes cut into requests and decided; see
// request_path.h for what a plan says and who applies it.
#include "request_path.h"

#include <algorithm>
#include <cstring>

#include "http/limiter_answer.h"
#include "http/limiter_request.h"
#include "limiter/client_ip.h"
#include "net/proxy_header.h"

namespace sluice::dataplane {

// One parse() call's view of the segment and what it has decided so far.
struct RequestPath::Pass {
  TcpFlow& flow;
  ParseContext& ctx;
  const PolicySnapshot& snap;
  RequestCursor& cur;
  RequestPlan& plan;
  bool contexts_scarce;
  time::Nanos now;
  const char* bytes;  // the new bytes (after the skipped prefix)
  uint32_t n;         // how many
  uint32_t len;       // the whole payload
  uint32_t end;       // the sequence number after the payload
  // The policy a head is parsed and decided under: the one its context was
  // started with, which a reload in the middle of the head does not change
  // (its field ids are the ones the parsed head carries).
  const limiter::CompiledPolicy* policy;
  http::RequestStream* rs;

  // The client sequence number of new byte `i`.
  [[nodiscard]] uint32_t seq_of(uint32_t i) const noexcept { return cur.seq + cur.skip + i; }
  // Cuts the segment at `at` bytes of its payload; parsing stops there.
  void cut(uint32_t at) noexcept { plan.forward_bytes = std::min(at, len); }
};

namespace {

// Between messages a context under a replaced policy moves to the current
// one, so pipelining neither keeps a client on an old policy nor keeps that
// policy alive.
void follow_reload(ContextPool& contexts, int32_t index, ParseContext& ctx, const PolicySnapshot& snap) noexcept {
  if (ctx.generation != snap.generation && !ctx.buffering && ctx.requests->idle()) {
    contexts.renew_requests(index, snap.policy, snap.generation);
  }
}

// Whether a request's bytes go on past its head: a body, or another
// protocol once the origin switches.
bool carries_more(const http::RequestHead& h) noexcept {
  return h.body != http::BodyKind::kNone || h.upgrade || h.method_kind == http::Method::kConnect;
}

}  // namespace

RequestPath::RequestPath(limiter::LimiterState& limiter, ContextPool& contexts, AnswerStore& answers,
                         WorkerCounters& counters, uint64_t trace_seed)
    : limiter_(limiter),
      contexts_(contexts),
      answers_(answers),
      counters_(counters),
      scratch_(std::make_unique<limiter::DecisionScratch>()),
      answer_text_(std::make_unique<char[]>(http::kMaxAnswerBytes)) {
  scratch_->trace_seed = trace_seed;
}

void RequestPath::set_insert_fields(bool on) noexcept {
  insert_fields_ = on;
}

RequestPath::Next RequestPath::on_need_more(Pass& p) noexcept {
  ParseContext& ctx = p.ctx;
  RequestCursor& cur = p.cur;
  if (!ctx.buffering && p.rs->head_in_progress()) {
    // The head goes on in the next segment, and its views point into this
    // one, which is forwarded now: feed it again from a copy.
    const size_t part = p.n - cur.head_start;
    if (part >= ctx.head_capacity) {
      refuse_unparsable(p, http::ParseError::kHeadTooLarge);
      return Next::kReturn;
    }
    std::memcpy(ctx.head, p.bytes + cur.head_start, part);
    ctx.head_len = part;
    ctx.buffering = true;
    ctx.head_since = p.now;
    cur.head_began_here = false;
    p.flow.client.held_seq = p.seq_of(cur.head_start);
    p.rs->restart_head();
    const http::StreamStep again = p.rs->next({ctx.head, part});
    if (again.event == http::StreamEvent::kError) {
      refuse_unparsable(p, again.error);
      return Next::kReturn;
    }
    // Forward what came before the head; hold the head.
    p.cut(cur.skip + cur.head_start);
  } else if (ctx.buffering) {
    p.plan.forward_bytes = 0;  // all of it belongs to the held head
  }
  cur.off = p.n;
  if (!ctx.buffering) return Next::kContinue;
  p.flow.client.next = p.end;
  p.plan.stop = RequestPlan::Stop::kHeld;
  return Next::kReturn;
}

RequestPath::Next RequestPath::on_head(Pass& p, const http::StreamStep& st) noexcept {
  ParseContext& ctx = p.ctx;
  p.cur.off += static_cast<uint32_t>(st.consumed);
  if (p.flow.adoption.active && carries_more(p.rs->head())) [[unlikely]] {
    // Where an adopted connection's stream stands is a guess from a
    // segment that looked like a head (flow_adopter.h). Were the origin in
    // fact inside an earlier body, bytes it reads as a request could pass
    // as this one's body: an adopted connection carries heads only.
    counters_.adopted_reset.add();
    p.plan.stop = RequestPlan::Stop::kReset;
    return Next::kReturn;
  }
  counters_.requests.add();
  const limiter::Request request = http::limiter_request(
      p.rs->head(), limiter::ConnectionFacts{p.flow.client_address(), p.flow.key.origin, p.flow.key.origin_port});
  scratch_->may_delay = p.policy->delays && may_delay(p);
  const limiter::Decision d = limiter::decide(*p.policy, limiter_, request, p.now, *scratch_);
  const bool answered = d.verdict == limiter::Verdict::kRefuse || d.verdict == limiter::Verdict::kAnswer;
  bool delayed = d.delay != 0;
  if (delayed && (p.policy->shadow || p.policy->rules[static_cast<size_t>(d.rule)].shadow)) [[unlikely]] {
    counters_.delay_shadowed.add();  // observed only: it goes on now
    delayed = false;
  }
  const bool release = ctx.buffering && !answered;
  if (release) ctx.buffering = false;  // the held part goes to the origin ahead of this segment
  ctx.head_len = 0;
  // A path origins read differently: refused, or judged by its strictest
  // reading (docs/paths.md). Counted beside the verdict, not instead of it.
  if (d.path_reading == limiter::PathReading::kRefused) [[unlikely]] {
    counters_.paths_refused.add();
  } else if (d.path_reading == limiter::PathReading::kStrictest) [[unlikely]] {
    counters_.paths_strictest.add();
  }
  switch (d.verdict) {
    case limiter::Verdict::kForward:
      counters_.forwarded.add();
      break;
    case limiter::Verdict::kExempt:
      counters_.exempt.add();
      break;
    case limiter::Verdict::kAdmit:
      counters_.admitted.add();
      if (d.shadow_refusal) counters_.shadow_refusals.add();
      count_admitted(d);
      break;
    case limiter::Verdict::kRefuse:
      counters_.refused.add();
      count_refused(d);
      if (!scratch_->may_delay && d.rule >= 0 && p.policy->rules[static_cast<size_t>(d.rule)].delay_max != 0)
          [[unlikely]] {
        counters_.delay_full.add();
      }
      break;
    case limiter::Verdict::kAnswer:
      counters_.answered.add();
      if (d.rule >= 0) counters_.rules[d.rule_counter].answered.add();
      break;
  }
  if (d.penalty != limiter::Decision::Penalty::kNone) [[unlikely]] note_penalty(p.now, d);
  if (d.refused_in_flight) [[unlikely]] counters_.in_flight_refused.add();
  if (answered) {
    if (refusals_ != nullptr) refusals_->offer(p.now, d, p.flow.client_address());
    if (keep_open(p, d)) return Next::kContinue;
    // Kept open it could not be: the answer goes with FIN, and says so.
    answer_and_close(p, d);
    return Next::kReturn;
  }
  record_head(p, release);
  ctx.judging_body = p.rs->head().body == http::BodyKind::kChunked;
  forward_request(p, d);
  if (delayed) [[unlikely]] return hold_delayed(p, d, release);
  if (!release) return Next::kContinue;
  // The held bytes must leave before anything else is parsed: the next head
  // held back would be copied over them.
  p.plan.stop = RequestPlan::Stop::kReleaseHeld;
  return Next::kReturn;
}

RequestPath::Next RequestPath::read_relay(Pass& p) noexcept {
  using Status = net::ProxyHeader::Status;
  const policy::ClientIpSpec& spec = p.policy->client_ip.spec;
  const bool trusted = limiter::trusted_proxy(spec, p.flow.key.client);
  const net::ProxyHeader h = net::read_proxy_header({p.bytes, p.n});
  switch (h.status) {
    case Status::kNone:
      if (!trusted) return Next::kContinue;  // a client of its own: HTTP from the first byte
      counters_.proxy_missing.add();
      break;
    case Status::kIncomplete:
      // From anyone else it is read as HTTP, where it can be no request
      // the origin reads as a header (its head is held until whole).
      if (!trusted) return Next::kContinue;
      // The rest is the sender's to send again (a retransmission usually
      // carries more); the first-head deadline bounds the wait.
      p.plan.forward_bytes = 0;
      p.plan.stop = RequestPlan::Stop::kPaused;
      return Next::kReturn;
    case Status::kMalformed:
      counters_.proxy_malformed.add();
      break;
    case Status::kRelayed:
    case Status::kLocal:
      if (!trusted) {
        counters_.proxy_untrusted.add();  // a client naming someone else
        break;
      }
      counters_.proxy_headers.add();
      if (h.status == Status::kRelayed) {
        p.flow.relayed.active = true;
        p.flow.relayed.client = h.source;
        p.flow.relayed.port = h.source_port;
      }
      if (spec.proxy_protocol == policy::ClientIpSpec::ProxyProtocol::kStrip) {
        p.plan.strip = h.length;
      } else {
        p.ctx.judged.record(p.seq_of(0), {p.bytes, h.length});  // the origin reads it: judged bytes
      }
      p.cur.off = h.length;
      p.cur.head_start = h.length;
      return Next::kContinue;
  }
  p.plan.stop = RequestPlan::Stop::kReset;
  return Next::kReturn;
}

bool RequestPath::may_delay(const Pass& p) const noexcept {
  // A whole head is at most the policy's head limit, which the context's
  // buffer may be smaller than; one held across segments is in it already.
  return delays_ != nullptr && !delays_->full() && !p.contexts_scarce &&
         (p.ctx.buffering || p.cur.off - p.cur.head_start < p.ctx.head_capacity);
}

// Its bucket said when: until then the head waits in the context's head
// buffer, acknowledged to the client, and nothing behind it is parsed (the
// client sends it again; a body waits for the client's retransmission).
// FlowEngine::release_delayed sends it to the origin when its time comes.
RequestPath::Next RequestPath::hold_delayed(Pass& p, const limiter::Decision& d, bool held) noexcept {
  ParseContext& ctx = p.ctx;
  const uint32_t end = p.seq_of(p.cur.off);
  if (held) {
    p.cut(0);  // the whole segment is the held head's end
  } else {
    const uint32_t n = p.cur.off - p.cur.head_start;
    std::memcpy(ctx.head, p.bytes + p.cur.head_start, n);  // may_delay(): it fits
    p.flow.client.held_seq = p.seq_of(p.cur.head_start);
    p.cut(p.cur.skip + p.cur.head_start);  // what came before it goes on
  }
  ctx.head_len = end - p.flow.client.held_seq;
  ctx.delayed_until = p.now + d.delay;
  p.flow.client.next = end;
  // may_delay() saw room.
  (void)delays_->push(DelayedHead{ctx.delayed_until, p.flow.key, p.flow.hash, p.flow.context});
  counters_.delayed.add();
  counters_.delay_us_total.add((d.delay + 999) / 1000);
  p.plan.stop = RequestPlan::Stop::kDelayed;
  return Next::kReturn;
}

void RequestPath::record_head(Pass& p, bool held) noexcept {
  const uint32_t end = p.seq_of(p.cur.off);
  if (held) {
    // Held: the whole head is in the context's copy, from its first byte.
    p.ctx.judged.record(p.flow.client.held_seq, {p.ctx.head, end - p.flow.client.held_seq});
  } else {
    p.ctx.judged.record(p.seq_of(p.cur.head_start), {p.bytes + p.cur.head_start, p.cur.off - p.cur.head_start});
  }
}

void RequestPath::record_body(Pass& p, const http::StreamStep& st) noexcept {
  // A chunked body's size lines say where the next request begins: its
  // bytes are judged as a head's are. (No body is ever held.)
  const uint32_t n = st.event == http::StreamEvent::kNeedMore ? p.n - p.cur.off : static_cast<uint32_t>(st.consumed);
  if (n != 0) p.ctx.judged.record(p.seq_of(p.cur.off), {p.bytes + p.cur.off, n});
  if (st.event != http::StreamEvent::kNeedMore) p.ctx.judging_body = false;
}

void RequestPath::forward_request(Pass& p, const limiter::Decision& d) noexcept {
  ParseContext& ctx = p.ctx;
  // Room was checked when this head began.
  (void)ctx.responses.expect(http::request_kind(p.rs->head()));
  ++ctx.requests_forwarded;
  ctx.push_usage(d);
  if (insert_fields_) ctx.push_response_fields(d.verdict == limiter::Verdict::kAdmit ? d.fields : limiter::RateLimitFields{});
}

void RequestPath::on_message_end(Pass& p, const http::StreamStep& st) noexcept {
  ParseContext& ctx = p.ctx;
  RequestCursor& cur = p.cur;
  cur.off += static_cast<uint32_t>(st.consumed);
  if (ctx.absorbing) {
    absorbed_to(p, p.seq_of(cur.off));
    ctx.absorbing = false;
  }
  cur.head_start = cur.off;
  cur.head_began_here = true;
  follow_reload(contexts_, p.flow.context, ctx, p.snap);
  p.policy = ctx.policy;
  p.rs = &*ctx.requests;
}

// A refusal (or other answer) that keeps the connection open: the request's
// bytes so far are cut out of the stream to the origin, the rest of them as
// they come (absorbing), and the answer goes to the client once the
// responses to the requests before it are out. False when the answer closes
// the connection instead (the policy or the request says so, or the flow
// has as many edits in flight as it can keep, or the answer does not fit).
bool RequestPath::keep_open(Pass& p, const limiter::Decision& d) noexcept {
  ParseContext& ctx = p.ctx;
  RequestPlan& plan = p.plan;
  if (p.contexts_scarce || !http::answer_keeps_connection(*p.policy, p.rs->head())) return false;
  // The edits' room, less what this segment's earlier refusals take.
  if (ctx.kept_open_room() <= plan.kept) return false;
  KeptRefusal a;
  a.from = ctx.buffering ? p.flow.client.held_seq : p.seq_of(p.cur.head_began_here ? p.cur.head_start : 0);
  a.to = p.seq_of(p.cur.off);
  // A removal starts after the last one (SeqShift::add), wherever that is
  // recorded yet.
  uint32_t earliest = 0;
  bool bounded = true;
  if (plan.kept != 0) {
    earliest = plan.refusals[plan.kept - 1u].to;
  } else if (plan.absorbed) {
    earliest = plan.absorbed_to;
  } else {
    bounded = ctx.last_removal_end(earliest);
  }
  if (bounded && seq_lt(a.from, earliest)) return false;
  const std::span<const char> text = write_answer(*p.policy, d, true);
  if (text.empty()) return false;
  a.after = ctx.requests_forwarded;
  a.pos = answers_.put(text);
  a.len = static_cast<uint16_t>(std::min(text.size(), kMaxAnswerBytes));
  plan.refusals[plan.kept++] = a;
  ctx.absorbing = true;
  ctx.buffering = false;
  ctx.head_len = 0;
  counters_.answers_kept_open.add();
  return true;
}

// The refused request being absorbed is cut out up to client sequence `upto`.
void RequestPath::absorbed_to(Pass& p, uint32_t upto) noexcept {
  if (p.plan.kept != 0) {
    p.plan.refusals[p.plan.kept - 1u].to = upto;
  } else {
    p.plan.absorbed = true;
    p.plan.absorbed_to = upto;
  }
}

void RequestPath::answer_and_close(Pass& p, const limiter::Decision& d) noexcept {
  const bool held = p.ctx.buffering;
  const uint32_t keep = held ? 0 : p.cur.skip + (p.cur.head_began_here ? p.cur.head_start : 0);
  p.plan.stop = RequestPlan::Stop::kAnswerClose;
  p.plan.answer = write_answer(*p.policy, d, false);
  p.plan.reset_seq = held ? p.flow.client.held_seq : p.cur.seq + keep;
  p.flow.client.next = p.end;
  p.ctx.buffering = false;
  p.cut(keep);
}

RequestPlan RequestPath::time_out(TcpFlow& flow, ParseContext& ctx) noexcept {
  RequestPlan plan;
  plan.stop = RequestPlan::Stop::kAnswerClose;
  plan.answer = write_answer(*ctx.policy, limiter::answer_timeout(*ctx.policy), false);
  plan.reset_seq = ctx.buffering ? flow.client.held_seq : flow.client.next;
  ctx.buffering = false;
  return plan;
}

std::span<const char> RequestPath::write_answer(const limiter::CompiledPolicy& policy, const limiter::Decision& d,
                                                bool keep_alive) noexcept {
  return {answer_text_.get(), http::write_answer(policy, d, keep_alive, {answer_text_.get(), http::kMaxAnswerBytes})};
}

void RequestPath::refuse_unparsable(Pass& p, http::ParseError e) noexcept {
  counters_.parse_errors.add();
  const limiter::Decision d = http::answer_parse_error(*p.policy, e);
  if (refusals_ != nullptr) refusals_->offer(p.now, d, p.flow.client_address());
  answer_and_close(p, d);
}

RequestPlan RequestPath::parse(TcpFlow& flow, ParseContext& ctx, const PolicySnapshot& snap,
                               std::span<const char> payload, RequestCursor& cur, bool contexts_scarce,
                               time::Nanos now) noexcept {
  RequestPlan plan;
  const uint32_t len = static_cast<uint32_t>(payload.size());
  plan.forward_bytes = len;
  if (ctx.delayed_until != 0) [[unlikely]] {
    // Nothing behind a delayed head goes on before it: the client sends it
    // again.
    plan.forward_bytes = 0;
    plan.stop = RequestPlan::Stop::kPaused;
    return plan;
  }
  // On a later call for the same segment the stream is inside a message
  // (a head was just decided), so this changes nothing then.
  follow_reload(contexts_, flow.context, ctx, snap);
  Pass p{flow,           ctx, snap,          cur,        plan,          contexts_scarce, now, payload.data() + cur.skip,
         len - cur.skip, len, cur.seq + len, ctx.policy, &*ctx.requests};

  if (flow.client.next == flow.client.isn + 1 && cur.skip == 0 && cur.off == 0 &&
      p.policy->client_ip.spec.proxy_protocol != policy::ClientIpSpec::ProxyProtocol::kOff) [[unlikely]] {
    if (read_relay(p) == Next::kReturn) return plan;
  }
  // Until the stream needs more bytes: it reports the end of a message
  // without a body (and a pending switch) on a call of its own.
  for (;;) {
    if (p.rs->idle() && cur.off == p.n) break;
    if (p.rs->idle() && ctx.responses.outstanding() >= http::ResponseStream::kMaxOutstanding) {
      // Too many pipelined requests unanswered: hold the rest back, uncharged.
      counters_.backpressure.add();
      flow.client.next = p.seq_of(cur.off);
      p.cut(cur.skip + cur.off);
      plan.stop = RequestPlan::Stop::kPaused;
      return plan;
    }
    std::span<const char> piece;
    if (ctx.buffering && cur.off < p.n) {
      const size_t take = std::min<size_t>(ctx.head_capacity - ctx.head_len, p.n - cur.off);
      if (take == 0) {
        refuse_unparsable(p, http::ParseError::kHeadTooLarge);
        return plan;
      }
      std::memcpy(ctx.head + ctx.head_len, p.bytes + cur.off, take);
      piece = {ctx.head + ctx.head_len, take};
      ctx.head_len += take;
    } else if (!ctx.buffering) {
      piece = {p.bytes + cur.off, p.n - cur.off};
    }
    const http::StreamStep st = p.rs->next(piece);
    if (ctx.judging_body) record_body(p, st);
    switch (st.event) {
      case http::StreamEvent::kNeedMore:
        if (on_need_more(p) == Next::kReturn) return plan;
        break;
      case http::StreamEvent::kHead:
        if (on_head(p, st) == Next::kReturn) return plan;
        continue;
      case http::StreamEvent::kMessageEnd:
        on_message_end(p, st);
        continue;
      case http::StreamEvent::kAwaitSwitch:
        // Nothing after an Upgrade or CONNECT request goes through until the
        // origin has said whether it switches.
        cur.off += static_cast<uint32_t>(st.consumed);
        flow.client.next = p.seq_of(cur.off);
        p.cut(cur.skip + cur.off);
        plan.stop = RequestPlan::Stop::kPaused;
        return plan;
      case http::StreamEvent::kPassThrough:
        if (ctx.buffering) {
          // An HTTP/2 preface held across segments goes to the origin ahead
          // of this one; the next parse() finds the stream bridged.
          ctx.buffering = false;
          ctx.head_len = 0;
          plan.stop = RequestPlan::Stop::kReleaseHeld;
          return plan;
        }
        counters_.pass_through.add();
        plan.stop = RequestPlan::Stop::kPassThrough;
        return plan;
      case http::StreamEvent::kError:
        refuse_unparsable(p, st.error);
        return plan;
    }
    break;  // kNeedMore: every byte is parsed
  }
  if (ctx.absorbing) absorbed_to(p, p.end);
  flow.client.next = p.end;
  return plan;
}

void RequestPath::count_admitted(const limiter::Decision& d) noexcept {
  if (d.rule < 0) return;  // kAdmit and kRefuse always name their rule
  counters_.rules[d.rule_counter].admitted.add();
  // Only one admission in 16 is offered to the busiest keys, weighted 16:
  // the admitted path stays a counter increment most of the time, and a key
  // busy enough to matter is sampled often enough to show.
  if ((++admissions_ & (kAdmissionSample - 1)) == 0) {
    counters_.busy.record(d.rule_counter, d.label, kAdmissionSample);
  }
}

void RequestPath::note_penalty(time::Nanos now, const limiter::Decision& d) noexcept {
  if (d.penalty == limiter::Decision::Penalty::kBoxed) {
    counters_.penalty_refused.add();
    return;
  }
  counters_.penalty_boxed.add();
  if (penalties_ == nullptr) return;
  PenaltyRecord* r = penalties_->slot();
  if (r == nullptr) {
    counters_.penalty_log_dropped.add();
    return;
  }
  r->at = now;
  r->until = d.boxed_until;
  r->rule_slot = d.rule_counter;
  r->label = d.label;
  r->key = d.penalty_key;
  penalties_->publish();
}

void RequestPath::count_refused(const limiter::Decision& d) noexcept {
  if (d.rule < 0) return;
  counters_.rules[d.rule_counter].refused.add();
  counters_.busy.record(d.rule_counter, d.label, 1);
}

}  // namespace sluice::dataplane

// An origin segment framed into responses; see response_path.h.
#include "response_path.h"

#include "limiter/in_flight.h"

namespace sluice::dataplane {

void ResponsePath::status_line(ParseContext& ctx, ResponsePlan& plan, uint32_t at) noexcept {
  // A final response's fields go right after its status line (not an
  // interim 1xx's; a 101 leaves HTTP and gets none).
  const uint16_t code = ctx.responses.status_line_code();
  if (code < 200 && code != 101) return;
  const limiter::RateLimitFields* fields = ctx.take_response_fields();
  if (fields == nullptr || fields->none() || code == 101) return;
  plan.at[plan.points++] = ResponsePoint{ResponsePoint::Kind::kFields, at, 0, fields};
}

void ResponsePath::response_end(ParseContext& ctx, ResponsePlan& plan, uint32_t at, time::Nanos now) noexcept {
  // DQ05: the tokens the origin reported for the request, charged to its
  // bucket's window now that it has ended.
  const ParseContext::UsageNote* usage = ctx.take_usage();
  // A rule's in-flight slot comes free with the response's end.
  if (usage != nullptr && usage->holds_in_flight) {
    limiter::release_in_flight(limiter_.buckets, usage->in_flight_key, limiter_.in_flight_epoch);
  }
  if (usage != nullptr && usage->charge && ctx.responses.head().has_usage) {
    limiter::report_usage(limiter_, usage->key, usage->calendar, ctx.responses.head().usage, now,
                          usage->shared ? spends_ : nullptr);
    counters_.usage_reported.add();
  }
  ++ctx.responses_ended;
  // Kept answers to requests refused after this one go right after it.
  if (ctx.kept_count != 0) {
    plan.at[plan.points++] = ResponsePoint{ResponsePoint::Kind::kResponseEnd, at, ctx.responses_ended, nullptr};
  }
  if (ctx.responses.outstanding() == 0) ctx.requests->resolve_switch(false);
}

ResponsePlan ResponsePath::frame(TcpFlow& flow, ParseContext& ctx, uint32_t seq, std::span<const char> payload,
                                 bool fin, time::Nanos now) noexcept {
  ResponsePlan plan;
  const bool refusing = flow.state == FlowState::kRefusing;
  const uint32_t end = seq + static_cast<uint32_t>(payload.size());
  if (!payload.empty()) {
    const uint32_t skip = flow.origin.next - seq;
    const char* bytes = payload.data() + skip;
    const size_t n = payload.size() - skip;
    size_t off = 0;
    for (;;) {
      const http::ResponseStep st = ctx.responses.next({bytes + off, n - off});
      off += st.consumed;
      const uint32_t at = flow.origin.next + static_cast<uint32_t>(off);  // the byte after the event
      if (st.event == http::ResponseEvent::kNeedMore) break;
      if (st.event == http::ResponseEvent::kHead) continue;
      if (st.event == http::ResponseEvent::kStatusLine) {
        status_line(ctx, plan, at);
        continue;
      }
      if (st.event == http::ResponseEvent::kResponseEnd) {
        response_end(ctx, plan, at, now);
        if (ctx.responses.outstanding() == 0 && refusing) plan.answer_due = true;
        continue;
      }
      if (st.event == http::ResponseEvent::kPassThrough) {
        flow.origin.next = end;
        counters_.pass_through.add();
        ctx.requests->resolve_switch(true);
        plan.stop = ResponsePlan::Stop::kPassThrough;
        return plan;
      }
      // kError: the responses cannot be framed any more; origin.next stays
      // where this segment's bytes begin, which the client will not get.
      counters_.response_errors.add();
      plan.stop = ResponsePlan::Stop::kError;
      return plan;
    }
    flow.origin.next = end;
  }
  if (fin) {
    const http::ResponseStep st = ctx.responses.close();
    if (refusing && (st.event == http::ResponseEvent::kResponseEnd || st.event == http::ResponseEvent::kError)) {
      plan.answer_due = true;
    }
  }
  return plan;
}

}  // namespace sluice::dataplane

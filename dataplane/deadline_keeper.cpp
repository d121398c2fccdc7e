// Which deadline a flow has missed; see deadline_keeper.h.
#include "deadline_keeper.h"

#include <algorithm>

namespace sluice::dataplane {

Owes owes(const TcpFlow& flow, const ParseContext* ctx) noexcept {
  if (ctx != nullptr) {
    if (ctx->delayed_until != 0) return Owes::kWaiting;  // on the appliance: a delayed head
    if (ctx->buffering) return Owes::kHead;
    if (ctx->absorbing || ctx->requests->in_body()) return Owes::kBody;
  }
  if (flow.client.read_progress != 0 && seq_lt(flow.client.read_to, flow.origin.next)) return Owes::kRead;
  if (ctx != nullptr) {
    if (ctx->responses.outstanding() != 0) return Owes::kWaiting;  // a switch of protocols pending, too
    if (!ctx->requests->idle()) return Owes::kHead;
  }
  // Not a byte of a request yet: the first head is owed from the handshake.
  if (flow.client.next == flow.client.isn + 1) return Owes::kFirstHead;
  return Owes::kNothing;
}

Overdue overdue(const TcpFlow& flow, const ParseContext* ctx, const policy::Deadlines& d, time::Nanos now) noexcept {
  if (flow.state != FlowState::kEstablished) return Overdue::kNone;
  const Owes what = owes(flow, ctx);
  const time::Nanos late = slow_for(flow, ctx, what, now);
  const auto past = [late](time::Nanos deadline) { return deadline != 0 && late > deadline; };
  switch (what) {
    case Owes::kHead:
      return past(d.head) ? Overdue::kHead : Overdue::kNone;
    case Owes::kFirstHead:
      return past(d.head) ? Overdue::kFirstHead : Overdue::kNone;
    case Owes::kBody:
      return past(d.body) ? Overdue::kBody : Overdue::kNone;
    case Owes::kNothing:
      return past(d.keep_alive) ? Overdue::kKeepAlive : Overdue::kNone;
    case Owes::kRead:
      return past(d.response) ? Overdue::kResponse : Overdue::kNone;
    case Owes::kWaiting:
      break;
  }
  return Overdue::kNone;
}

time::Nanos slow_for(const TcpFlow& flow, const ParseContext* ctx, Owes what, time::Nanos now) noexcept {
  time::Nanos since = now;
  switch (what) {
    case Owes::kHead:
      since = ctx != nullptr && ctx->buffering ? ctx->head_since : flow.client.progress;
      break;
    case Owes::kFirstHead:
    case Owes::kBody:
      since = flow.client.progress;
      break;
    case Owes::kNothing:
      since = std::max(flow.client.progress, flow.origin.progress);
      break;
    case Owes::kRead:
      since = std::max(flow.client.read_progress, flow.origin.unread_since);
      break;
    case Owes::kWaiting:
      break;
  }
  return now > since ? now - since : 0;
}

}  // namespace sluice::dataplane

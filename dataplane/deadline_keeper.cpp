// Which deadline a flow has missed; see deadline_keeper.h.
#include "deadline_keeper.h"

#include <algorithm>

namespace sluice::dataplane {

namespace {

enum class Owes : uint8_t { kNothing, kHead, kFirstHead, kBody, kWaiting };

// What the client owes the connection now.
Owes owed(const TcpFlow& flow, const ParseContext* ctx) noexcept {
  if (ctx != nullptr) {
    if (ctx->buffering) return Owes::kHead;
    if (ctx->absorbing || ctx->requests->in_body()) return Owes::kBody;
    if (ctx->responses.outstanding() != 0) return Owes::kWaiting;  // a switch of protocols pending, too
    if (!ctx->requests->idle()) return Owes::kHead;
  }
  // Not a byte of a request yet: the first head is owed from the handshake.
  if (flow.client_next == flow.client_isn + 1) return Owes::kFirstHead;
  return Owes::kNothing;
}

bool past(time::Nanos since, time::Nanos deadline, time::Nanos now) noexcept {
  return deadline != 0 && now > since && now - since > deadline;
}

}  // namespace

Overdue overdue(const TcpFlow& flow, const ParseContext* ctx, const policy::Deadlines& d, time::Nanos now) noexcept {
  if (flow.state != FlowState::kEstablished) return Overdue::kNone;
  switch (owed(flow, ctx)) {
    case Owes::kHead:
      return past(ctx->buffering ? ctx->head_since : flow.client_progress, d.head, now) ? Overdue::kHead
                                                                                        : Overdue::kNone;
    case Owes::kFirstHead:
      return past(flow.client_progress, d.head, now) ? Overdue::kFirstHead : Overdue::kNone;
    case Owes::kBody:
      return past(flow.client_progress, d.body, now) ? Overdue::kBody : Overdue::kNone;
    case Owes::kNothing:
      return past(std::max(flow.client_progress, flow.origin_progress), d.keep_alive, now) ? Overdue::kKeepAlive
                                                                                            : Overdue::kNone;
    case Owes::kWaiting:
      break;
  }
  return Overdue::kNone;
}

time::Nanos slow_for(const TcpFlow& flow, const ParseContext* ctx, time::Nanos now) noexcept {
  if (flow.state != FlowState::kEstablished) return 0;
  time::Nanos since = now;
  switch (owed(flow, ctx)) {
    case Owes::kHead:
      since = ctx->buffering ? ctx->head_since : flow.client_progress;
      break;
    case Owes::kFirstHead:
    case Owes::kBody:
      since = flow.client_progress;
      break;
    case Owes::kNothing:
      since = std::max(flow.client_progress, flow.origin_progress);
      break;
    case Owes::kWaiting:
      break;
  }
  return now > since ? now - since : 0;
}

}  // namespace sluice::dataplane

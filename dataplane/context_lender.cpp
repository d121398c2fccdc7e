// Parse contexts and edit holds lent to flows; see context_lender.h.
#include "context_lender.h"

#include "limiter/in_flight.h"

namespace sluice::dataplane {

ContextLender::ContextLender(size_t contexts, uint32_t max_head_bytes, uint16_t max_fields, size_t holds,
                             size_t stashes, ClientShares& shares, std::span<std::byte> context_memory,
                             std::span<EditHold> hold_memory, std::span<char> head_memory,
                             std::span<uint8_t> stash_memory, std::span<StashSlot> stash_slots,
                             std::span<std::byte> context_arena)
    : contexts_(contexts, max_head_bytes, max_fields, context_memory, head_memory, context_arena),
      holds_(holds, hold_memory),
      stashes_(stashes, max_head_bytes, stash_memory, stash_slots),
      shares_(shares) {}

Lent ContextLender::borrow(TcpFlow& flow, const PolicySnapshot& snap) noexcept {
  if (contexts_.free_count() == 0) return Lent::kNoneFree;
  if (!shares_.take_context(flow.share)) return Lent::kShareFull;
  flow.context = contexts_.acquire();
  contexts_.start(flow.context, snap.policy, snap.generation);
  ParseContext& fresh = contexts_.at(flow.context);
  fresh.owner = flow.key;  // for eviction, which starts from the context
  fresh.owner_hash = flow.hash;
  // Between requests, every one answered: the origin has all the heads.
  fresh.judged.reset(flow.client.next);
  fresh.to_client.reset(flow.seqadj.to_client);
  fresh.to_origin.reset(flow.seqadj.to_origin);
  fresh.responses.report_status_lines(report_status_lines_);
  if (flow.hold >= 0) {
    holds_.at(flow.hold).restore(fresh.to_client, fresh.edit_bytes);
    holds_.release(flow.hold);
    flow.hold = -1;
  }
  return Lent::kYes;
}

Lent ContextLender::carry_context(TcpFlow& flow, const PolicySnapshot& snap, const ParseContext& dead,
                                  bool answers, std::span<const char> held_head) noexcept {
  const Lent lent = borrow(flow, snap);
  if (lent != Lent::kYes) return lent;
  ParseContext& ctx = contexts_.at(flow.context);
  if (!ctx.carry_on(dead, answers, held_head)) {
    ctx.usage_count = 0;  // its notes were never taken again here: nothing to give back
    give_back(flow);
    return Lent::kCannotCarry;
  }
  // Its requests in flight hold their slots again, under this process's
  // epoch (the dead one's counts read as zero: limiter/in_flight.h).
  if (in_flight_ != nullptr) {
    for (unsigned i = 0; i < ctx.usage_count; ++i) {
      const ParseContext::UsageNote& n = ctx.usage_notes[(ctx.usage_front + i) % ctx.usage_notes.size()];
      if (n.holds_in_flight) limiter::retake_in_flight(in_flight_->buckets, n.in_flight_key, in_flight_->in_flight_epoch);
    }
  }
  return Lent::kYes;
}

Lent ContextLender::carry_hold(TcpFlow& flow, const EditHold& dead) noexcept {
  if (!dead.valid()) return Lent::kCannotCarry;
  const int32_t h = holds_.acquire();
  if (h < 0) return Lent::kNoneFree;
  holds_.at(h) = dead;
  flow.hold = h;
  return Lent::kYes;
}

void ContextLender::give_back(TcpFlow& flow) noexcept {
  if (flow.hold >= 0) {
    holds_.release(flow.hold);
    flow.hold = -1;
  }
  if (flow.context < 0) return;
  ParseContext& ctx = contexts_.at(flow.context);
  if (in_flight_ != nullptr) {
    for (unsigned i = 0; i < ctx.usage_count; ++i) {
      ParseContext::UsageNote& n = ctx.usage_notes[(ctx.usage_front + i) % ctx.usage_notes.size()];
      if (!n.holds_in_flight) continue;
      limiter::release_in_flight(in_flight_->buckets, n.in_flight_key, in_flight_->in_flight_epoch);
      n.holds_in_flight = false;
    }
  }
  // What the edits so far shift the rest of the flow by.
  flow.seqadj.to_client = static_cast<uint32_t>(contexts_.at(flow.context).to_client.total_shift());
  flow.seqadj.to_origin = static_cast<uint32_t>(contexts_.at(flow.context).to_origin.total_shift());
  contexts_.release(flow.context);
  shares_.return_context(flow.share);
  flow.context = -1;
}

void ContextLender::give_back_if_done(TcpFlow& flow) noexcept {
  if (flow.context < 0 || flow.state != FlowState::kEstablished) return;
  const ParseContext& ctx = contexts_.at(flow.context);
  // An edit the client has not acknowledged keeps the context: a
  // retransmission of its segment must be written again the same way.
  // Nor does a kept answer the client does not have yet; and once requests
  // have been cut out, the origin must have acknowledged everything the
  // client sent (a late copy of a cut request, renumbered by the base shift
  // alone, then lands on bytes the origin has and drops).
  if (!ctx.requests->idle() || ctx.responses.outstanding() != 0 || !ctx.responses.at_boundary() ||
      ctx.kept_count != 0 || ctx.absorbing ||
      (ctx.to_origin.pending() != 0 && seq_lt(flow.origin.ack, ctx.to_origin.forward(flow.client.next)))) {
    return;
  }
  if (ctx.to_client.pending() == 0) {
    give_back(flow);
    return;
  }
  // Only fields the client has yet to acknowledge: they move to a hold, and
  // the context goes back while the flow waits for its next request.
  if (ctx.to_origin.pending() != 0 || !EditHold::fits(ctx.to_client, ctx.edit_bytes)) return;
  const int32_t h = holds_.acquire();
  if (h < 0) return;
  holds_.at(h).keep(ctx.to_client, ctx.edit_bytes);
  give_back(flow);
  flow.hold = h;
}

bool ContextLender::settle_hold(TcpFlow& flow, Side from, const FrameView& v, const PolicySnapshot& snap) noexcept {
  if (from == Side::kClient && v.has(tcp_flag::kAck) && holds_.at(flow.hold).acknowledged_by(v.ack)) {
    // The usual case, the client's next request acknowledging the last
    // response whole: the held edits are done with, unread.
    holds_.release(flow.hold);
    flow.hold = -1;
    return true;
  }
  return borrow(flow, snap) == Lent::kYes;
}

}  // namespace sluice::dataplane

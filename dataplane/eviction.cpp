// The slowest holder of a context or a flow; see eviction.h.
#include "eviction.h"

namespace sluice::dataplane {

namespace {

// Why an established flow would be evicted, from what its client owes.
bool reason_for(Owes what, Evict& why) noexcept {
  switch (what) {
    case Owes::kHead: why = Evict::kSlowHead; return true;
    case Owes::kBody: why = Evict::kStalledBody; return true;
    case Owes::kNothing: why = Evict::kIdle; return true;
    case Owes::kFirstHead: why = Evict::kFirstHead; return true;
    case Owes::kRead: why = Evict::kSlowReader; return true;
    case Owes::kWaiting: return false;
  }
  return false;
}

}  // namespace

Victim Evictor::for_context(const ContextPool& contexts, TcpTracker& tracker, time::Nanos now) noexcept {
  Victim best;
  time::Nanos slowest = kMinSlow - 1;
  const size_t n = contexts.size();
  size_t looked = 0;
  for (size_t step = 0; step < n && looked < kLooks; ++step) {
    const size_t i = context_cursor_;
    context_cursor_ = (context_cursor_ + 1) % n;
    if (!contexts.held(i)) continue;
    ++looked;
    const ParseContext& ctx = contexts.at(static_cast<int32_t>(i));
    TcpFlow* flow = tracker.find(ctx.owner, ctx.owner_hash);
    if (flow == nullptr || flow->context != static_cast<int32_t>(i) || flow->state != FlowState::kEstablished) {
      continue;  // refusing (its answer waits on the origin) or bridged: not slow
    }
    const Owes what = owes(*flow, &ctx);
    Evict why;
    if (!reason_for(what, why)) continue;
    const time::Nanos slow = slow_for(*flow, &ctx, what, now);
    if (slow > slowest) {
      slowest = slow;
      best = {flow, why};
    }
  }
  return best;
}

Victim Evictor::for_flow(TcpTracker& tracker, time::Nanos now) noexcept {
  FlowTable& table = tracker.table();
  Victim best;
  time::Nanos slowest = kMinSlow - 1;
  const size_t n = table.capacity();
  size_t looked = 0;
  for (size_t step = 0; step < n && looked < kLooks; ++step) {
    TcpFlow* flow = table.at_slot(flow_cursor_);
    flow_cursor_ = (flow_cursor_ + 1) % n;
    if (flow == nullptr) continue;
    ++looked;
    const time::Nanos quiet = now > flow->last_seen ? now - flow->last_seen : 0;
    switch (flow->state) {
      case FlowState::kClosed:
      case FlowState::kAnswered:
        return {flow, Evict::kOver};  // done with already: no need to look further
      case FlowState::kSynSent:
      case FlowState::kSynReceived:
        if (quiet > slowest) {
          slowest = quiet;
          best = {flow, Evict::kHalfOpen};
        }
        break;
      case FlowState::kEstablished: {
        if (flow->context >= 0) break;
        const Owes what = owes(*flow, nullptr);
        Evict why;
        if (!reason_for(what, why)) break;
        const time::Nanos slow = slow_for(*flow, nullptr, what, now);
        if (slow > slowest) {
          slowest = slow;
          best = {flow, why};
        }
        break;
      }
      case FlowState::kPassThrough:
      case FlowState::kRefusing:
        break;
    }
  }
  return best;
}

}  // namespace sluice::dataplane

// Lends a worker's parse contexts, edit holds and bind stashes to its flows. A flow
// borrows a parse context (parse_context.h, ~20 KB) only while a request or
// response is in flight or its edits need one, and an edit hold
// (edit_hold.h, a few hundred bytes) for the fields its client has not yet
// acknowledged between requests; otherwise it keeps only its base shifts
// (TcpFlow::seqadj.to_client, seqadj.to_origin). Moving a flow's edits between
// those three places is this room's job, and only this room's. A flow not
// yet bound to its origin (delayed binding) also has a stash
// (bind_stash.h) for what waits for the origin.
//
// Owns: the ContextPool, the HoldPool and the BindStash. Touches: a flow's
// context, hold, stash and base shifts.
#pragma once

#include <cstddef>
#include <cstdint>

#include "limiter/decide.h"

#include "bind_stash.h"
#include "client_shares.h"
#include "edit_hold.h"
#include "frame.h"
#include "packet_sink.h"
#include "parse_context.h"
#include "policy_snapshot.h"
#include "tcp_flow.h"

namespace sluice::dataplane {

enum class Lent : uint8_t {
  kYes,
  kNoneFree,   // every context is lent: the caller may make room and try again
  kShareFull,  // the flow's client holds its share of contexts
  kCannotCarry,  // carry_context, carry_hold: what the last process left cannot go on
};

class ContextLender {
 public:
  // `context_memory`, `hold_memory`, `head_memory`, `stash_memory`,
  // `stash_slots` and `context_arena`: where the contexts, the holds, the
  // contexts' held-head buffers, the bind stashes and the contexts' other
  // buffers live (ContextPool, HoldPool, BindStash), if not in memory of
  // their own.
  ContextLender(size_t contexts, uint32_t max_head_bytes, uint16_t max_fields, size_t holds, size_t stashes,
                ClientShares& shares, std::span<std::byte> context_memory = {},
                std::span<EditHold> hold_memory = {}, std::span<char> head_memory = {},
                std::span<uint8_t> stash_memory = {}, std::span<StashSlot> stash_slots = {},
                std::span<std::byte> context_arena = {});

  // Lends `flow` a context started under `snap`'s policy, its shifts at the
  // flow's bases, with the flow's held edits (if any) moved back into it.
  [[nodiscard]] Lent borrow(TcpFlow& flow, const PolicySnapshot& snap) noexcept;
  // Takes back the context and any hold; the flow keeps only its base shifts.
  // The in-flight slots its requests still held (a rule's `concurrency`)
  // are given back with it: a reset, a deadline, an eviction or the flow's
  // end never leaks one.
  void give_back(TcpFlow& flow) noexcept;
  // Where in-flight slots are given back, and taken again for carried
  // contexts (none: no rule counts them).
  void set_in_flight(limiter::LimiterState* limiter) noexcept { in_flight_ = limiter; }
  // The flow is over (answered, reset, expired, forgotten): everything it
  // borrowed comes back, its stash too.
  void give_back_all(TcpFlow& flow) noexcept {
    give_back(flow);
    release_stash(flow);
  }
  // Takes back the context of an established flow that no longer needs it:
  // nothing in flight, nothing the client lacks. Fields the client has yet
  // to acknowledge move to a hold if one is free.
  void give_back_if_done(TcpFlow& flow) noexcept;
  // Before any segment of a flow with a hold: a client acknowledgement that
  // covers the held edits drops them unread; anything else moves them back
  // into a context. False if that needs a context and none can be lent.
  [[nodiscard]] bool settle_hold(TcpFlow& flow, Side from, const FrameView& v, const PolicySnapshot& snap) noexcept;

  // A flow carried on across a restart (flow_carry.h), which had a context
  // or a hold in the last process: lends it one that goes on where `dead`
  // stood, with the head it held (`held_head`, ParseContext::carry_on).
  // kYes, kNoneFree, kShareFull as borrow(), or kCannotCarry (the dead one
  // is not one that can go on: nothing is lent).
  [[nodiscard]] Lent carry_context(TcpFlow& flow, const PolicySnapshot& snap, const ParseContext& dead,
                                   bool answers, std::span<const char> held_head = {}) noexcept;
  [[nodiscard]] Lent carry_hold(TcpFlow& flow, const EditHold& dead) noexcept;

  // A stash for a flow accepted unbound; false if none is free.
  [[nodiscard]] bool take_stash(TcpFlow& flow) noexcept {
    flow.stash = stashes_.acquire();
    return flow.stash >= 0;
  }
  void release_stash(TcpFlow& flow) noexcept {
    if (flow.stash < 0) return;
    stashes_.release(flow.stash);
    flow.stash = -1;
  }
  // Bytes for the origin at its sequence `seq`, into the flow's stash:
  // false if it has none or they are not the next ones or do not fit.
  [[nodiscard]] bool stash(TcpFlow& flow, uint32_t seq, std::span<const uint8_t> bytes) noexcept {
    return flow.stash >= 0 && stashes_.append(flow.stash, seq, bytes);
  }
  // The client's FIN right after the stash's bytes: it goes with them.
  [[nodiscard]] bool stash_fin(TcpFlow& flow, uint32_t seq) noexcept {
    return flow.stash >= 0 && stashes_.close(flow.stash, seq);
  }
  [[nodiscard]] bool stash_closed(const TcpFlow& flow) const noexcept {
    return flow.stash >= 0 && stashes_.closed(flow.stash);
  }
  [[nodiscard]] std::span<const uint8_t> stashed(const TcpFlow& flow) const noexcept {
    return flow.stash >= 0 ? stashes_.bytes(flow.stash) : std::span<const uint8_t>{};
  }
  [[nodiscard]] uint32_t stash_start(const TcpFlow& flow) const noexcept { return stashes_.start(flow.stash); }

  [[nodiscard]] ParseContext& context(const TcpFlow& flow) noexcept { return contexts_.at(flow.context); }
  [[nodiscard]] const ParseContext& context(const TcpFlow& flow) const noexcept { return contexts_.at(flow.context); }
  // A kept-open answer holds its context until the client acknowledges it;
  // a client that never does (a flood of refused requests) would hold every
  // context until its flow expires. With under a quarter of the pool free,
  // answers close their connections instead (which gives the context back).
  [[nodiscard]] bool contexts_scarce() const noexcept { return contexts_.free_count() < contexts_.size() / 4; }

  // Whether contexts lent from now on have their responses stop after each
  // status line (where inserted fields go).
  void set_report_status_lines(bool on) noexcept { report_status_lines_ = on; }

  [[nodiscard]] ContextPool& contexts() noexcept { return contexts_; }
  [[nodiscard]] const ContextPool& contexts() const noexcept { return contexts_; }
  [[nodiscard]] const HoldPool& holds() const noexcept { return holds_; }
  [[nodiscard]] const BindStash& stashes() const noexcept { return stashes_; }

 private:
  ContextPool contexts_;
  HoldPool holds_;
  BindStash stashes_;
  ClientShares& shares_;
  bool report_status_lines_ = true;
  limiter::LimiterState* in_flight_ = nullptr;
};

}  // namespace sluice::dataplane

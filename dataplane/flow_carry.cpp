// See flow_carry.h.
#include "flow_carry.h"

#include <cstring>

#include "http/carried_bytes.h"

namespace sluice::dataplane {

namespace {

// `f` with its context's object (if it borrowed one: `object`, one
// object_stride), held-head buffer (`head`), hold (`hold`, or null) and
// stash (`slot` and its buffer `buffer`, or null).
CarriedFlow carried_with(const TcpFlow& f, std::span<const std::byte> object, std::span<const char> head,
                         const EditHold* hold, const StashSlot* slot, std::span<const uint8_t> buffer) {
  CarriedFlow c{f, nullptr, std::nullopt, std::nullopt};
  if (f.context >= 0 && object.size() >= sizeof(ContextImage::bytes)) {
    auto image = std::make_unique<ContextImage>();
    std::memcpy(image->bytes, object.data(), sizeof image->bytes);
    const ParseContext& dead = image->view();
    if (dead.owner == f.key && dead.owner_hash == f.hash) {
      // Its held head now, before this process's contexts write over the
      // buffers (a flow carried on into another context index, or a
      // new one). A length past the buffer is left for carry_on to refuse.
      if (http::is_bool_byte(dead.buffering) && dead.holds_head() && dead.head_len <= head.size()) {
        image->held_head.assign(head.data(), head.data() + dead.head_len);
      }
      c.context = std::move(image);
    }
  }
  if (f.hold >= 0 && hold != nullptr) c.hold = *hold;
  // A slot that does not read whole (a length past its buffer, a FIN that
  // is not a bool) does not come along: the flow is then in flight.
  if (f.stash >= 0 && slot != nullptr && slot->len <= buffer.size() && slot->fin <= 1) {
    c.stash = CarriedStash{slot->start, slot->fin != 0, {buffer.begin(), buffer.begin() + slot->len}};
  }
  return c;
}

// Pool `index`'s `stride` bytes of `all`, or none.
template <class T>
std::span<const T> member(std::span<const T> all, int32_t index, size_t stride) {
  if (index < 0 || stride == 0 || (static_cast<size_t>(index) + 1) * stride > all.size()) return {};
  return all.subspan(static_cast<size_t>(index) * stride, stride);
}

const StashSlot* stash_slot(const PoolImages& pools, int32_t index) {
  return index >= 0 && static_cast<size_t>(index) < pools.stash_slots.size()
             ? &pools.stash_slots[static_cast<size_t>(index)]
             : nullptr;
}

}  // namespace

CarriedFlow carried_from(const TcpFlow& f, const PoolImages& pools) {
  const EditHold* hold =
      f.hold >= 0 && static_cast<size_t>(f.hold) < pools.holds.size() ? &pools.holds[static_cast<size_t>(f.hold)] : nullptr;
  return carried_with(f, member(pools.contexts, f.context, ContextPool::object_stride()),
                      member(pools.heads, f.context, pools.head_stride), hold, stash_slot(pools, f.stash),
                      member(pools.stashes, f.stash, pools.stash_stride));
}

CarriedFlow carried_from_undo(const UndoArea& undo, uint32_t head_len, const PoolImages& pools) {
  const TcpFlow& f = *undo.flow;
  const std::span<const char> head = head_len <= undo.head.size() ? undo.head.first(head_len) : std::span<const char>{};
  return carried_with(f, {undo.context, ContextPool::object_stride()}, head, undo.hold,
                      member(pools.stashes, f.stash, pools.stash_stride).empty() ? nullptr : undo.stash,
                      member(pools.stashes, f.stash, pools.stash_stride));
}

CarryVerdict carry_verdict(const CarriedFlow& carried, bool answers) noexcept {
  const TcpFlow& f = carried.flow;
  if (!http::all_bool_bytes({&f.timestamps, &f.client.fin, &f.client.sack, &f.origin.fin, &f.seqadj.active,
                             &f.proxy.active, &f.adoption.active}) ||
      static_cast<uint8_t>(f.state) > static_cast<uint8_t>(FlowState::kClosed) ||
      static_cast<uint8_t>(f.bind.state) > static_cast<uint8_t>(Binding::kBinding) ||
      (f.ip_version != 4 && f.ip_version != 6) || f.client.l2_len > kMaxL2Header ||
      f.origin.l2_len > kMaxL2Header || f.client.wscale > 14 || f.client.wscale < -1) {
    return CarryVerdict::kDamaged;
  }
  if (!answers && (f.state == FlowState::kRefusing || f.state == FlowState::kAnswered)) return CarryVerdict::kAnswering;
  if ((f.context >= 0 && carried.context == nullptr) || (f.hold >= 0 && !carried.hold)) return CarryVerdict::kInFlight;
  // Being bound: its stash (the bytes that wait for the origin) must have come along.
  if (f.bind.state == Binding::kBinding && f.stash >= 0 && !carried.stash) return CarryVerdict::kBinding;
  return CarryVerdict::kCarries;
}

std::string_view describe(CarryVerdict v) noexcept {
  switch (v) {
    case CarryVerdict::kCarries:
      return "carried on";
    case CarryVerdict::kInFlight:
      return "its parse context or held edits lost";
    case CarryVerdict::kBinding:
      return "binding to its origin";
    case CarryVerdict::kAnswering:
      return "being answered";
    case CarryVerdict::kDamaged:
      return "damaged";
  }
  return "?";
}

}  // namespace sluice::dataplane

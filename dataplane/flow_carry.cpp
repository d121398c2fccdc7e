// See flow_carry.h.
#include "flow_carry.h"

#include <cstring>

#include "http/carried_bytes.h"

namespace sluice::dataplane {

namespace {

// `f` with its context's object (if it borrowed one: `object`, one
// object_stride), held-head buffer (`head`) and hold (`hold`, or null).
CarriedFlow carried_with(const TcpFlow& f, std::span<const std::byte> object, std::span<const char> head,
                         const EditHold* hold) {
  CarriedFlow c{f, nullptr, std::nullopt};
  if (f.context >= 0 && object.size() >= sizeof(ContextImage::bytes)) {
    auto image = std::make_unique<ContextImage>();
    std::memcpy(image->bytes, object.data(), sizeof image->bytes);
    const ParseContext& dead = image->view();
    if (dead.owner == f.key && dead.owner_hash == f.hash) {
      // Its held head now, before this process's contexts write over the
      // buffers (a flow carried on into another context index, or a
      // new one). A length past the buffer is left for carry_on to refuse.
      if (http::is_bool_byte(dead.buffering) && dead.buffering && dead.head_len <= head.size()) {
        image->held_head.assign(head.data(), head.data() + dead.head_len);
      }
      c.context = std::move(image);
    }
  }
  if (f.hold >= 0 && hold != nullptr) c.hold = *hold;
  return c;
}

}  // namespace

CarriedFlow carried_from(const TcpFlow& f, std::span<const std::byte> contexts, std::span<const EditHold> holds,
                         std::span<const char> heads, size_t head_stride) {
  const size_t stride = ContextPool::object_stride();
  std::span<const std::byte> object;
  std::span<const char> head;
  if (f.context >= 0 && (static_cast<size_t>(f.context) + 1) * stride <= contexts.size()) {
    const auto index = static_cast<size_t>(f.context);
    object = contexts.subspan(index * stride, stride);
    if ((index + 1) * head_stride <= heads.size()) head = heads.subspan(index * head_stride, head_stride);
  }
  const EditHold* hold = f.hold >= 0 && static_cast<size_t>(f.hold) < holds.size() ? &holds[static_cast<size_t>(f.hold)] : nullptr;
  return carried_with(f, object, head, hold);
}

CarriedFlow carried_from_undo(const UndoArea& undo, uint32_t head_len) {
  const std::span<const char> head = head_len <= undo.head.size() ? undo.head.first(head_len) : std::span<const char>{};
  return carried_with(*undo.flow, {undo.context, ContextPool::object_stride()}, head, undo.hold);
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
  if (f.bind.state == Binding::kBinding) return CarryVerdict::kBinding;
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

// See change_undo.h.
#include "change_undo.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <new>

namespace sluice::dataplane {

namespace {

constexpr size_t kLine = 64;
constexpr size_t lines(size_t bytes) { return (bytes + kLine - 1) / kLine * kLine; }

}  // namespace

ChangeUndo::ChangeUndo(const UndoArea& area, uint32_t max_head_bytes) : area_(area) {
  if (area_.flow != nullptr) return;
  const size_t context = ContextPool::object_stride();
  const size_t bytes =
      lines(sizeof(TcpFlow)) + lines(context) + lines(sizeof(EditHold)) + lines(sizeof(StashSlot)) + max_head_bytes;
  own_.resize(bytes + kLine);
  std::byte* p = own_.data() + (kLine - reinterpret_cast<uintptr_t>(own_.data()) % kLine) % kLine;
  area_.flow = new (p) TcpFlow;
  p += lines(sizeof(TcpFlow));
  area_.context = p;
  p += lines(context);
  area_.hold = new (p) EditHold;
  p += lines(sizeof(EditHold));
  area_.stash = new (p) StashSlot;
  p += lines(sizeof(StashSlot));
  area_.head = {reinterpret_cast<char*>(p), max_head_bytes};
}

void ChangeUndo::save(const TcpFlow* flow, const ParseContext* context, const EditHold* hold,
                      const StashSlot* stash, WorkMarker& marker) noexcept {
  if (flow == nullptr) {
    marker.was_absent();
    return;
  }
  std::memcpy(static_cast<void*>(area_.flow), flow, sizeof *flow);
  uint32_t head_len = 0;
  if (context != nullptr) {
    context->save_live(area_.context);
    if (context->holds_head()) {
      head_len = static_cast<uint32_t>(std::min(context->head_len, area_.head.size()));
      std::memcpy(area_.head.data(), context->head, head_len);
    }
  }
  if (hold != nullptr) *area_.hold = *hold;
  if (stash != nullptr) *area_.stash = *stash;
  marker.saved(head_len);
}

}  // namespace sluice::dataplane

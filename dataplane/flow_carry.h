// Which of a worker's flows a restarted sluiced carries on, and the mark
// that tells it which flow the last process was changing when it died.
//
// A worker's flows live in the flow file (control/flow_file.h), so they
// outlive the process, and so do its parse contexts and edit holds (their
// objects; a context's buffers stay in the process). A flow carries on
// exactly where it was when its state is in those: between requests,
// inside a request body, inside a response (head or body), with inserted
// fields the client has not acknowledged, or unbound behind the SYN proxy
// with nothing stashed. What lived in the process's buffers cannot come
// along: a head held or being read, an answer in the answer store, a stash
// bound for the origin; such a flow's next segment finds no flow and is
// reset (or adopted, where the policy turns adoption on), as an unknown
// connection's is. Answers are in the worker's answer store, which is in the
// file too: a refused connection carries on where the same worker has it. Heads the origin had not acknowledged are let go of: a
// repeat of one cannot be checked against what was judged, and is dropped.
//
// The work mark: before the worker changes a flow it writes which one
// (its hash, or its slot while the sweep ends it) and clears the mark
// after; the stores are kept in that order (WorkMarker). Before its first
// change to a segment's flow the worker copies the flow as it was into the
// file's undo area (ChangeUndo, change_undo.h) and says so in the mark. A
// killed worker's marked flow is then carried on as it was before that
// segment, which its sender repeats: the segment is lost, nothing else.
// What cannot be undone is reset instead (nor is another flow with the
// same 64-bit hash carried, once in 2^64): a change something of which
// already left the appliance (a frame sent before the mark was cleared),
// and a flow the sweep was ending at a deadline, which ends either way.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

#include "bind_stash.h"
#include "edit_hold.h"
#include "flow_key.h"
#include "parse_context.h"
#include "tcp_flow.h"

namespace sluice::dataplane {

// Bytes in the flow file: copied as they are, read back by a later process.
static_assert(std::is_trivially_copyable_v<TcpFlow>);

struct WorkMark {
  static constexpr uint32_t kIdle = 0;
  static constexpr uint32_t kFlow = 1;  // the flow whose TcpFlow::hash is `hash`
  static constexpr uint32_t kSlot = 2;  // the flow in `slot` of the worker's table
  // What the undo area holds of a kFlow mark's flow.
  static constexpr uint8_t kUntouched = 0;  // nothing yet: the flow is as it was
  static constexpr uint8_t kWasAbsent = 1;  // there was no such flow before the change
  static constexpr uint8_t kSaved = 2;      // the flow as it was, with what it borrowed
  uint32_t what = kIdle;
  uint32_t slot = 0;
  uint64_t hash = 0;
  uint32_t head_len = 0;  // kSaved: the bytes of its context's held head in the undo area
  uint8_t before = kUntouched;
  uint8_t escaped = 0;  // 1: a frame the change wrote was sent before the change ended
};
static_assert(std::is_trivially_copyable_v<WorkMark>);

class WorkMarker {
 public:
  explicit WorkMarker(WorkMark* mark) noexcept : mark_(mark != nullptr ? mark : &own_) {}
  WorkMarker(const WorkMarker&) = delete;
  WorkMarker& operator=(const WorkMarker&) = delete;

  void flow(uint64_t hash) noexcept {
    mark_->hash = hash;
    mark_->before = WorkMark::kUntouched;
    mark_->escaped = 0;
    in_order();
    mark_->what = WorkMark::kFlow;
    in_order();
  }
  void slot(size_t slot) noexcept {
    mark_->slot = static_cast<uint32_t>(slot);
    in_order();
    mark_->what = WorkMark::kSlot;
    in_order();
  }
  // The flow did not exist before this change (ChangeUndo).
  void was_absent() noexcept {
    mark_->before = WorkMark::kWasAbsent;
    in_order();
  }
  // The undo area holds the flow as it was (ChangeUndo), `head_len` bytes
  // of held head with it: after the copy's stores, before any change's.
  void saved(uint32_t head_len) noexcept {
    in_order();
    mark_->head_len = head_len;
    mark_->before = WorkMark::kSaved;
    in_order();
  }
  // Frames are leaving the appliance: if a change is under way, something
  // of it is out, and it can no longer be undone.
  void sending() noexcept {
    if (mark_->what == WorkMark::kIdle) return;
    mark_->escaped = 1;
    in_order();
  }
  void done() noexcept {
    in_order();
    mark_->what = WorkMark::kIdle;
  }

 private:
  // Compiler order is all that matters: a killed process's stores that
  // were executed are in memory, in program order as this thread made them.
  static void in_order() noexcept { std::atomic_signal_fence(std::memory_order_seq_cst); }

  WorkMark own_;  // where none is given (tests, benchmarks)
  WorkMark* mark_;
};

// Where a worker copies the flow it is about to change (ChangeUndo): in the
// flow file, beside its work mark.
struct UndoArea {
  TcpFlow* flow = nullptr;
  std::byte* context = nullptr;  // ContextPool::object_stride() bytes: the live parts of its context
  EditHold* hold = nullptr;
  StashSlot* stash = nullptr;    // its stash's slot (the bytes only grow: those it counts stay)
  std::span<char> head{};        // its context's held head
};

enum class CarryVerdict : uint8_t {
  kCarries,    // its state is in the TcpFlow, and any context or hold it had came along
  kInFlight,   // its context or hold did not come along (another's, or out of the file)
  kBinding,    // bytes stashed for an origin connection being opened
  kAnswering,  // refused: its answer is in an answer store this worker does not have
  kDamaged,    // not a state this binary writes
};

// A ParseContext's bytes as the last process left them, copied into memory
// aligned for one. Read through view(), and only what carry_on() reads:
// its pointers and views name the dead process's memory.
struct ContextImage {
  alignas(ParseContext) std::byte bytes[sizeof(ParseContext)];
  // The bytes of the head it held across segments (its head_len of them,
  // from its held-head buffer), if it held one and they came along.
  std::vector<char> held_head;
  [[nodiscard]] const ParseContext& view() const noexcept {
    return *std::launder(reinterpret_cast<const ParseContext*>(bytes));
  }
};

// A flow the last process left, with the context or hold it had borrowed
// (copied out of the flow file before the new process's pools take it over).
// What a flow being bound to its origin had stashed for it (bind_stash.h).
struct CarriedStash {
  uint32_t start = 0;
  bool fin = false;
  std::vector<uint8_t> bytes;
};

struct CarriedFlow {
  TcpFlow flow;
  std::unique_ptr<ContextImage> context;  // when flow.context named one it owned
  std::optional<EditHold> hold;           // when flow.hold named one
  std::optional<CarriedStash> stash;      // when flow.stash named one whose slot reads whole
  unsigned worker = 0;                    // the worker whose table, pools and answer store it was in
};

// A dead process's pools, as the flow file keeps them for one worker.
struct PoolImages {
  std::span<const std::byte> contexts;  // its ContextPool objects
  std::span<const EditHold> holds;
  std::span<const char> heads;          // its held-head buffers, head_stride bytes each (or none)
  size_t head_stride = 0;
  std::span<const uint8_t> stashes;     // its bind stashes' buffers, stash_stride bytes each (or none)
  std::span<const StashSlot> stash_slots;
  size_t stash_stride = 0;
};

// `flow` as the last process left it, with what it borrowed copied out of
// that process's pools: its context if the context still names it as its
// owner (one lent on to another flow since does not), with the head it held
// if any; its hold; its stash. Checked whole when taken on
// (ParseContext::carry_on, EditHold::valid, carry_verdict).
[[nodiscard]] CarriedFlow carried_from(const TcpFlow& flow, const PoolImages& pools);
// `flow` as the undo area kept it (the flow a killed worker was changing,
// as it was before the change), with the `head_len` bytes of held head the
// mark says came with it, and its stash's bytes from `pools` (a stash only
// grows). Checked whole when taken on, as any other.
[[nodiscard]] CarriedFlow carried_from_undo(const UndoArea& undo, uint32_t head_len, const PoolImages& pools);
// `answers`: whether the worker taking it on has the answer store the
// flow's answers were put in (the same file, the same worker); without it a
// flow being answered does not carry.
[[nodiscard]] CarryVerdict carry_verdict(const CarriedFlow& carried, bool answers) noexcept;
[[nodiscard]] std::string_view describe(CarryVerdict verdict) noexcept;

}  // namespace sluice::dataplane

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
// (its hash, one store, or its slot while the sweep visits it) and clears
// the mark after; the stores are kept in that order (WorkMarker). A flow
// named by the mark of a killed worker may be half-changed, and is not
// carried (nor is another with the same 64-bit hash, once in 2^64).
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
  uint32_t what = kIdle;
  uint32_t slot = 0;
  uint64_t hash = 0;
};
static_assert(std::is_trivially_copyable_v<WorkMark>);

class WorkMarker {
 public:
  explicit WorkMarker(WorkMark* mark) noexcept : mark_(mark != nullptr ? mark : &own_) {}
  WorkMarker(const WorkMarker&) = delete;
  WorkMarker& operator=(const WorkMarker&) = delete;

  void flow(uint64_t hash) noexcept {
    mark_->hash = hash;
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
struct CarriedFlow {
  TcpFlow flow;
  std::unique_ptr<ContextImage> context;  // when flow.context named one it owned
  std::optional<EditHold> hold;           // when flow.hold named one
  unsigned worker = 0;                    // the worker whose table, pools and answer store it was in
};

// `flow` as the last process left it, with what it borrowed copied out of
// that process's pools (`contexts`: its ContextPool objects, `holds`;
// `heads`: its held-head buffers, `head_stride` bytes each, or none): its
// context if the context still names it as its owner (one lent on to
// another flow since does not), with the head it held if any, its hold.
// Checked whole when taken on (ParseContext::carry_on, EditHold::valid).
[[nodiscard]] CarriedFlow carried_from(const TcpFlow& flow, std::span<const std::byte> contexts,
                                       std::span<const EditHold> holds, std::span<const char> heads = {},
                                       size_t head_stride = 0);
// `answers`: whether the worker taking it on has the answer store the
// flow's answers were put in (the same file, the same worker); without it a
// flow being answered does not carry.
[[nodiscard]] CarryVerdict carry_verdict(const CarriedFlow& carried, bool answers) noexcept;
[[nodiscard]] std::string_view describe(CarryVerdict verdict) noexcept;

}  // namespace sluice::dataplane

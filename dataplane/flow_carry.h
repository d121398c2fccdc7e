// Which of a worker's flows a restarted sluiced carries on, and the mark
// that tells it which flow the last process was changing when it died.
//
// A worker's flows live in the flow file (control/flow_file.h), so they
// outlive the process. A flow carries on exactly where it was when all of
// its state is in its TcpFlow: between requests, with nothing the client
// or the origin has not acknowledged (no parse context, no edit hold), or
// unbound behind the SYN proxy with nothing stashed. A flow that held any of
// the worker's process-local buffers (a request or response in flight, an
// answer being sent, a stash bound for the origin) cannot: its next segment
// finds no flow and is reset (or adopted, where the policy turns adoption
// on), as an unknown connection's is.
//
// The work mark: before the worker changes a flow it writes which one
// (its hash, one store, or its slot while the sweep visits it) and clears
// the mark after; the stores are kept in that order (WorkMarker). A flow
// named by the mark of a killed worker may be half-changed, and is not
// carried (nor is another with the same 64-bit hash, once in 2^64).
#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "flow_key.h"
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
  kCarries,    // all of its state is in the TcpFlow
  kInFlight,   // a request or response in flight, or edits not yet acknowledged (a context or hold)
  kBinding,    // bytes stashed for an origin connection being opened
  kAnswering,  // refused: its answer was in the process's answer store
  kDamaged,    // not a state this binary writes
};

[[nodiscard]] CarryVerdict carry_verdict(const TcpFlow& flow) noexcept;
[[nodiscard]] std::string_view describe(CarryVerdict verdict) noexcept;

}  // namespace sluice::dataplane

// The edits a flow's client has not acknowledged yet, kept without a parse
// context. Once a flow's requests are all answered its parse context goes
// back to the pool, except that the rate-limit fields of its last responses
// must stay until the client acknowledges them (a retransmission is written
// again the same way). Holding the whole context (20 KB, most of it cold) for
// that is what made insertion expensive: every request of a keep-alive flow
// then ran on a context of its own instead of the pool's most recent one.
// A hold keeps just the pending edits (a few hundred bytes); the engine
// moves them back into a context before it handles the flow's next segment.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include "dataplane/parse_context.h"
#include "dataplane/seq_shift.h"

namespace sluice::dataplane {

struct EditHold {
  static constexpr unsigned kMaxEdits = 2;  // the fields of the last response or two
  int64_t base = 0;                         // SeqShift::base() of the shift they came from
  uint8_t count = 0;
  std::array<SeqShift::Edit, kMaxEdits> edits{};
  std::array<ParseContext::EditBytes, kMaxEdits> bytes{};

  // Whether `shift`'s pending edits (with `bytes`) fit: inserted fields only
  // (no removal, no kept answer, whose text lives elsewhere anyway).
  [[nodiscard]] static bool fits(const SeqShift& shift,
                                 const std::array<ParseContext::EditBytes, SeqShift::kMaxEdits>& bytes) noexcept;
  // Takes them over; restore() puts them back into an empty shift.
  void keep(const SeqShift& shift, const std::array<ParseContext::EditBytes, SeqShift::kMaxEdits>& bytes) noexcept;
  void restore(SeqShift& shift, std::array<ParseContext::EditBytes, SeqShift::kMaxEdits>& bytes) const noexcept;
  // Whether a client acknowledgement up to `client_ack` covers every edit
  // (then the hold has nothing left to do: the flow's base shift, set when
  // its context went back, already counts them all).
  [[nodiscard]] bool acknowledged_by(uint32_t client_ack) const noexcept;
  // Whether its counts and lengths are ones this code writes (a hold another
  // process left in memory is checked before it is taken on).
  [[nodiscard]] bool valid() const noexcept;
};
static_assert(std::is_trivially_copyable_v<EditHold>);

// A worker's holds: a fixed pool, no allocation after construction.
class HoldPool {
 public:
  // On `memory` if it holds `count` holds (the flow file's, where a restart
  // finds them), else on its own.
  explicit HoldPool(size_t count, std::span<EditHold> memory = {});
  [[nodiscard]] int32_t acquire() noexcept;  // -1 if none is free
  void release(int32_t index) noexcept;
  [[nodiscard]] EditHold& at(int32_t index) noexcept { return holds_[static_cast<size_t>(index)]; }
  [[nodiscard]] const EditHold& at(int32_t index) const noexcept { return holds_[static_cast<size_t>(index)]; }
  [[nodiscard]] size_t free_count() const noexcept { return free_.size(); }
  [[nodiscard]] size_t size() const noexcept { return holds_.size(); }

 private:
  std::vector<EditHold> own_;  // when no memory is given
  std::span<EditHold> holds_;
  std::vector<int32_t> free_;  // reserved at construction
};

}  // namespace sluice::dataplane

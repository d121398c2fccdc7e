// sluiced's flow tables and the connections a restart carries on. The
// workers' tables live in the flow file in the state directory
// (control/flow_file.h); at start the flows the last process left are
// judged (dataplane/flow_carry.h) and each one that can continue is handed
// to the worker that owns it now, before any worker runs. The rest are
// forgotten: their next segment finds no flow and is reset (or adopted,
// where the policy turns adoption on). What happened is logged, with the
// count of each reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "control/flow_file.h"
#include "dataplane/worker.h"

namespace sluice::sluiced {

class FlowTables {
 public:
  // Opens (or makes) the flow file in `state_dir` for `workers` tables of
  // `flows` each, with `contexts` parse contexts (each holding a head of
  // up to `max_head_bytes`), `holds` edit holds, `stashes` bind stashes and
  // an answer store of `answer_bytes` each; "" or why not. New seeds are drawn here
  // (getrandom) for a new file; an old file's are kept.
  [[nodiscard]] std::string open(const std::string& state_dir, unsigned workers, size_t flows, size_t contexts,
                                 uint32_t max_head_bytes, size_t holds, size_t stashes, size_t answer_bytes,
                                 uint64_t now);

  [[nodiscard]] control::FlowFile::Seeds seeds() const noexcept { return file_->seeds(); }
  [[nodiscard]] dataplane::FlowSlots memory(unsigned worker) const noexcept { return file_->slots(worker); }
  [[nodiscard]] dataplane::WorkMark* mark(unsigned worker) const noexcept { return file_->mark(worker); }
  [[nodiscard]] dataplane::UndoArea undo(unsigned worker) const noexcept { return file_->undo(worker); }
  [[nodiscard]] std::span<std::byte> contexts(unsigned worker) const noexcept { return file_->contexts(worker); }
  [[nodiscard]] std::span<dataplane::EditHold> holds(unsigned worker) const noexcept { return file_->holds(worker); }
  [[nodiscard]] std::span<char> heads(unsigned worker) const noexcept { return file_->heads(worker); }
  [[nodiscard]] std::span<uint8_t> stashes(unsigned worker) const noexcept { return file_->stashes(worker); }
  [[nodiscard]] std::span<dataplane::StashSlot> stash_slots(unsigned worker) const noexcept {
    return file_->stash_slots(worker);
  }
  [[nodiscard]] std::span<std::byte> answers(unsigned worker) const noexcept { return file_->answers(worker); }
  [[nodiscard]] uint64_t* answers_written(unsigned worker) const noexcept { return file_->answers_written(worker); }

  // Before any worker runs: each carried flow that can continue given to
  // the worker `owner` names, hashed with `flow_seed`, any context it had
  // started under `snap`. Logs what it did.
  void resume(const std::vector<std::unique_ptr<dataplane::Worker>>& workers,
              const std::function<unsigned(const dataplane::FlowKey&)>& owner, uint64_t flow_seed,
              const dataplane::PolicySnapshot& snap);

  // What resume() did, for tests and status.
  struct Tally {
    size_t carried = 0;  // continuing
    size_t reset = 0;    // forgotten, for whatever reason
  };
  [[nodiscard]] const Tally& tally() const noexcept { return tally_; }

 private:
  std::unique_ptr<control::FlowFile> file_;
  control::FlowFile::Opened opened_;
  Tally tally_;
};

}  // namespace sluice::sluiced

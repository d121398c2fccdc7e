// The live runs (TB01, TB11-TB13): what `sluicectl run start|end` and `runs`
// act on. The control plane owns the set; the workers read it through the
// lock-free run map (limiter::DigestMap, keyed by the credential hasher's
// digest of the token, the value the run's own budget per minute or 0).
//
// Every change is journalled before it is applied (so a refused journal
// write changes nothing) and returns only once every worker can see it: the
// caller's `wait_for_readers` is an RCU grace period. After `end` returns,
// no request on that run is paced at the run rate (TB13).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "control/run_journal.h"
#include "limiter/bucket_key.h"
#include "limiter/digest_map.h"

namespace sluice::control {

class RunRegistry {
 public:
  // `journal` may be null: runs are then forgotten at exit (tests, or a
  // daemon started without a state directory).
  RunRegistry(limiter::DigestMap& runs, const limiter::KeyHasher& token_hasher, RunJournal* journal,
              std::function<void()> wait_for_readers);

  enum class Outcome : uint8_t {
    kStarted,        // a new live run
    kBudgetChanged,  // it was live; its budget is now the one given
    kAlreadyLive,    // it was live with this budget: nothing to do
    kEnded,
    kNotLive,        // end of a run that is not live
    kInvalidToken,
    kFull,           // the run map has no room
    kJournalFailed,  // the journal could not be written: nothing changed
  };
  struct Result {
    Outcome outcome;
    std::string message;  // for the operator, one line
    [[nodiscard]] bool ok() const noexcept {
      return outcome == Outcome::kStarted || outcome == Outcome::kBudgetChanged || outcome == Outcome::kAlreadyLive ||
             outcome == Outcome::kEnded;
    }
  };

  // The runs the journal replayed at start, made live without journalling
  // them again. Returns one warning per run that could not be restored.
  [[nodiscard]] std::vector<std::string> restore(const std::vector<LiveRun>& live);

  [[nodiscard]] Result start(std::string_view token, uint32_t budget, int64_t now_unix);
  [[nodiscard]] Result end(std::string_view token);

  // Any thread (the telemetry thread reads it too).
  [[nodiscard]] std::vector<LiveRun> list() const;
  [[nodiscard]] size_t size() const;
  // The run's own budget per minute (0: the policy's), if it is live.
  [[nodiscard]] std::optional<uint32_t> budget(std::string_view token) const;
  [[nodiscard]] size_t capacity() const noexcept { return runs_.capacity(); }

 private:
  [[nodiscard]] limiter::Digest digest(std::string_view token) const noexcept;

  limiter::DigestMap& runs_;
  const limiter::KeyHasher& hasher_;
  RunJournal* journal_;
  std::function<void()> wait_for_readers_;
  mutable std::mutex mu_;  // orders commands and list(); control plane only
  std::map<std::string, LiveRun, std::less<>> live_;
};

}  // namespace sluice::control

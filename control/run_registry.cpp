// See run_registry.h. Order of every change: check, journal (fsync), apply
// to the run map, wait out a grace period; so what the journal says is what
// the workers read, and a crash between the two only replays a change the
// operator was about to be told about.
#include "control/run_registry.h"

#include <span>

namespace sluice::control {

RunRegistry::RunRegistry(limiter::DigestMap& runs, const limiter::KeyHasher& token_hasher, RunJournal* journal,
                         std::function<void()> wait_for_readers)
    : runs_(runs), hasher_(token_hasher), journal_(journal), wait_for_readers_(std::move(wait_for_readers)) {}

limiter::Digest RunRegistry::digest(std::string_view token) const noexcept {
  return hasher_.digest(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(token.data()), token.size()));
}

std::vector<std::string> RunRegistry::restore(const std::vector<LiveRun>& live) {
  std::lock_guard lock(mu_);
  std::vector<std::string> warnings;
  for (const LiveRun& run : live) {
    if (!valid_run_token(run.token)) {
      warnings.push_back("run '" + run.token + "' not restored: not a valid run token");
      continue;
    }
    if (runs_.put(digest(run.token), run.budget) == limiter::DigestMap::Put::kFull) {
      warnings.push_back("run '" + run.token + "' not restored: the run map is full (" +
                         std::to_string(runs_.capacity()) + " runs)");
      continue;
    }
    live_[run.token] = run;
  }
  wait_for_readers_();
  return warnings;
}

RunRegistry::Result RunRegistry::start(std::string_view token, uint32_t budget, int64_t now_unix) {
  if (!valid_run_token(token)) {
    return {Outcome::kInvalidToken,
            "'" + std::string(token) + "' is not a run token (1 to 128 characters of A-Z a-z 0-9 . _ ~ -)"};
  }
  std::lock_guard lock(mu_);
  const auto it = live_.find(token);
  if (it != live_.end() && it->second.budget == budget) {
    return {Outcome::kAlreadyLive, "run " + std::string(token) + " is already live with this budget"};
  }
  if (it == live_.end() && runs_.size() >= runs_.capacity()) {
    return {Outcome::kFull, "no room for another live run (" + std::to_string(runs_.capacity()) +
                                " are live); end some first"};
  }
  LiveRun run{std::string(token), budget, it != live_.end() ? it->second.started_unix : now_unix};
  if (journal_ != nullptr) {
    if (const std::string err = journal_->append_start(run); !err.empty()) {
      return {Outcome::kJournalFailed, "run " + run.token + " not started: " + err};
    }
  }
  if (runs_.put(digest(token), budget) == limiter::DigestMap::Put::kFull) {
    // Checked above; only a probe sequence past its limit gets here. Undo
    // the journal record so a restart does not start it either.
    if (journal_ != nullptr) (void)journal_->append_end(token);
    return {Outcome::kFull, "no room for run " + run.token + " in the run map; end some runs first"};
  }
  const bool existed = it != live_.end();
  live_[run.token] = run;
  wait_for_readers_();
  return {existed ? Outcome::kBudgetChanged : Outcome::kStarted,
          "run " + run.token + (existed ? " budget changed" : " started")};
}

RunRegistry::Result RunRegistry::end(std::string_view token) {
  std::lock_guard lock(mu_);
  const auto it = live_.find(token);
  if (it == live_.end()) return {Outcome::kNotLive, "run " + std::string(token) + " is not live"};
  if (journal_ != nullptr) {
    if (const std::string err = journal_->append_end(token); !err.empty()) {
      return {Outcome::kJournalFailed, "run " + std::string(token) + " not ended: " + err};
    }
  }
  (void)runs_.erase(digest(token));
  live_.erase(it);
  // TB13: once this returns, every worker has finished any decision that
  // could have found the run; the erased slot is reusable only then.
  const uint64_t grace = runs_.begin_grace();
  wait_for_readers_();
  runs_.end_grace(grace);
  return {Outcome::kEnded, "run " + std::string(token) + " ended"};
}

std::vector<LiveRun> RunRegistry::list() const {
  std::lock_guard lock(mu_);
  std::vector<LiveRun> out;
  out.reserve(live_.size());
  for (const auto& [token, run] : live_) out.push_back(run);
  return out;
}

std::optional<uint32_t> RunRegistry::budget(std::string_view token) const {
  std::lock_guard lock(mu_);
  const auto it = live_.find(token);
  if (it == live_.end()) return std::nullopt;
  return it->second.budget;
}

size_t RunRegistry::size() const {
  std::lock_guard lock(mu_);
  return live_.size();
}

}  // namespace sluice::control

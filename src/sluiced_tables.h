// sluiced's limiter tables (the rate-limit buckets, the TB07 credential
// records) and where their state comes from at start. They live in table
// files in the state directory (control/table_file.h), so a restart after a
// crash or an upgrade re-attaches them as the last process left them and
// gives no admission back. Where that cannot be (the first start, another
// layout or size, a damaged file), the buckets come from the snapshot
// (control/bucket_snapshot.h) and the credential records start empty; every
// such case is logged with its reason.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "control/bucket_snapshot.h"
#include "control/table_file.h"
#include "dataplane/policy_snapshot.h"
#include "limiter/bucket_table.h"
#include "limiter/compiled_policy.h"

namespace sluice::sluiced {

class LimiterTables {
 public:
  // Opens (or makes) the two table files in `state_dir` and the tables on
  // them. "" or why not (the file cannot be made or mapped); throws
  // std::bad_alloc for want of memory.
  [[nodiscard]] std::string open(const std::string& state_dir, const limiter::BucketTable::Options& buckets,
                                 const limiter::BucketTable::Options& records, uint64_t now);

  [[nodiscard]] limiter::BucketTable& buckets() noexcept { return *buckets_; }
  // The bucket file's generation, one more at every attach: the epoch of
  // this process's in-flight counts (limiter/in_flight.h), so a dead
  // process's read as zero.
  [[nodiscard]] uint16_t in_flight_epoch() const noexcept {
    return static_cast<uint16_t>(bucket_side_.file->generation());
  }
  [[nodiscard]] limiter::BucketTable& records() noexcept { return *records_; }

  // Before any worker runs, under the first policy: the re-attached buckets
  // kept (their keys carry the kinds this policy gives them) or carried
  // over to this policy's kinds as a snapshot would be; else the snapshot
  // file restored. Logs what it did. `now`: the limiter's clock.
  void settle(const std::string& state_dir, const limiter::CompiledPolicy& policy, uint64_t now);
  // After a policy is published: the kinds the published policy's buckets
  // carry, for the next start to read the table by. Any thread: a SIGHUP
  // reload and one from the control socket may end at once, so `current` is
  // asked under the lock, and the last record is the live policy's.
  void record_current_kinds(const std::function<std::shared_ptr<const dataplane::PolicySnapshot>()>& current);

 private:
  struct Side {
    std::unique_ptr<control::TableFile> file;
    control::TableFile::Outcome outcome = control::TableFile::Outcome::kCreated;
    std::string note;
  };
  [[nodiscard]] static std::string open_side(Side& side, const std::string& dir, const std::string& name,
                                             const limiter::BucketTable::Options& options, uint64_t now,
                                             std::unique_ptr<limiter::BucketTable>& table);
  void record_kinds(const limiter::CompiledPolicy& policy);
  void restore_from_snapshot(const std::string& state_dir, const limiter::CompiledPolicy& policy, uint64_t now);

  std::mutex record_mu_;  // orders record_current_kinds()
  Side bucket_side_, record_side_;
  std::unique_ptr<limiter::BucketTable> buckets_, records_;
};

}  // namespace sluice::sluiced

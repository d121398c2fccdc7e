// See sluiced_tables.h.
#include "sluiced_tables.h"

#include <algorithm>
#include <cstdio>
#include <tuple>

#include "control/log.h"

namespace sluice::sluiced {

namespace {

constexpr const char* kBucketFile = "buckets.table";
constexpr const char* kRecordFile = "credential-slots.table";

bool same_kinds(std::vector<control::BucketSnapshot::Kind> a, std::vector<control::BucketSnapshot::Kind> b) {
  const auto order = [](const control::BucketSnapshot::Kind& x, const control::BucketSnapshot::Kind& y) {
    return std::tie(x.kind, x.name, x.signature) < std::tie(y.kind, y.name, y.signature);
  };
  std::sort(a.begin(), a.end(), order);
  std::sort(b.begin(), b.end(), order);
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const auto& x, const auto& y) {
    return x.kind == y.kind && x.name == y.name && x.signature == y.signature;
  });
}

void notice(const std::string& message) {
  control::log(control::LogLevel::kNotice, control::LogEvent::kSnapshot, message);
}
void warning(const std::string& message) {
  control::log(control::LogLevel::kWarning, control::LogEvent::kSnapshot, message);
}

std::string left_out(const control::BucketRestore& r) {
  return "left out " + std::to_string(r.changed) + " whose limits changed, " + std::to_string(r.gone) +
         " the policy no longer has, " + std::to_string(r.no_room) + " for want of room";
}

}  // namespace

std::string LimiterTables::open_side(Side& side, const std::string& dir, const std::string& name,
                                     const limiter::BucketTable::Options& options, uint64_t now,
                                     std::unique_ptr<limiter::BucketTable>& table) {
  control::TableFile::Opened opened = control::TableFile::open(dir, name, options, now);
  if (!opened.file) return opened.error;
  side.file = std::move(opened.file);
  side.outcome = opened.outcome;
  side.note = std::move(opened.note);
  table = std::make_unique<limiter::BucketTable>(options, side.file->slots());
  return {};
}

std::string LimiterTables::open(const std::string& state_dir, const limiter::BucketTable::Options& buckets,
                                const limiter::BucketTable::Options& records, uint64_t now) {
  if (std::string err = open_side(bucket_side_, state_dir, kBucketFile, buckets, now, buckets_); !err.empty()) {
    return err;
  }
  return open_side(record_side_, state_dir, kRecordFile, records, now, records_);
}

void LimiterTables::settle(const std::string& state_dir, const limiter::CompiledPolicy& policy, uint64_t now) {
  using Outcome = control::TableFile::Outcome;
  // TB07's records: one kind, their words fixed by the file's options.
  if (record_side_.outcome == Outcome::kAttached) {
    const size_t live = records_->recover();
    notice("re-attached " + std::to_string(live) + " credential-slot records from " + record_side_.file->path() +
           " (generation " + std::to_string(record_side_.file->generation()) + ")");
  } else if (record_side_.outcome == Outcome::kSetAside) {
    warning(record_side_.note + "; the credential-slot records (TB07) start empty");
  }

  if (bucket_side_.outcome != Outcome::kAttached) {
    if (bucket_side_.outcome == Outcome::kSetAside) warning(bucket_side_.note + "; the buckets come from the snapshot");
    restore_from_snapshot(state_dir, policy, now);
    record_kinds(policy);
    return;
  }
  const size_t live = buckets_->recover();
  const std::string from = bucket_side_.file->path() + " (generation " +
                           std::to_string(bucket_side_.file->generation()) + ")";
  const std::optional<std::vector<control::BucketSnapshot::Kind>> recorded = bucket_side_.file->kinds();
  const std::vector<control::BucketSnapshot::Kind> now_kinds = control::kinds_of(policy);
  if (recorded && same_kinds(*recorded, now_kinds)) {
    notice("re-attached " + std::to_string(live) + " buckets from " + from + "; nothing given back");
  } else if (recorded) {
    // The policy's buckets are not the ones the keys were made for: each
    // slot carried over to its bucket's kind now, as from a snapshot.
    const control::BucketSnapshot carried = control::snapshot_of(*buckets_, *recorded, now);
    buckets_->clear();
    const control::BucketRestore r = control::restore_snapshot(carried, policy, *buckets_);
    notice("re-attached " + from + " under a policy with other buckets: carried over " + std::to_string(r.restored) +
           " buckets; " + left_out(r));
  } else {
    warning(bucket_side_.file->path() + ": its record of the buckets' kinds is damaged; its " + std::to_string(live) +
            " buckets are dropped and the snapshot restored instead");
    buckets_->clear();
    restore_from_snapshot(state_dir, policy, now);
  }
  record_kinds(policy);
}

void LimiterTables::restore_from_snapshot(const std::string& state_dir, const limiter::CompiledPolicy& policy,
                                          uint64_t now) {
  const control::BucketRestore r = control::restore_buckets(state_dir, policy, *buckets_);
  if (!r.error.empty()) warning(r.error);
  if (!r.found || !r.error.empty()) return;
  // The absolute time too, so what was given back can be set against when
  // the last process stopped (a crash's time is only in the log that saw it).
  const double age = now > r.taken_at ? static_cast<double>(now - r.taken_at) / 1e9 : 0.0;
  char taken[96];
  std::snprintf(taken, sizeof taken, "taken %.1f s ago, at %llu.%03llu UTC seconds", age,
                static_cast<unsigned long long>(r.taken_at / 1000000000),
                static_cast<unsigned long long>(r.taken_at / 1000000 % 1000));
  notice("restored " + std::to_string(r.restored) + " buckets from " + state_dir + "/" +
         std::string(control::kBucketSnapshotFile) + " (" + taken + "); " + left_out(r));
}

void LimiterTables::record_current_kinds(
    const std::function<std::shared_ptr<const dataplane::PolicySnapshot>()>& current) {
  const std::lock_guard<std::mutex> lock(record_mu_);
  record_kinds(current()->policy);
}

void LimiterTables::record_kinds(const limiter::CompiledPolicy& policy) {
  if (!bucket_side_.file->record_kinds(control::kinds_of(policy))) {
    warning(bucket_side_.file->path() + ": more bucket kinds than it can record; a restart will take the buckets "
                                        "from the snapshot");
  }
}

}  // namespace sluice::sluiced

// Buckets that survive a restart: the shared bucket table's live
// slots, written to the state directory as the reclaimer passes over them
// and again at a clean stop, and put back at start when the table file
// (table_file.h) cannot be re-attached, so a crash then costs at most about
// two reclaimer sweeps (2 s in sluiced) of admissions instead of every
// bucket coming back full. Only buckets whose name and limits are
// unchanged are put back: a bucket whose rate, burst or window changed, or
// that the policy no longer has, starts full as a new one would.
//
// The file, `buckets.snapshot` (little-endian, replaced atomically):
//
//   "SLUICEBK"  u32 version (1)  u32 words per slot  u64 taken at (UTC ns)
//   u32 kinds, then for each: u16 kind  u16 name length  name  u64 signature
//   u64 slots, then for each: u64 k0  u64 k1  words x u64
//   u32 CRC-32C of everything before it
//
// Keys are keyed hashes (the state directory's bucket.secret keys them, so
// they mean the same after a restart); a slot's kind (k1's low 16 bits) is
// mapped back through its bucket's name, since kinds are handed out anew at
// start. State words are absolute times (a GCRA bucket's theoretical
// arrival time, a window's minute) on the limiter's UTC clock.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dataplane/policy_snapshot.h"
#include "limiter/bucket_table.h"
#include "limiter/compiled_policy.h"

namespace sluice::control {

inline constexpr std::string_view kBucketSnapshotFile = "buckets.snapshot";

struct BucketSnapshot {
  struct Kind {
    uint16_t kind = 0;
    std::string name;
    uint64_t signature = 0;
  };
  uint64_t taken_at = 0;  // UTC ns
  unsigned words = 0;
  std::vector<Kind> kinds;
  std::vector<uint64_t> slots;  // k0, k1, then `words` words, for each slot
};

// What a bucket's state means: its algorithm and limits. Equal signatures,
// equal meaning.
[[nodiscard]] uint64_t bucket_signature(const limiter::CompiledBucket& b);

[[nodiscard]] std::string encode_bucket_snapshot(const BucketSnapshot& s);
// nullopt, with `error`, unless `bytes` are a whole, intact snapshot of
// this version.
[[nodiscard]] std::optional<BucketSnapshot> decode_bucket_snapshot(std::string_view bytes, std::string& error);

struct BucketRestore {
  bool found = false;        // there was a snapshot file
  std::string error;         // it could not be used (unreadable, damaged): nothing restored
  uint64_t taken_at = 0;
  size_t restored = 0;
  size_t changed = 0;        // slots of buckets whose limits changed: left out
  size_t gone = 0;           // slots of buckets the policy no longer has: left out
  size_t no_room = 0;        // slots the table had no room for
};

// Puts back into `table` (before any worker runs) the slots of `dir`'s
// snapshot whose buckets `policy` still has with the same limits.
[[nodiscard]] BucketRestore restore_buckets(const std::string& dir, const limiter::CompiledPolicy& policy,
                                            limiter::BucketTable& table);
// The same from a snapshot in memory (`found` is set).
[[nodiscard]] BucketRestore restore_snapshot(const BucketSnapshot& s, const limiter::CompiledPolicy& policy,
                                             limiter::BucketTable& table);

// Every live slot of `table` as a snapshot whose keys carry `kinds`, taken
// at `now` (before any worker runs, or as of the moment each slot is read).
[[nodiscard]] BucketSnapshot snapshot_of(const limiter::BucketTable& table, std::vector<BucketSnapshot::Kind> kinds,
                                         uint64_t now);
// The kinds `policy`'s buckets carry in the table, with names and signatures.
[[nodiscard]] std::vector<BucketSnapshot::Kind> kinds_of(const limiter::CompiledPolicy& policy);

// Keeps the snapshot: told by the reclaimer of each region it has passed
// (copied then, while the region is warm in the cache) and of each sweep's
// end (the file written then), and asked for a whole one at a clean stop.
// A snapshot is as old as its oldest region: its taken_at is when that
// region was copied, so a restore says truly how much it may give back.
// Control plane only.
class BucketSnapshotter {
 public:
  using CurrentPolicy = std::function<std::shared_ptr<const dataplane::PolicySnapshot>()>;
  using Now = std::function<uint64_t()>;

  BucketSnapshotter(limiter::BucketTable& table, std::string dir, CurrentPolicy current, Now now);

  void region_visited(unsigned region);
  // The file from the regions as last visited: "" or why it was not written.
  [[nodiscard]] std::string write();
  // Every region read now, then the file (a clean stop, workers stopped).
  [[nodiscard]] std::string write_all();

  [[nodiscard]] uint64_t written_at() const noexcept { return written_at_.load(std::memory_order_relaxed); }
  [[nodiscard]] uint64_t slots_written() const noexcept { return slots_written_.load(std::memory_order_relaxed); }

 private:
  limiter::BucketTable& table_;
  std::string dir_;
  CurrentPolicy current_;
  Now now_;
  std::vector<std::vector<uint64_t>> regions_;  // each region's slots as last visited
  std::vector<uint64_t> visited_at_;            // when each region was last copied (0: never)
  std::atomic<uint64_t> written_at_{0};
  std::atomic<uint64_t> slots_written_{0};
};

}  // namespace sluice::control

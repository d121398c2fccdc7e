// A limiter table (the rate-limit buckets, the TB07 credential records) in
// a file-backed shared mapping in the state directory, so that it outlives
// the process: the workers charge the file's pages themselves, and after a
// crash (kill -9, an abort) or an upgrade the kernel still holds every write
// they made. A restarted sluiced re-attaches and gives no admission back,
// where a snapshot (bucket_snapshot.h) gives back what was charged since it
// was taken. Costs nothing per request: the same slots, in shared instead of
// anonymous pages, faulted in at start. The page cache writes the dirty
// pages back now and then; the file is not a reboot's record (the snapshot
// is), and nothing waits for that I/O.
//
// The file (native byte order: it is read back by this machine only):
//
//   page 0   header: "SLUICETB", u32 layout, u32 header CRC-32C, the
//            table's options, the file's size, a generation (one more at
//            every attach), when it was made
//   page 1-  the kinds the table's keys carry, with their buckets' names
//            and signatures (bucket_snapshot.h), in two copies written
//            alternately, each with a sequence number and a CRC-32C, so a
//            crash in the middle of one leaves the other
//   then     the table's slots (limiter::BucketTable::bytes_for), from a
//            page boundary
//
// A file that is not this layout, not these options, or damaged, is set
// aside (renamed NAME.set-aside, replacing an older one), reported, and a
// new one made; the caller then falls back to the snapshot. Re-attaching
// cannot crash the daemon or half-restore it: the header is checked whole
// before any slot is used, and the table's own recover() makes every slot a
// valid one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "control/bucket_snapshot.h"
#include "control/mapped_file.h"
#include "limiter/bucket_table.h"

namespace sluice::control {

class TableFile {
 public:
  // Bumped whenever the header, the kinds area or a slot's layout changes:
  // a binary of another layout never attaches, it falls back to the snapshot.
  static constexpr uint32_t kLayout = 1;
  static constexpr size_t kMaxKinds = 1024;

  enum class Outcome : uint8_t {
    kCreated,   // there was none: a new, empty table
    kAttached,  // the last process's table, as it left it
    kSetAside,  // there was one this process cannot use (see `note`): set aside, a new, empty table made
  };
  struct Opened {
    std::unique_ptr<TableFile> file;  // null: no file could be made (see `error`)
    Outcome outcome = Outcome::kCreated;
    std::string note;   // kSetAside: what was wrong with the old one
    std::string error;  // why no file could be made
  };

  // dir/name for a table of `options`, made at `now` (UTC ns) if it is new.
  [[nodiscard]] static Opened open(const std::string& dir, const std::string& name,
                                   const limiter::BucketTable::Options& options, uint64_t now);

  TableFile(const TableFile&) = delete;
  TableFile& operator=(const TableFile&) = delete;

  // The table's memory, for limiter::BucketTable(options, slots()).
  [[nodiscard]] std::span<std::byte> slots() const noexcept;
  [[nodiscard]] uint64_t generation() const noexcept;
  [[nodiscard]] const std::string& path() const noexcept { return mapping_.path(); }

  // The kinds the table's keys carry, as last recorded (nullopt: never, or
  // both copies damaged).
  [[nodiscard]] std::optional<std::vector<BucketSnapshot::Kind>> kinds() const;
  // Records the kinds the table's keys carry from now on (at start and at
  // every reload, before the policy that gives them is published, so the
  // file never says less than the keys in it mean). False if there are more
  // than kMaxKinds or a name is too long to record.
  [[nodiscard]] bool record_kinds(const std::vector<BucketSnapshot::Kind>& kinds);

 private:
  TableFile(std::string path, int fd, std::byte* map, size_t bytes) noexcept
      : mapping_(std::move(path), fd, map, bytes), map_(map) {}

  Mapping mapping_;
  std::byte* map_;  // mapping_.data()
};

}  // namespace sluice::control

// The journal of live runs (DIR/runs.journal in the state directory), so a
// restart of sluiced does not forget them. Append-only text an operator can
// read with cat:
//
//   # sluice runs journal v1
//   S <token> <budget> <started_unix> <crc>
//   E <token> <crc>
//
// S starts a run (budget: requests per minute, 0 for the policy's), E ends
// it. <crc> is the CRC-32C of the line's bytes before the space that precedes
// it, as 8 lowercase hex digits, so a record cut short by a crash, or damaged
// later, is told from a good one. Every record is one write() and is
// fdatasync'ed before the append returns.
//
// Not thread-safe: one control thread owns the journal.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace sluice::control {

struct LiveRun {
  std::string token;
  uint32_t budget = 0;  // requests per minute, 0: the policy's
  int64_t started_unix = 0;

  friend bool operator==(const LiveRun&, const LiveRun&) = default;
};

// 1..128 characters of [A-Za-z0-9._~-]: what the caller accepts as a run's
// token, and what a replayed record must carry to be believed.
[[nodiscard]] bool valid_run_token(std::string_view token) noexcept;

class RunJournal {
 public:
  struct Replay {
    std::vector<LiveRun> live;          // started and not ended, in start order
    std::vector<std::string> warnings;  // records skipped, each naming its line
    std::string error;                  // non-empty: the journal cannot be used
  };

  // Past this many records, and more than kCompactRatio times the live runs,
  // an append rewrites the journal with only the live runs.
  static constexpr size_t kCompactRecords = 1024;
  static constexpr size_t kCompactRatio = 4;

  RunJournal() = default;
  RunJournal(const RunJournal&) = delete;
  RunJournal& operator=(const RunJournal&) = delete;
  ~RunJournal();

  // Opens dir/runs.journal for appending (creating it, 0600, with its header
  // if missing) and replays it. A start of a token already live changes its
  // budget (it keeps its place and start time); an end of a token not live is
  // ignored. A torn last record (no final newline, or a bad checksum) is
  // skipped with a warning and cut off, so the next append starts on a clean
  // line; a bad record elsewhere is skipped with a warning and kept in the
  // file (compaction drops it). `error` only when the journal is unusable:
  // cannot be created or opened, is not a regular file, or is not a v1
  // journal. Opening again closes what was open.
  [[nodiscard]] Replay open(const std::string& dir);

  // The live runs of dir/runs.journal, read and never written (sluice-replay
  // reads a box's state directory this way): a missing journal has none, a
  // torn last record is skipped with its warning and left in the file.
  [[nodiscard]] static Replay read(const std::string& dir);

  // Each appends one record; "" or the reason. The caller checks the token
  // with valid_run_token() first; an invalid one is refused here too. After a
  // failed sync (or a cut-short write that could not be taken back) appends
  // are refused until the journal is opened again or compacted, which
  // rewrites it from the records callers were told were kept.
  [[nodiscard]] std::string append_start(const LiveRun& run);
  [[nodiscard]] std::string append_end(std::string_view token);

  // Rewrites the journal with only the live runs (tmp file, fsync, rename,
  // fsync of the directory, reopened for append). Appends call it on their
  // own past the thresholds above; a failure there leaves the old journal in
  // use and is kept in compaction_error() (the append itself succeeded).
  [[nodiscard]] std::string compact();

  // Records in the file after the header (skipped bad ones included, until a
  // compaction drops them).
  [[nodiscard]] size_t records() const noexcept { return records_; }
  [[nodiscard]] std::vector<LiveRun> live() const;
  [[nodiscard]] const std::string& compaction_error() const noexcept { return compaction_error_; }
  [[nodiscard]] const std::string& path() const noexcept { return path_; }

 private:
  // Applies the records of `text` from `pos` (just past the header) on, with
  // a warning for each one skipped; returns how many bytes of `text` to keep:
  // all of them, or up to a torn last record.
  [[nodiscard]] size_t replay(std::string_view text, size_t pos, std::vector<std::string>& warnings);
  [[nodiscard]] std::string append(const std::string& line);
  void apply_start(const LiveRun& run);
  void apply_end(std::string_view token);
  void maybe_compact();
  void close_file() noexcept;

  std::string dir_;
  std::string path_;
  int fd_ = -1;
  off_t size_ = 0;  // bytes in the file: where the next record starts
  size_t records_ = 0;
  std::string broken_;  // non-empty: why appends are refused
  std::string compaction_error_;

  // Live runs in start order: by a sequence number, and that number by token.
  uint64_t next_seq_ = 0;
  std::map<uint64_t, LiveRun> by_seq_;
  std::unordered_map<std::string, uint64_t> seq_of_;
};

}  // namespace sluice::control

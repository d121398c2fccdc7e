// The runs journal: replay (with torn and damaged records skipped), appends
// of one synced write each, and compaction down to the live runs.
#include "run_journal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>

#include "crc32c.h"
#include "state_dir.h"

namespace sluice::control {

namespace {

constexpr std::string_view kHeader = "# sluice runs journal v1";
constexpr std::string_view kHeaderPrefix = "# sluice runs journal v";
constexpr const char* kFileName = "runs.journal";
constexpr size_t kMaxTokenSize = 128;
constexpr size_t kCrcDigits = 8;


std::string errno_text(int e) { return std::strerror(e); }

std::string with_crc(std::string body) {
  char buf[16];
  std::snprintf(buf, sizeof buf, " %08x\n", static_cast<unsigned>(crc32c(body)));
  body += buf;
  return body;
}

std::string start_line(const LiveRun& run) {
  return with_crc("S " + run.token + " " + std::to_string(run.budget) + " " + std::to_string(run.started_unix));
}

std::string end_line(std::string_view token) { return with_crc("E " + std::string(token)); }

// The record's body (what the checksum covers), if the line ends in
// " <8 lowercase hex digits>" that match it.
bool checksum_ok(std::string_view line, std::string_view& body) {
  if (line.size() < kCrcDigits + 1 || line[line.size() - kCrcDigits - 1] != ' ') return false;
  uint32_t want = 0;
  for (const char c : line.substr(line.size() - kCrcDigits)) {
    uint32_t d;
    if (c >= '0' && c <= '9') {
      d = static_cast<uint32_t>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      d = static_cast<uint32_t>(c - 'a' + 10);
    } else {
      return false;
    }
    want = want << 4 | d;
  }
  body = line.substr(0, line.size() - kCrcDigits - 1);
  return crc32c(body) == want;
}

template <typename T>
bool parse_number(std::string_view s, T& out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && end == s.data() + s.size();
}

enum class RecordKind { kStart, kEnd };

struct Record {
  RecordKind kind = RecordKind::kStart;
  LiveRun run;
};

// Reads a record whose checksum held; nullptr, or why it is still not one.
const char* parse_record(std::string_view body, Record& r) {
  std::vector<std::string_view> f;
  size_t pos = 0;
  for (;;) {
    const size_t sp = body.find(' ', pos);
    f.push_back(body.substr(pos, sp == std::string_view::npos ? std::string_view::npos : sp - pos));
    if (f.back().empty()) return "empty field";
    if (sp == std::string_view::npos) break;
    pos = sp + 1;
  }
  if (f[0] == "S") {
    if (f.size() != 4) return "a start record has 4 fields";
    r.kind = RecordKind::kStart;
    if (!parse_number(f[2], r.run.budget)) return "bad budget";
    if (!parse_number(f[3], r.run.started_unix)) return "bad start time";
  } else if (f[0] == "E") {
    if (f.size() != 2) return "an end record has 2 fields";
    r.kind = RecordKind::kEnd;
  } else {
    return "unknown record type";
  }
  if (!valid_run_token(f[1])) return "bad token";
  r.run.token = std::string(f[1]);
  return nullptr;
}

// Whole file from the start; false and errno on a read error.
bool read_all(int fd, std::string& out) {
  char buf[65536];
  off_t at = 0;
  for (;;) {
    const ssize_t n = ::pread(fd, buf, sizeof buf, at);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (n == 0) return true;
    out.append(buf, static_cast<size_t>(n));
    at += n;
  }
}

// The journal's descriptor, or -1 and `error`. A symlink is refused (lstat,
// O_NOFOLLOW) so the journal cannot be pointed at another file; so is
// anything else that is not a regular file.
int open_regular_file(const std::string& path, std::string& error) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    error = path + " is not a regular file";
    return -1;
  }
  const int fd = ::open(path.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    error = "cannot open the runs journal " + path + ": " + errno_text(errno);
    return -1;
  }
  if (::fstat(fd, &st) != 0) {
    error = "cannot stat " + path + ": " + errno_text(errno);
  } else if (!S_ISREG(st.st_mode)) {
    error = path + " is not a regular file";
  } else {
    return fd;
  }
  ::close(fd);
  return -1;
}

// Starts the file afresh with just its header, durably (the directory entry
// too, since the file may be new); "" or why not.
std::string write_header(int fd, const std::string& path, const std::string& dir, std::string_view header) {
  if (::ftruncate(fd, 0) != 0) return "cannot truncate " + path + ": " + errno_text(errno);
  const ssize_t n = ::write(fd, header.data(), header.size());
  if (n != static_cast<ssize_t>(header.size()))
    return "cannot write the header of " + path + ": " + (n < 0 ? errno_text(errno) : "short write");
  if (::fdatasync(fd) != 0) return "cannot sync " + path + ": " + errno_text(errno);
  return sync_dir(dir);
}

// "" if `first` (the file's first line) is the v1 header, or why the file is
// not read: another version, or not a journal at all.
std::string check_header(std::string_view first, const std::string& path) {
  if (first == kHeader) return "";
  if (first.starts_with(kHeaderPrefix))
    return path + " is a runs journal of version v" + std::string(first.substr(kHeaderPrefix.size(), 16)) +
           "; this sluiced reads v1";
  return path + " is not a sluice runs journal (its first line is not '" + std::string(kHeader) + "')";
}

std::string line_warning(const std::string& path, size_t line_no, std::string_view what) {
  return path + ": line " + std::to_string(line_no) + ": " + std::string(what);
}

}  // namespace

bool valid_run_token(std::string_view token) noexcept {
  if (token.empty() || token.size() > kMaxTokenSize) return false;
  for (const char c : token) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '~' || c == '-';
    if (!ok) return false;
  }
  return true;
}

RunJournal::~RunJournal() { close_file(); }

void RunJournal::close_file() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

RunJournal::Replay RunJournal::open(const std::string& dir) {
  close_file();
  size_ = 0;
  records_ = 0;
  broken_.clear();
  compaction_error_.clear();
  next_seq_ = 0;
  by_seq_.clear();
  seq_of_.clear();
  dir_ = dir;
  path_ = dir + "/" + kFileName;

  Replay r;
  if (dir.empty()) {
    r.error = "no state directory for the runs journal";
    return r;
  }
  const int fd = open_regular_file(path_, r.error);
  if (fd < 0) return r;
  const auto fail = [&](std::string why) {
    ::close(fd);
    r.error = std::move(why);
    return r;
  };
  std::string text;
  if (!read_all(fd, text)) return fail("cannot read " + path_ + ": " + errno_text(errno));

  // New, or cut short while its header was written: nothing was recorded yet.
  const std::string header = std::string(kHeader) + "\n";
  if (text.size() < header.size() && header.starts_with(text)) {
    if (std::string e = write_header(fd, path_, dir, header); !e.empty()) return fail(std::move(e));
    fd_ = fd;
    size_ = static_cast<off_t>(header.size());
    return r;
  }

  const size_t first_end = text.find('\n');
  if (std::string e = check_header(std::string_view(text).substr(0, first_end), path_); !e.empty())
    return fail(std::move(e));
  const size_t keep = replay(text, first_end + 1, r.warnings);
  if (keep < text.size()) {
    if (::ftruncate(fd, static_cast<off_t>(keep)) != 0 || ::fdatasync(fd) != 0)
      return fail("cannot cut the torn record off " + path_ + ": " + errno_text(errno));
  }
  fd_ = fd;
  size_ = static_cast<off_t>(keep);
  r.live = live();
  return r;
}

RunJournal::Replay RunJournal::read(const std::string& dir) {
  RunJournal j;
  j.dir_ = dir;
  j.path_ = dir + "/" + kFileName;
  Replay r;
  struct stat st {};
  if (::lstat(j.path_.c_str(), &st) != 0) {
    if (errno != ENOENT) r.error = "cannot read " + j.path_ + ": " + errno_text(errno);
    return r;
  }
  if (!S_ISREG(st.st_mode)) {
    r.error = j.path_ + " is not a regular file";
    return r;
  }
  const int fd = ::open(j.path_.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  std::string text;
  const bool ok = fd >= 0 && read_all(fd, text);
  const int err = errno;
  if (fd >= 0) ::close(fd);
  if (!ok) {
    r.error = "cannot read " + j.path_ + ": " + errno_text(err);
    return r;
  }
  const size_t first_end = text.find('\n');
  if (first_end == std::string::npos) return r;  // nothing recorded yet (or only a torn header)
  if (std::string e = check_header(std::string_view(text).substr(0, first_end), j.path_); !e.empty()) {
    r.error = std::move(e);
    return r;
  }
  (void)j.replay(text, first_end + 1, r.warnings);
  r.live = j.live();
  return r;
}

size_t RunJournal::replay(std::string_view text, size_t pos, std::vector<std::string>& warnings) {
  size_t line_no = 1;
  while (pos < text.size()) {
    ++line_no;
    const size_t nl = text.find('\n', pos);
    const bool last = nl == std::string_view::npos || nl + 1 == text.size();
    const std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    std::string_view body;
    const bool crc_ok = nl != std::string_view::npos && checksum_ok(line, body);
    if (last && !crc_ok) {
      // The record being written when sluiced stopped: the caller was never
      // told it was kept. Cut it off so the next append starts a clean line.
      warnings.push_back(line_warning(path_, line_no, "torn record skipped (written while the daemon stopped?)"));
      return pos;
    }
    ++records_;
    pos = nl + 1;
    if (!crc_ok) {
      warnings.push_back(line_warning(path_, line_no, "corrupt record skipped (bad checksum)"));
      continue;
    }
    Record rec;
    if (const char* why = parse_record(body, rec)) {
      warnings.push_back(line_warning(path_, line_no, std::string("corrupt record skipped (") + why + ")"));
      continue;
    }
    if (rec.kind == RecordKind::kStart) {
      apply_start(rec.run);
    } else {
      apply_end(rec.run.token);
    }
  }
  return text.size();
}

std::string RunJournal::append_start(const LiveRun& run) {
  if (!valid_run_token(run.token)) return "a run token is 1..128 characters of [A-Za-z0-9._~-]";
  if (std::string e = append(start_line(run)); !e.empty()) return e;
  apply_start(run);
  maybe_compact();
  return "";
}

std::string RunJournal::append_end(std::string_view token) {
  if (!valid_run_token(token)) return "a run token is 1..128 characters of [A-Za-z0-9._~-]";
  if (std::string e = append(end_line(token)); !e.empty()) return e;
  apply_end(token);
  maybe_compact();
  return "";
}

void RunJournal::maybe_compact() {
  if (records_ > kCompactRecords && records_ > kCompactRatio * by_seq_.size()) compaction_error_ = compact();
}

std::string RunJournal::append(const std::string& line) {
  if (fd_ < 0) return "the runs journal is not open";
  if (!broken_.empty()) return broken_;
  ssize_t n;
  do {
    n = ::write(fd_, line.data(), line.size());
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(line.size())) {
    const std::string why = n < 0 ? errno_text(errno) : "short write (disk full?)";
    // Part of a record would glue the next one onto it: take it back.
    if (n > 0 && ::ftruncate(fd_, size_) != 0)
      broken_ = path_ + ": a record cut short could not be removed (" + errno_text(errno) +
                "); open or compact the journal again";
    return "cannot append to " + path_ + ": " + why;
  }
  if (::fdatasync(fd_) != 0) {
    const std::string why = errno_text(errno);
    // After a failed sync the kernel may have dropped the pages and cleared
    // the error, so no later sync would tell: what is on disk is unknown.
    // Take back the record the caller is told failed, and stop appending
    // until a reopen or a compaction writes the file afresh.
    (void)::ftruncate(fd_, size_);
    broken_ = path_ + ": a sync failed (" + why + "); open or compact the journal again";
    return "cannot sync " + path_ + ": " + why;
  }
  size_ += static_cast<off_t>(line.size());
  ++records_;
  return "";
}

std::string RunJournal::compact() {
  if (fd_ < 0) return "the runs journal is not open";
  // Written from memory, which holds exactly the records callers were told
  // were kept: also the way back from a failed sync.
  std::string text = std::string(kHeader) + "\n";
  for (const auto& [seq, run] : by_seq_) text += start_line(run);
  const std::string e = write_file_atomically(dir_, kFileName, text);

  // The rename may have happened even when something after it failed: then
  // our descriptor is the old, unlinked file, and must be swapped.
  struct stat old_st {};
  struct stat new_st {};
  if (::fstat(fd_, &old_st) != 0 || ::stat(path_.c_str(), &new_st) != 0) {
    broken_ = path_ + ": lost track of the journal while compacting (" + errno_text(errno) + ")";
    return broken_;
  }
  if (old_st.st_dev == new_st.st_dev && old_st.st_ino == new_st.st_ino) return e;  // not replaced
  const int fd = ::open(path_.c_str(), O_RDWR | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    broken_ = path_ + ": cannot reopen the compacted journal (" + errno_text(errno) + ")";
    return broken_;
  }
  close_file();
  fd_ = fd;
  size_ = static_cast<off_t>(text.size());
  records_ = by_seq_.size();
  broken_.clear();
  return e;
}

std::vector<LiveRun> RunJournal::live() const {
  std::vector<LiveRun> out;
  out.reserve(by_seq_.size());
  for (const auto& [seq, run] : by_seq_) out.push_back(run);
  return out;
}

void RunJournal::apply_start(const LiveRun& run) {
  if (const auto it = seq_of_.find(run.token); it != seq_of_.end()) {
    by_seq_[it->second].budget = run.budget;
    return;
  }
  by_seq_.emplace(next_seq_, run);
  seq_of_.emplace(run.token, next_seq_);
  ++next_seq_;
}

void RunJournal::apply_end(std::string_view token) {
  const auto it = seq_of_.find(std::string(token));
  if (it == seq_of_.end()) return;
  by_seq_.erase(it->second);
  seq_of_.erase(it);
}

}  // namespace sluice::control

// See log.h: the logger, its two sinks, the settings' values.
#include "control/log.h"

#include <sys/stat.h>
#include <sys/uio.h>
#include <systemd/sd-journal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdlib>

namespace sluice::control {
namespace {

constexpr std::string_view kLevelNames[] = {"error", "warning", "notice", "info", "debug"};
constexpr std::string_view kEventNames[kLogEvents] = {"general", "ports",     "state",   "snapshot", "policy",
                                                      "clock",   "telemetry", "cluster", "refusal", "watchdog",
                                                      "penalty"};

// A message or field value as one line: a line break in something a client
// named (a file, a key) must not start a line of its own in the log.
std::string one_line(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) c = '?';
  }
  return out;
}

// What journald takes as a field name from a client: upper-case letters,
// digits and underscores, not starting with an underscore or a digit, at
// most 64 bytes.
bool journal_field_name(std::string_view name) noexcept {
  if (name.empty() || name.size() > 64 || name[0] == '_' || (name[0] >= '0' && name[0] <= '9')) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; });
}

std::optional<unsigned> parse_unsigned(std::string_view text) noexcept {
  unsigned v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

std::atomic<Logger*> installed{nullptr};

}  // namespace

std::string_view level_name(LogLevel level) noexcept {
  return kLevelNames[static_cast<size_t>(level)];
}

std::string_view event_name(LogEvent event) noexcept {
  return kEventNames[static_cast<size_t>(event)];
}

int syslog_priority(LogLevel level) noexcept {
  return 3 + static_cast<int>(level);  // LOG_ERR .. LOG_DEBUG
}

std::optional<LogLevel> parse_log_level(std::string_view text) noexcept {
  for (size_t i = 0; i < std::size(kLevelNames); ++i) {
    if (text == kLevelNames[i]) return static_cast<LogLevel>(i);
  }
  return std::nullopt;
}

std::optional<LogTarget> parse_log_target(std::string_view text) noexcept {
  if (text == "auto") return LogTarget::kAuto;
  if (text == "stderr") return LogTarget::kStderr;
  if (text == "journal") return LogTarget::kJournal;
  return std::nullopt;
}

std::optional<unsigned> parse_refusal_rate(std::string_view text) noexcept {
  if (text == "off") return 0u;
  const std::optional<unsigned> v = parse_unsigned(text);
  if (!v || *v > LogSettings::kMaxRefusalRate) return std::nullopt;
  return v;
}


std::string stderr_line(const LogRecord& record) {
  std::string line = "sluiced: ";
  if (record.level != LogLevel::kNotice && record.level != LogLevel::kInfo) {
    line += level_name(record.level);
    line += ": ";
  }
  line += record.message;
  line += '\n';
  return line;
}

void StderrSink::write(const LogRecord& record) noexcept {
  try {
    const std::string line = stderr_line(record);
    // One write: lines of other writers to the same stream stay whole.
    (void)std::fwrite(line.data(), 1, line.size(), out_);
    std::fflush(out_);
  } catch (...) {
    // Out of memory for a log line: the line is lost, nothing else.
  }
}

std::vector<std::string> journal_fields(const LogRecord& record) {
  std::vector<std::string> out;
  out.reserve(4 + record.fields.size());
  out.push_back("MESSAGE=" + std::string(record.message));
  out.push_back("PRIORITY=" + std::to_string(syslog_priority(record.level)));
  out.emplace_back("SYSLOG_IDENTIFIER=sluiced");
  out.push_back("SLUICE_EVENT=" + std::string(event_name(record.event)));
  for (const LogField& f : record.fields) {
    if (!journal_field_name(f.name)) continue;
    out.push_back(std::string(f.name) + "=" + one_line(f.value));
  }
  return out;
}

void JournalSink::write(const LogRecord& record) noexcept {
  try {
    const std::vector<std::string> fields = journal_fields(record);
    std::vector<iovec> iov(fields.size());
    for (size_t i = 0; i < fields.size(); ++i) {
      iov[i].iov_base = const_cast<char*>(fields[i].data());
      iov[i].iov_len = fields[i].size();
    }
    if (sd_journal_sendv(iov.data(), static_cast<int>(iov.size())) >= 0) return;
  } catch (...) {
  }
  StderrSink().write(record);
}

bool journal_stream_matches(const char* journal_stream, dev_t device, ino_t inode) noexcept {
  if (journal_stream == nullptr) return false;
  const std::string_view s(journal_stream);
  const size_t colon = s.find(':');
  if (colon == std::string_view::npos) return false;
  uint64_t dev = 0, ino = 0;
  const auto [dev_end, dev_ec] = std::from_chars(s.data(), s.data() + colon, dev);
  const auto [ino_end, ino_ec] = std::from_chars(s.data() + colon + 1, s.data() + s.size(), ino);
  if (dev_ec != std::errc() || dev_end != s.data() + colon || colon == 0) return false;
  if (ino_ec != std::errc() || ino_end != s.data() + s.size() || colon + 1 == s.size()) return false;
  return dev == static_cast<uint64_t>(device) && ino == static_cast<uint64_t>(inode);
}

bool stderr_is_journal() noexcept {
  struct stat st {};
  if (::fstat(STDERR_FILENO, &st) != 0) return false;
  return journal_stream_matches(std::getenv("JOURNAL_STREAM"), st.st_dev, st.st_ino);
}

bool journal_available() noexcept {
  return ::access("/run/systemd/journal/socket", W_OK) == 0;
}

std::unique_ptr<LogSink> make_log_sink(LogTarget target) {
  const bool journal = target == LogTarget::kJournal || (target == LogTarget::kAuto && stderr_is_journal());
  if (journal && journal_available()) return std::make_unique<JournalSink>();
  return std::make_unique<StderrSink>();
}

Logger::Logger(std::unique_ptr<LogSink> sink, LogLevel minimum, LogRate rate, Clock clock)
    : sink_(std::move(sink)), minimum_(minimum), clock_(std::move(clock)) {
  const auto now = clock_();
  for (Bucket& b : buckets_) {
    b.rate = rate;
    b.tokens = rate.burst;
    b.last = now;
  }
}

void Logger::set_rate(LogEvent event, LogRate rate) {
  std::lock_guard lock(mutex_);
  Bucket& b = buckets_[static_cast<size_t>(event)];
  b.rate = rate;
  b.tokens = rate.burst;
}

bool Logger::take(Bucket& b, std::chrono::steady_clock::time_point now) noexcept {
  if (now > b.last) {
    const double seconds = std::chrono::duration<double>(now - b.last).count();
    b.tokens = std::min(static_cast<double>(b.rate.burst), b.tokens + seconds * b.rate.per_second);
    b.last = now;
  }
  if (b.tokens < 1) return false;
  b.tokens -= 1;
  return true;
}

void Logger::log(LogLevel level, LogEvent event, std::string_view message, std::span<const LogField> fields) {
  if (!enabled(level)) return;
  std::lock_guard lock(mutex_);
  Bucket& b = buckets_[static_cast<size_t>(event)];
  if (!take(b, clock_())) {
    ++b.suppressed;
    b.suppressed_level = std::min(b.suppressed_level, level);
    return;
  }
  if (b.suppressed != 0) write_suppressed(event, b);
  write(level, event, message, fields);
}

void Logger::report_suppressed() {
  std::lock_guard lock(mutex_);
  const auto now = clock_();
  for (size_t i = 0; i < kLogEvents; ++i) {
    Bucket& b = buckets_[i];
    if (b.suppressed != 0 && take(b, now)) write_suppressed(static_cast<LogEvent>(i), b);
  }
}

void Logger::write_suppressed(LogEvent event, Bucket& b) {
  char rate[32];
  std::snprintf(rate, sizeof rate, "%g", b.rate.per_second);
  const std::string count = std::to_string(b.suppressed);
  const std::string message = count + " " + std::string(event_name(event)) + " messages suppressed (more than " +
                              std::to_string(b.rate.burst) + " at once, then " + rate + " a second)";
  const LogField fields[] = {{"SLUICE_SUPPRESSED", count}};
  write(b.suppressed_level, event, message, fields);
  b.suppressed = 0;
  b.suppressed_level = LogLevel::kDebug;
}

void Logger::write(LogLevel level, LogEvent event, std::string_view message, std::span<const LogField> fields) {
  const std::string line = one_line(message);
  sink_->write(LogRecord{level, event, line, fields});
}

ProcessLog::ProcessLog(Logger& logger) noexcept : previous_(installed.exchange(&logger)) {}

ProcessLog::~ProcessLog() {
  installed.store(previous_);
}

Logger& process_log() {
  if (Logger* l = installed.load()) return *l;
  // Built on first use, never destroyed: a thread may still log while
  // static objects are destroyed at exit.
  static Logger* const fallback = new Logger(std::make_unique<StderrSink>(), LogLevel::kInfo);
  return *fallback;
}

}  // namespace sluice::control

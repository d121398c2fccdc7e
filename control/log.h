// sluiced's log: levelled messages (error, warning, notice, info, debug),
// written to stderr as `sluiced: warning: ...` lines or to the journal with
// structured fields (PRIORITY, SYSLOG_IDENTIFIER=sluiced, SLUICE_EVENT,
// SLUICE_RULE, ...), each kind of message rate-limited, so that whoever can
// make sluiced warn (a client, a flapping Redis) cannot flood the log: past
// its burst a kind is suppressed, and one line says how many were when it
// is heard again. Control-plane threads only: the data plane never logs
// (the workers hand sampled refusals over a ring, dataplane/refusal_sampler.h).
//
// One process-wide logger, on purpose. main() builds it from the settings
// (LogSettings) and installs it for exactly its own lifetime (ProcessLog, an
// RAII guard); every thread reaches it through control::log(). The
// alternative, a Logger& in every constructor, would put the logger through
// the interfaces of every control thread (the cluster sync, the command
// handlers, the registries) for no other reason than a warning they may
// print. What can be tested takes a Logger: the Logger class itself has no
// global state, and its tests build their own over a fake sink. Before one
// is installed (the unit tests of the control threads, sluicectl), log()
// writes stderr lines at info, as sluiced always did.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::control {

// Syslog's severities 3 to 7, in that order: a message is written when its
// level is at most the logger's minimum.
enum class LogLevel : uint8_t { kError, kWarning, kNotice, kInfo, kDebug };

// What a message is about: its SLUICE_EVENT field, and the kind its rate is
// limited by.
enum class LogEvent : uint8_t {
  kGeneral,
  kPorts,      // port bring-up
  kState,      // the state directory: run journal, registries
  kSnapshot,   // the bucket snapshot
  kPolicy,     // reloads and publications
  kClock,      // the system clock stepped
  kTelemetry,  // DPDK's telemetry socket
  kCluster,    // the cluster sync
  kRefusal,    // a sampled refusal record (--refusal-log)
  kWatchdog,   // systemd's watchdog withheld or fed again (a worker stalled)
  kPenalty,    // a key put in a penalty box
};
inline constexpr size_t kLogEvents = 11;

enum class LogTarget : uint8_t {
  kAuto,     // the journal when stderr is connected to it, else stderr
  kStderr,
  kJournal,
};

[[nodiscard]] std::string_view level_name(LogLevel level) noexcept;
[[nodiscard]] std::string_view event_name(LogEvent event) noexcept;
[[nodiscard]] int syslog_priority(LogLevel level) noexcept;

// How sluiced logs (--log-level, --log-target, --refusal-log).
struct LogSettings {
  static constexpr unsigned kMaxRefusalRate = 10000;
  LogLevel level = LogLevel::kInfo;
  LogTarget target = LogTarget::kAuto;
  unsigned refusal_rate = 0;  // sampled refusals a second, for the whole box; 0: none
};

// The options' values; nullopt for anything else (the caller says which
// option, and that the values are these).
[[nodiscard]] std::optional<LogLevel> parse_log_level(std::string_view text) noexcept;
[[nodiscard]] std::optional<LogTarget> parse_log_target(std::string_view text) noexcept;
// "off", or 0 to LogSettings::kMaxRefusalRate.
[[nodiscard]] std::optional<unsigned> parse_refusal_rate(std::string_view text) noexcept;


// A structured field: a journald field name (A-Z, 0-9, _; not starting
// with _), and its value.
struct LogField {
  std::string_view name;
  std::string_view value;
};

struct LogRecord {
  LogLevel level = LogLevel::kInfo;
  LogEvent event = LogEvent::kGeneral;
  std::string_view message;  // one line: control characters already replaced
  std::span<const LogField> fields;
};

class LogSink {
 public:
  virtual ~LogSink() = default;
  // Called with the logger's lock held: one record at a time.
  virtual void write(const LogRecord& record) noexcept = 0;
};

// `sluiced: LEVEL: MESSAGE`, the level word left out for notice and info
// (the lines sluiced has always written). Fields are not written: the
// message says what they say.
[[nodiscard]] std::string stderr_line(const LogRecord& record);

class StderrSink final : public LogSink {
 public:
  explicit StderrSink(std::FILE* out = stderr) noexcept : out_(out) {}
  void write(const LogRecord& record) noexcept override;

 private:
  std::FILE* out_;
};

// The journal entry of a record, each element "NAME=value": MESSAGE,
// PRIORITY, SYSLOG_IDENTIFIER=sluiced, SLUICE_EVENT, then the record's
// fields (any with a name journald would refuse left out).
[[nodiscard]] std::vector<std::string> journal_fields(const LogRecord& record);

// sd_journal_sendv. Should the journal refuse an entry, the record goes to
// stderr instead of nowhere. (Where journald is not running at all,
// sd_journal_sendv drops entries without a word: make_log_sink() does not
// choose the journal then.)
class JournalSink final : public LogSink {
 public:
  void write(const LogRecord& record) noexcept override;
};

// systemd sets $JOURNAL_STREAM to "DEVICE:INODE" of the stream it connects
// a service's stderr to; a stderr with that device and inode is the journal
// (systemd.exec(5)).
[[nodiscard]] bool journal_stream_matches(const char* journal_stream, dev_t device, ino_t inode) noexcept;
[[nodiscard]] bool stderr_is_journal() noexcept;
// Whether journald listens (its socket, /run/systemd/journal/socket).
[[nodiscard]] bool journal_available() noexcept;
// The journal for kJournal (if it is available) and for kAuto when stderr
// is connected to it; stderr otherwise.
[[nodiscard]] std::unique_ptr<LogSink> make_log_sink(LogTarget target);

// A kind's rate: `burst` messages at once, then `per_second`.
struct LogRate {
  double per_second = 2;
  unsigned burst = 20;
};

class Logger {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  // Every kind starts with `rate` (set_rate changes one).
  Logger(std::unique_ptr<LogSink> sink, LogLevel minimum, LogRate rate = {},
         Clock clock = [] { return std::chrono::steady_clock::now(); });
  Logger(const Logger&) = delete;
  Logger& operator=(const Logger&) = delete;

  [[nodiscard]] bool enabled(LogLevel level) const noexcept { return level <= minimum_; }
  [[nodiscard]] LogLevel minimum() const noexcept { return minimum_; }
  // The kind's rate from now on, its whole burst available.
  void set_rate(LogEvent event, LogRate rate);

  // Writes the message if its level is enabled and its kind within its
  // rate (else counts it as suppressed). Any thread.
  void log(LogLevel level, LogEvent event, std::string_view message, std::span<const LogField> fields = {});
  void log(LogLevel level, LogEvent event, std::string_view message, std::initializer_list<LogField> fields) {
    log(level, event, message, std::span<const LogField>(fields.begin(), fields.size()));
  }

  // For each kind that suppressed messages and may write again: the line
  // saying how many. Called now and then (sluiced: once a second), so a
  // flood that stops is still counted.
  void report_suppressed();

 private:
  struct Bucket {
    LogRate rate;
    double tokens = 0;
    std::chrono::steady_clock::time_point last{};
    uint64_t suppressed = 0;
    LogLevel suppressed_level = LogLevel::kDebug;  // the most severe suppressed
  };

  [[nodiscard]] bool take(Bucket& b, std::chrono::steady_clock::time_point now) noexcept;
  void write_suppressed(LogEvent event, Bucket& b);
  void write(LogLevel level, LogEvent event, std::string_view message, std::span<const LogField> fields);

  std::unique_ptr<LogSink> sink_;
  const LogLevel minimum_;
  Clock clock_;
  std::mutex mutex_;  // the buckets and the sink
  Bucket buckets_[kLogEvents];
};

// Installs `logger` as the process's (control::log()) until it ends; the
// one installed before comes back then.
class ProcessLog {
 public:
  explicit ProcessLog(Logger& logger) noexcept;
  ~ProcessLog();
  ProcessLog(const ProcessLog&) = delete;
  ProcessLog& operator=(const ProcessLog&) = delete;

 private:
  Logger* previous_;
};

// The installed logger, or the stderr one at info.
[[nodiscard]] Logger& process_log();

inline void log(LogLevel level, LogEvent event, std::string_view message, std::initializer_list<LogField> fields = {}) {
  process_log().log(level, event, message, fields);
}

}  // namespace sluice::control

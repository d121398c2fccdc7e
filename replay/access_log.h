// Requests from an HTTP server's access log: nginx's log_format (`combined`
// by default, or the operator's own format string, whose variables name the
// fields), or JSON lines (one object per line; keys named after nginx's
// variables, or mapped to them; escape=json). Each line becomes the head the
// request would have sent (request line, Host, the headers the format
// recorded), parsed by the limiter's own parser when it is decided.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "replay/record.h"
#include "replay/record_source.h"

namespace sluice::replay {

class InputStream;

enum class LogFormat : uint8_t { kNginx, kJson };

struct LogOptions {
  LogFormat format = LogFormat::kNginx;
  // nginx: the log_format string the log was written with (nginx's syntax,
  // `$name` or `${name}` variables between literal text).
  std::string nginx_format =
      R"($remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent")";
  // JSON: key -> nginx variable name (without '$'), for keys that are not
  // named after the variable they hold (e.g. {"ts", "msec"}, {"client", "remote_addr"}).
  std::vector<std::pair<std::string, std::string>> json_fields;
  // DQ05: the response field carrying a request's tokens (the policy's
  // usage.response_field), lowercase; its value is read from
  // $upstream_http_<name> or $sent_http_<name> ('-' as '_'). Empty: none.
  std::string usage_field;
  // The destination port the requests are taken to have reached, when the
  // log does not say ($server_port).
  uint16_t default_port = 80;
};

// What one line holds and how it becomes a record. The decision's time,
// `at`, is the time logged (the request's end: $msec, else $time_iso8601,
// else $time_local) less $request_time when logged; `record_number` is the
// line (1-based). The head is the request line, `Host` ($http_host as sent,
// '-' meaning none; else $host; else `localhost` for HTTP/1.1), then each
// $http_<name> logged and not '-' as `Name: value`. A request line that is
// not three parts is the head alone (the parser answers it 400, as the
// appliance would); a CR, LF or other control byte in a logged field value,
// or a line break in the request line, keeps the record with `parse_error`
// set (kBadFieldValue, kBareCR, kBareLF) and no head, so no logged value can
// write a field of its own. DQ05: the usage field's value
// ($upstream_http_<field>, else $sent_http_<field>), the last of several
// upstreams', if it is a whole number, charged at the time logged. A line
// that does not match the format, or lacks what a request needs (a client
// address, a time, a request line) or holds one that does not parse, is a
// problem at FILE:LINE:COLUMN and skipped; blank lines are skipped silently.
// A line longer than kMaxLineBytes is a problem too, read past without being
// kept whole (memory stays bounded whatever the line).
inline constexpr size_t kMaxLineBytes = size_t{1} << 20;

// The pieces log readers read into, shared by the readers of one replay
// (they are read one step at a time, by one thread): however many logs are
// open, they cost one set of buffers.
class LogBuffers {
 public:
  LogBuffers();
  ~LogBuffers();
  LogBuffers(const LogBuffers&) = delete;
  LogBuffers& operator=(const LogBuffers&) = delete;

 private:
  friend class AccessLogReader;
  struct Pieces;
  std::unique_ptr<Pieces> pieces_;
};

// One log (a file, or a pipe such as `<(zcat access.log.gz)`; compressed
// ones are read decompressed, input_stream.h) read a step at a time: a
// step's pieces parsed in parallel, its records handed out in line order.
// Memory stays that of a step, whatever the log's length. `result` (the
// caller's, outliving the reader) receives the problems, the lines read and
// `fatal` (the file cannot be opened or read, or the format string is
// refused: check_nginx_format's message); its records stay empty. The
// options are copied.
class AccessLogReader final : public RecordSource {
 public:
  AccessLogReader(std::string path, uint32_t input, const LogOptions& options, LogBuffers& buffers,
                  InputResult& result);
  // The same, from `stream`, already open (a pipe whose first bytes were
  // looked at); `path` names it in messages.
  AccessLogReader(std::unique_ptr<InputStream> stream, std::string path, uint32_t input, const LogOptions& options,
                  LogBuffers& buffers, InputResult& result);
  ~AccessLogReader() override;
  AccessLogReader(const AccessLogReader&) = delete;
  AccessLogReader& operator=(const AccessLogReader&) = delete;

  bool next(std::vector<RequestRecord>& out) override;
  // Whether a line's time may be moved earlier by a logged duration
  // ($request_time; any JSON line): then the records come out of time order
  // by up to the longest request, not only by the few milliseconds between
  // workers writing one file.
  [[nodiscard]] bool logs_durations() const noexcept { return logs_durations_; }

 private:
  struct State;
  void start(const LogOptions& options, uint32_t input);
  std::string path_;
  LogBuffers& buffers_;
  InputResult& result_;
  std::unique_ptr<InputStream> in_;
  std::unique_ptr<State> state_;  // null: the log could not be opened
  uint64_t lines_before_ = 0;
  bool done_ = false;
  bool logs_durations_ = false;
};

// A whole log's records at once (tests, fuzzing, small inputs).
[[nodiscard]] InputResult read_access_log(const std::string& path, uint32_t input, const LogOptions& options);

// The variables a format string names, in order ("remote_addr", ...), or the
// error at its column ("1:17: ..."), for checking --log-format up front.
struct FormatCheck {
  std::vector<std::string> variables;
  std::string error;  // empty: the format is usable
};
[[nodiscard]] FormatCheck check_nginx_format(const std::string& format);

}  // namespace sluice::replay

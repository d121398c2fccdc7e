// Requests from an HTTP server's access log: nginx's log_format (`combined`
// by default, or the operator's own format string, whose variables name the
// fields), or JSON lines (one object per line; keys named after nginx's
// variables, or mapped to them; escape=json). Each line becomes the head the
// request would have sent (request line, Host, the headers the format
// recorded), parsed by the limiter's own parser when it is decided.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "replay/record.h"

namespace sluice::replay {

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

// Reads `path` (a file, or a pipe such as `<(zcat access.log.gz)`) in
// pieces that a TBB pipeline parses in parallel; the records come back in
// line order, `record_number` the line (1-based), `at` the decision's time:
// the time logged (the request's end: $msec, else $time_iso8601, else
// $time_local) less $request_time when logged. The head is the request line,
// `Host` ($http_host as sent, '-' meaning none; else $host; else `localhost`
// for HTTP/1.1), then each $http_<name> logged and not '-' as `Name: value`.
// A request line that is not three parts is the head alone (the parser
// answers it 400, as the appliance would); a CR, LF or other control byte in
// a logged field value, or a line break in the request line, keeps the
// record with `parse_error` set (kBadFieldValue, kBareCR, kBareLF) and no
// head, so no logged value can write a field of its own. DQ05: the usage
// field's value ($upstream_http_<field>, else $sent_http_<field>), the last
// of several upstreams', if it is a whole number, charged at the time logged.
// A line that does not match the format, or lacks what a request needs (a
// client address, a time, a request line) or holds one that does not parse,
// is a problem at FILE:LINE:COLUMN and skipped; blank lines are skipped
// silently. A line longer than kMaxLineBytes is a problem too, read past
// without being kept whole (memory stays bounded whatever the line). `fatal` when the file cannot be opened or read, or the format
// string is refused (check_nginx_format's message).
inline constexpr size_t kMaxLineBytes = size_t{1} << 20;
[[nodiscard]] InputResult read_access_log(const std::string& path, uint32_t input, const LogOptions& options);

// The variables a format string names, in order ("remote_addr", ...), or the
// error at its column ("1:17: ..."), for checking --log-format up front.
struct FormatCheck {
  std::vector<std::string> variables;
  std::string error;  // empty: the format is usable
};
[[nodiscard]] FormatCheck check_nginx_format(const std::string& format);

}  // namespace sluice::replay

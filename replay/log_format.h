// The access-log input's line formats: nginx's log_format (the format string
// cut into literal text and variables, a line matched against it, each
// variable's text located and nothing copied, nginx's escapes undone, the
// times nginx writes read as UTC nanoseconds) and JSON lines (keys named
// after nginx's variables). Both give a line's values by role; what they
// mean for a request (its head, its client, its time) is access_log.cpp's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "control/json.h"
#include "time/clock.h"

namespace sluice::replay {

// What a variable means to the replay; kOther is matched and ignored
// ($status, $body_bytes_sent, $remote_user, ...).
enum class LogRole : uint8_t {
  kOther,
  kRemoteAddr,      // $remote_addr: the client, the connection's peer
  kServerAddr,      // $server_addr, $server_port: where it connected
  kServerPort,
  kMsec,            // the time the line was written (the request's end)
  kTimeIso8601,
  kTimeLocal,
  kRequestTime,     // seconds from the first byte read to the line written
  kRequest,         // "GET /x HTTP/1.1"
  kRequestMethod,
  kRequestUri,
  kServerProtocol,
  kHost,            // nginx's $host (the request's host, or the server's name)
  kHttpHost,        // the Host field as sent
  kRequestField,    // $http_<name>: a request field
  kUpstreamUsage,   // $upstream_http_<usage field> (DQ05)
  kSentUsage,       // $sent_http_<usage field>
  kCount,
};

// `name` without '$', lowercase; `usage_variable` is the usage field's
// name as nginx spells it in a variable ("x_pi_usage_tokens"), or empty.
[[nodiscard]] LogRole classify_variable(std::string_view name, std::string_view usage_variable) noexcept;

// A response or request field's name as an nginx variable suffix:
// lowercase, '-' as '_' ("X-Pi-Usage-Tokens" -> "x_pi_usage_tokens").
[[nodiscard]] std::string variable_suffix(std::string_view field_name);

// One value of a line: its role, for kRequestField the variable's suffix
// ("x_forwarded_for"), its text (as logged, escapes and all, for an nginx
// line; decoded for a JSON line) and the 1-based byte column it starts at.
struct LogValue {
  LogRole role = LogRole::kOther;
  std::string_view field;
  std::string_view text;
  uint32_t column = 1;
};

// A format string, parsed. Parts alternate between literal text and
// variables, never two variables in a row (which text would be whose?).
struct NginxFormat {
  struct Part {
    std::string text;  // the literal, or the variable's name (lowercase, no '$')
    bool variable = false;
    LogRole role = LogRole::kOther;
  };
  std::vector<Part> parts;
};

struct FormatParse {
  NginxFormat format;
  std::vector<std::string> variables;  // named, in order
  std::string error;                   // "1:COLUMN: why"; empty: usable
};

// Refuses `${}`, an unterminated `${`, a '$' with no name, two variables with
// no text between them, and a format without a client address, a time or a
// request line ($request, or $request_method with $request_uri).
[[nodiscard]] FormatParse parse_nginx_format(std::string_view text, std::string_view usage_variable);

struct MatchFailure {
  uint32_t column = 1;  // 1-based, in bytes
  std::string message;
};

// Matches `line` (without its line end) left to right: a literal must come
// next; a variable takes the text up to its next literal's first occurrence
// that is not escaped by a backslash (the last variable: the rest of the
// line). Fills `values` with the variables whose role is not kOther.
[[nodiscard]] bool match_line(const NginxFormat& format, std::string_view line, std::vector<LogValue>& values,
                              MatchFailure& failure);

// A JSON line (one object): the members whose key names a variable (or is
// mapped to one by `key_to_variable`: key -> variable), string or number
// values (a number as its JSON text), null as absent; other keys ignored.
// The values are views into `doc`, which holds the parsed line. Strict JSON
// (control::parse_json: a duplicate key is refused); a column is a key's.
[[nodiscard]] bool read_json_line(std::string_view line,
                                  const std::vector<std::pair<std::string, std::string>>& key_to_variable,
                                  std::string_view usage_variable, control::Json& doc, std::vector<LogValue>& values,
                                  MatchFailure& failure);

// Undoes nginx's escapes, appending the text to `out` and returning a view of
// what was appended: `\xHH` (escape=default: `"`, `\` and bytes below 0x20
// or from 0x7f) and JSON's (escape=json: `\"`, `\\`, `\n`, `\u00XX`, ...). A
// backslash that starts neither stays as it is. Never longer than `text`,
// so `out` reserved to the sum of the inputs' sizes keeps earlier views valid.
std::string_view unescape_nginx(std::string_view text, std::string& out);

// "1733147736.123" ($msec) or "0.005" ($request_time): seconds, any
// fraction up to nanoseconds.
[[nodiscard]] std::optional<time::Nanos> parse_seconds(std::string_view text) noexcept;
// "2026-12-02T13:55:36+01:00" (also "Z", "+0100" and a fraction of seconds).
[[nodiscard]] std::optional<time::Nanos> parse_time_iso8601(std::string_view text) noexcept;
// "02/Dec/2026:13:55:36 +0100".
[[nodiscard]] std::optional<time::Nanos> parse_time_local(std::string_view text) noexcept;

// `text` for a message: quoted, at most 40 bytes, `"` and `\` escaped,
// control and non-ASCII bytes as \xHH (a log line is anyone's text; a
// terminal is not).
[[nodiscard]] std::string excerpt(std::string_view text);
// `text` with '"' and '\\' escaped and every byte below 0x20 or from 0x7f
// up as \xHH: what problem messages quote, so that no byte from an input
// reaches a terminal as a control sequence.
[[nodiscard]] std::string escaped_bytes(std::string_view text);

}  // namespace sluice::replay

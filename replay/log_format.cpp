// The access-log input's line formats: nginx's log_format (the format string
// parsed, a line matched against it, escapes undone, times read) and JSON
// lines. See log_format.h.
#include "replay/log_format.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace sluice::replay {
namespace {

bool is_name_char(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

char lower(char c) noexcept { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

struct NamedRole {
  std::string_view name;
  LogRole role;
};
constexpr std::array<NamedRole, 13> kNamedRoles{{
    {"remote_addr", LogRole::kRemoteAddr},
    {"server_addr", LogRole::kServerAddr},
    {"server_port", LogRole::kServerPort},
    {"msec", LogRole::kMsec},
    {"time_iso8601", LogRole::kTimeIso8601},
    {"time_local", LogRole::kTimeLocal},
    {"request_time", LogRole::kRequestTime},
    {"request", LogRole::kRequest},
    {"request_method", LogRole::kRequestMethod},
    {"request_uri", LogRole::kRequestUri},
    {"server_protocol", LogRole::kServerProtocol},
    {"host", LogRole::kHost},
    {"http_host", LogRole::kHttpHost},
}};

std::string format_error(size_t offset, std::string_view why) {
  return "1:" + std::to_string(offset + 1) + ": " + std::string(why);
}

// What a format must name for its lines to be requests; empty when it does.
std::string missing_variable(const NginxFormat& format) {
  std::array<bool, static_cast<size_t>(LogRole::kCount)> has{};
  for (const NginxFormat::Part& p : format.parts) has[static_cast<size_t>(p.role)] = true;
  auto named = [&](LogRole r) { return has[static_cast<size_t>(r)]; };
  if (!named(LogRole::kRemoteAddr)) return "no client address ($remote_addr)";
  if (!named(LogRole::kMsec) && !named(LogRole::kTimeIso8601) && !named(LogRole::kTimeLocal))
    return "no time ($msec, $time_iso8601 or $time_local)";
  if (!named(LogRole::kRequest) && !(named(LogRole::kRequestMethod) && named(LogRole::kRequestUri)))
    return "no request line ($request, or $request_method and $request_uri)";
  return {};
}

// The variable at `text[at]` ('$'): its name, and where the text after it
// starts; an error when there is no name.
struct NameRead {
  std::string_view name;
  size_t next = 0;
  std::string error;
};
NameRead read_variable_name(std::string_view text, size_t at) {
  if (at + 1 < text.size() && text[at + 1] == '{') {
    const size_t close = text.find('}', at + 2);
    if (close == std::string_view::npos) return {{}, 0, format_error(at, "unterminated \"${\"")};
    const std::string_view name = text.substr(at + 2, close - at - 2);
    if (name.empty()) return {{}, 0, format_error(at, "empty \"${}\"")};
    for (size_t i = 0; i < name.size(); ++i)
      if (!is_name_char(name[i])) return {{}, 0, format_error(at + 2 + i, "not a variable name's character")};
    return {name, close + 1, {}};
  }
  size_t end = at + 1;
  while (end < text.size() && is_name_char(text[end])) ++end;
  if (end == at + 1) return {{}, 0, format_error(at, "'$' without a variable name")};
  return {text.substr(at + 1, end - at - 1), end, {}};
}

// Where `literal` next occurs in `line` from `from` with no backslash
// escaping its first byte (an odd run of backslashes before it).
size_t find_unescaped(std::string_view line, size_t from, std::string_view literal) noexcept {
  for (size_t at = line.find(literal, from); at != std::string_view::npos; at = line.find(literal, at + 1)) {
    size_t backslashes = 0;
    while (at - backslashes > from && line[at - backslashes - 1] == '\\') ++backslashes;
    if (backslashes % 2 == 0) return at;
  }
  return std::string_view::npos;
}

bool fail(MatchFailure& failure, size_t offset, std::string message) {
  failure.column = static_cast<uint32_t>(offset + 1);
  failure.message = std::move(message);
  return false;
}

void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

// The escape at `s[i]` ('\\') appended to `out`; how many bytes it took, or
// 0 when it is no escape (the backslash is then taken as it is).
size_t unescape_one(std::string_view s, size_t i, std::string& out) {
  if (i + 1 >= s.size()) return 0;
  const char e = s[i + 1];
  switch (e) {
    case '"': case '\\': case '/': out += e; return 2;
    case 'n': out += '\n'; return 2;
    case 'r': out += '\r'; return 2;
    case 't': out += '\t'; return 2;
    case 'b': out += '\b'; return 2;
    case 'f': out += '\f'; return 2;
    case 'x': {
      if (i + 3 >= s.size() || hex_value(s[i + 2]) < 0 || hex_value(s[i + 3]) < 0) return 0;
      out += static_cast<char>(hex_value(s[i + 2]) * 16 + hex_value(s[i + 3]));
      return 4;
    }
    case 'u': {
      if (i + 5 >= s.size()) return 0;
      uint32_t cp = 0;
      for (size_t k = i + 2; k < i + 6; ++k) {
        if (hex_value(s[k]) < 0) return 0;
        cp = cp * 16 + static_cast<uint32_t>(hex_value(s[k]));
      }
      if (cp >= 0xd800 && cp <= 0xdfff) return 0;  // nginx writes only \u00XX; a surrogate stays as text
      append_utf8(cp, out);
      return 6;
    }
    default: return 0;
  }
}

// `n` digits at `s[at]`, or -1.
int fixed_digits(std::string_view s, size_t at, size_t n) noexcept {
  if (at + n > s.size()) return -1;
  int v = 0;
  for (size_t i = at; i < at + n; ++i) {
    if (!is_digit(s[i])) return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

struct Civil {
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  int64_t offset_seconds = 0;  // east of UTC
  time::Nanos fraction = 0;
};

std::optional<time::Nanos> to_utc(const Civil& c) noexcept {
  using namespace std::chrono;
  const year_month_day date{year{c.year}, month{static_cast<unsigned>(c.month)}, day{static_cast<unsigned>(c.day)}};
  if (c.year < 0 || c.month < 1 || c.day < 1 || !date.ok()) return std::nullopt;
  if (c.hour < 0 || c.hour > 23 || c.minute < 0 || c.minute > 59 || c.second < 0 || c.second > 59) return std::nullopt;
  const int64_t seconds = int64_t{sys_days{date}.time_since_epoch().count()} * 86400 + c.hour * 3600 +
                          c.minute * 60 + c.second - c.offset_seconds;
  if (seconds < 0 || seconds > 10'000'000'000) return std::nullopt;
  return static_cast<time::Nanos>(seconds) * time::kNanosPerSecond + c.fraction;
}

// "+HH:MM", "+HHMM" (either sign) or "Z", all of `s` from `at`.
bool read_offset(std::string_view s, size_t at, bool colon_allowed, Civil& c) noexcept {
  if (s.substr(at) == "Z") return true;
  if (at >= s.size() || (s[at] != '+' && s[at] != '-')) return false;
  const int hours = fixed_digits(s, at + 1, 2);
  size_t minutes_at = at + 3;
  if (colon_allowed && minutes_at < s.size() && s[minutes_at] == ':') ++minutes_at;
  const int minutes = fixed_digits(s, minutes_at, 2);
  if (hours < 0 || hours > 23 || minutes < 0 || minutes > 59 || minutes_at + 2 != s.size()) return false;
  c.offset_seconds = (s[at] == '-' ? -1 : 1) * (int64_t{hours} * 3600 + minutes * 60);
  return true;
}

int month_number(std::string_view abbreviation) noexcept {
  static constexpr std::array<std::string_view, 12> kMonths{"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  for (size_t i = 0; i < kMonths.size(); ++i)
    if (kMonths[i] == abbreviation) return static_cast<int>(i) + 1;
  return -1;
}

// "... (at byte N)" from control::parse_json, as a column.
uint32_t json_error_column(const std::string& error, size_t line_size) {
  const size_t at = error.rfind("at byte ");
  const unsigned long n = at == std::string::npos ? 1 : std::strtoul(error.c_str() + at + 8, nullptr, 10);
  return static_cast<uint32_t>(std::clamp<unsigned long>(n, 1, line_size + 1));
}

std::string_view mapped_variable(const std::vector<std::pair<std::string, std::string>>& key_to_variable,
                                 const std::string& key) noexcept {
  for (const auto& [from, variable] : key_to_variable)
    if (from == key) return variable;
  return key;
}

}  // namespace

LogRole classify_variable(std::string_view name, std::string_view usage_variable) noexcept {
  for (const NamedRole& r : kNamedRoles)
    if (r.name == name) return r.role;
  for (char c : name)
    if (!is_name_char(c)) return LogRole::kOther;
  if (!usage_variable.empty()) {
    if (name.starts_with("upstream_http_") && name.substr(14) == usage_variable) return LogRole::kUpstreamUsage;
    if (name.starts_with("sent_http_") && name.substr(10) == usage_variable) return LogRole::kSentUsage;
  }
  if (name.size() > 5 && name.starts_with("http_")) return LogRole::kRequestField;
  return LogRole::kOther;
}

std::string variable_suffix(std::string_view field_name) {
  std::string s(field_name);
  for (char& c : s) c = c == '-' ? '_' : lower(c);
  return s;
}

FormatParse parse_nginx_format(std::string_view text, std::string_view usage_variable) {
  FormatParse out;
  std::vector<NginxFormat::Part>& parts = out.format.parts;
  for (size_t i = 0; i < text.size();) {
    if (text[i] != '$') {
      if (parts.empty() || parts.back().variable) parts.push_back({});
      parts.back().text += text[i++];
      continue;
    }
    NameRead read = read_variable_name(text, i);
    if (!read.error.empty()) return {{}, {}, std::move(read.error)};
    if (!parts.empty() && parts.back().variable)
      return {{}, {}, format_error(i, "two variables with no text between them (where would one end?)")};
    std::string name(read.name);
    for (char& c : name) c = lower(c);
    out.variables.push_back(name);
    const LogRole role = classify_variable(name, usage_variable);
    parts.push_back({std::move(name), true, role});
    i = read.next;
  }
  if (std::string missing = missing_variable(out.format); !missing.empty()) return {{}, {}, format_error(0, missing)};
  return out;
}

bool match_line(const NginxFormat& format, std::string_view line, std::vector<LogValue>& values,
                MatchFailure& failure) {
  values.clear();
  const std::vector<NginxFormat::Part>& parts = format.parts;
  size_t pos = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const NginxFormat::Part& part = parts[i];
    if (!part.variable) {
      size_t same = 0;
      while (same < part.text.size() && pos + same < line.size() && line[pos + same] == part.text[same]) ++same;
      if (same < part.text.size()) return fail(failure, pos + same, "expected " + excerpt(part.text) + " here");
      pos += same;
      continue;
    }
    size_t end = line.size();
    if (i + 1 < parts.size()) {
      end = find_unescaped(line, pos, parts[i + 1].text);
      if (end == std::string_view::npos)
        return fail(failure, pos, "no " + excerpt(parts[i + 1].text) + " after $" + part.text);
    }
    if (part.role != LogRole::kOther) {
      const std::string_view field =
          part.role == LogRole::kRequestField ? std::string_view(part.text).substr(5) : std::string_view{};
      values.push_back({part.role, field, line.substr(pos, end - pos), static_cast<uint32_t>(pos + 1)});
    }
    pos = end;
  }
  if (pos != line.size()) return fail(failure, pos, "text past the end of the format");
  return true;
}

bool read_json_line(std::string_view line, const std::vector<std::pair<std::string, std::string>>& key_to_variable,
                    std::string_view usage_variable, control::Json& doc, std::vector<LogValue>& values,
                    MatchFailure& failure) {
  values.clear();
  std::string error;
  auto parsed = control::parse_json(line, error);
  if (!parsed) return fail(failure, json_error_column(error, line.size()) - 1, "not a JSON line: " + escaped_bytes(error));
  if (!parsed->is_object()) return fail(failure, 0, "not a JSON object");
  doc = std::move(*parsed);
  size_t search_from = 0;  // keys come in line order: each is looked for after the last
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    const std::string_view variable = mapped_variable(key_to_variable, it.key());
    const LogRole role = classify_variable(variable, usage_variable);
    if (role == LogRole::kOther || it.value().is_null()) continue;
    const size_t at = line.find("\"" + it.key() + "\"", search_from);
    if (at != std::string_view::npos) search_from = at + it.key().size() + 2;
    const size_t offset = at == std::string_view::npos ? 0 : at;
    if (it.value().is_number()) it.value() = it.value().dump();
    if (!it.value().is_string()) return fail(failure, offset, excerpt(it.key()) + " is not a string or a number");
    const std::string_view field = role == LogRole::kRequestField ? variable.substr(5) : std::string_view{};
    values.push_back({role, field, it.value().get_ref<const std::string&>(), static_cast<uint32_t>(offset + 1)});
  }
  return true;
}

std::string_view unescape_nginx(std::string_view text, std::string& out) {
  const size_t start = out.size();
  for (size_t i = 0; i < text.size();) {
    const size_t taken = text[i] == '\\' ? unescape_one(text, i, out) : 0;
    if (taken == 0) out += text[i++];
    i += taken;
  }
  return std::string_view(out).substr(start);
}

std::optional<time::Nanos> parse_seconds(std::string_view text) noexcept {
  size_t i = 0;
  uint64_t whole = 0;
  while (i < text.size() && is_digit(text[i]) && i < 11) whole = whole * 10 + static_cast<uint64_t>(text[i++] - '0');
  if (i == 0 || whole > 10'000'000'000) return std::nullopt;
  time::Nanos fraction = 0;
  if (i < text.size() && text[i] == '.') {
    const size_t first = ++i;
    time::Nanos scale = time::kNanosPerSecond;
    for (; i < text.size() && is_digit(text[i]); ++i) {
      scale /= 10;  // digits past nanoseconds count for nothing
      fraction += static_cast<time::Nanos>(text[i] - '0') * scale;
    }
    if (i == first) return std::nullopt;
  }
  if (i != text.size()) return std::nullopt;
  return whole * time::kNanosPerSecond + fraction;
}

std::optional<time::Nanos> parse_time_iso8601(std::string_view s) noexcept {
  Civil c;
  c.year = fixed_digits(s, 0, 4);
  c.month = fixed_digits(s, 5, 2);
  c.day = fixed_digits(s, 8, 2);
  c.hour = fixed_digits(s, 11, 2);
  c.minute = fixed_digits(s, 14, 2);
  c.second = fixed_digits(s, 17, 2);
  if (s.size() < 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':') return std::nullopt;
  size_t at = 19;
  if (s[at] == '.') {
    time::Nanos scale = time::kNanosPerSecond;
    for (++at; at < s.size() && is_digit(s[at]); ++at) {
      scale /= 10;
      c.fraction += static_cast<time::Nanos>(s[at] - '0') * scale;
    }
    if (s[at - 1] == '.') return std::nullopt;
  }
  if (!read_offset(s, at, true, c)) return std::nullopt;
  return to_utc(c);
}

std::optional<time::Nanos> parse_time_local(std::string_view s) noexcept {
  Civil c;
  c.day = fixed_digits(s, 0, 2);
  c.month = s.size() >= 6 ? month_number(s.substr(3, 3)) : -1;
  c.year = fixed_digits(s, 7, 4);
  c.hour = fixed_digits(s, 12, 2);
  c.minute = fixed_digits(s, 15, 2);
  c.second = fixed_digits(s, 18, 2);
  if (s.size() != 26 || s[2] != '/' || s[6] != '/' || s[11] != ':' || s[14] != ':' || s[17] != ':' || s[20] != ' ')
    return std::nullopt;
  if (!read_offset(s, 21, false, c) || s.substr(21) == "Z") return std::nullopt;
  return to_utc(c);
}

std::string excerpt(std::string_view text) {
  constexpr size_t kMax = 40;
  return "\"" + escaped_bytes(text.substr(0, kMax)) + (text.size() > kMax ? "\"..." : "\"");
}

std::string escaped_bytes(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02X", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace sluice::replay

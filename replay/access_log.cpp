// Requests from access logs: the file read a step at a time in pieces cut
// at line ends, a step's pieces parsed in parallel (each line turned into
// the head its request would have sent) and joined in line order. How a
// line's values are found (nginx's format, JSON) is log_format.cpp's; see
// access_log.h for what a line must hold.
#include "replay/access_log.h"

#include <sys/stat.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <utility>

#include "net/ip_address.h"
#include "replay/input_stream.h"
#include "replay/log_format.h"

namespace sluice::replay {
namespace {

// Big enough that a piece's fixed costs vanish, small enough that a few
// megabytes of log keep both cores busy.
constexpr size_t kPieceBytes = 256 * 1024;
constexpr size_t kPiecesPerStep = 8;

// A line that gives no record: where it went wrong, and why.
using LineError = MatchFailure;

// A piece of the file, and what its lines gave.
struct Piece {
  std::string text;
  std::vector<RequestRecord> records;  // record_number within the piece until appended
  std::vector<std::pair<uint64_t, LineError>> problems;  // (line within the piece, why): the first kMaxProblems
  uint64_t problem_count = 0;
  uint64_t lines = 0;
};

// What every piece is read with; not changed once reading starts.
struct LogReading {
  const LogOptions& options;
  uint32_t input = 0;
  std::string usage_variable;  // the usage field as an nginx variable suffix
  NginxFormat format;          // kNginx only
};

bool present(const LogValue* v) noexcept { return v != nullptr && !v->text.empty() && v->text != "-"; }

LineError missing(const LogValue* v, std::string message) { return {v ? v->column : 1u, std::move(message)}; }

bool has_control(std::string_view s) noexcept {
  return std::ranges::any_of(s, [](char c) { return (static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f; });
}

// Variable names are letters, digits and '_': folding bit 5 is enough.
bool iequals(std::string_view a, std::string_view b) noexcept {
  return std::ranges::equal(a, b, [](char x, char y) { return (x | 0x20) == (y | 0x20); });
}

// All of `text` as a number of type T, or nothing.
template <typename T>
std::optional<T> whole_number(std::string_view text) noexcept {
  T n{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return n;
}

// The first value of each role in a line (a variable logged twice, or a
// JSON key mapped onto another's variable, counts once).
class ValuesByRole {
 public:
  explicit ValuesByRole(std::span<const LogValue> values) noexcept {
    for (const LogValue& v : values)
      if (!first_[index(v.role)]) first_[index(v.role)] = &v;
  }
  [[nodiscard]] const LogValue* get(LogRole r) const noexcept { return first_[index(r)]; }

 private:
  static size_t index(LogRole r) noexcept { return static_cast<size_t>(r); }
  std::array<const LogValue*, static_cast<size_t>(LogRole::kCount)> first_{};
};

std::optional<LineError> read_connection(const ValuesByRole& by, uint16_t default_port, limiter::ConnectionFacts& conn) {
  const LogValue* peer = by.get(LogRole::kRemoteAddr);
  if (!present(peer)) return missing(peer, "no client address ($remote_addr)");
  const auto ip = net::parse_ip(peer->text);
  if (!ip) return LineError{peer->column, "the client address is not an IP address: " + excerpt(peer->text)};
  conn.peer = *ip;
  if (const LogValue* a = by.get(LogRole::kServerAddr); present(a)) {
    const auto destination = net::parse_ip(a->text);
    if (!destination) return LineError{a->column, "$server_addr is not an IP address: " + excerpt(a->text)};
    conn.destination = *destination;
  }
  conn.destination_port = default_port;
  if (const LogValue* p = by.get(LogRole::kServerPort); present(p)) {
    const auto port = whole_number<uint16_t>(p->text);
    if (!port || *port == 0) return LineError{p->column, "$server_port is not a port: " + excerpt(p->text)};
    conn.destination_port = *port;
  }
  return std::nullopt;
}

// DQ05's tokens, as the appliance reads the response field: a whole number
// or nothing. nginx lists several upstreams' values (", " or " : "
// between them); the last is the one that answered.
std::optional<uint64_t> usage_tokens(std::string_view text) noexcept {
  if (const size_t sep = text.find_last_of(",:"); sep != std::string_view::npos) text.remove_prefix(sep + 1);
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  return text.size() <= 18 ? whole_number<uint64_t>(text) : std::nullopt;
}

// nginx writes the line when the request ends: that is the time logged.
// The decision came when the head was read, $request_time earlier.
std::optional<LineError> read_times(const ValuesByRole& by, RequestRecord& r) {
  const LogValue* t = nullptr;
  const LogValue* logged = nullptr;  // a time variable, if only '-'
  for (LogRole role : {LogRole::kMsec, LogRole::kTimeIso8601, LogRole::kTimeLocal}) {
    if (!t && present(by.get(role))) t = by.get(role);
    if (!logged) logged = by.get(role);
  }
  if (!t) return missing(logged, "no time ($msec, $time_iso8601 or $time_local)");
  const auto end = t->role == LogRole::kMsec          ? parse_seconds(t->text)
                   : t->role == LogRole::kTimeIso8601 ? parse_time_iso8601(t->text)
                                                      : parse_time_local(t->text);
  if (!end) return LineError{t->column, "not a time: " + excerpt(t->text)};
  r.at = *end;
  if (const LogValue* d = by.get(LogRole::kRequestTime); present(d)) {
    const auto took = parse_seconds(d->text);
    if (!took || *took > *end) return LineError{d->column, "$request_time is not a duration: " + excerpt(d->text)};
    r.at = *end - *took;
  }
  const LogValue* usage = by.get(LogRole::kUpstreamUsage);
  if (!present(usage)) usage = by.get(LogRole::kSentUsage);
  if (present(usage)) {
    const auto tokens = usage_tokens(usage->text);
    r.has_usage = tokens.has_value();
    r.usage_tokens = tokens.value_or(0);
    r.usage_at = *end;
  }
  return std::nullopt;
}

struct RequestLine {
  std::string_view method, target, version;
  std::string_view whole;  // set when the logged line is not three parts: the head is that line alone
};

std::optional<LineError> read_request_line(const ValuesByRole& by, RequestLine& line) {
  if (const LogValue* q = by.get(LogRole::kRequest)) {
    if (!present(q)) return LineError{q->column, "no request line (the client sent none)"};
    const size_t sp1 = q->text.find(' ');
    const size_t sp2 = sp1 == std::string_view::npos ? sp1 : q->text.find(' ', sp1 + 1);
    const bool three = sp2 != std::string_view::npos && sp2 > sp1 + 1 && sp1 > 0 && sp2 + 1 < q->text.size() &&
                       q->text.find(' ', sp2 + 1) == std::string_view::npos;
    if (!three) {
      line.whole = q->text;
      return std::nullopt;
    }
    line = {q->text.substr(0, sp1), q->text.substr(sp1 + 1, sp2 - sp1 - 1), q->text.substr(sp2 + 1), {}};
    return std::nullopt;
  }
  const LogValue* m = by.get(LogRole::kRequestMethod);
  const LogValue* u = by.get(LogRole::kRequestUri);
  if (!present(m) || !present(u)) return missing(m ? m : u, "no request line ($request, or $request_method and $request_uri)");
  const LogValue* p = by.get(LogRole::kServerProtocol);
  line = {m->text, u->text, present(p) ? p->text : std::string_view("HTTP/1.1"), {}};
  return std::nullopt;
}

// The Host field: as sent ($http_host, '-' when the client sent none), else
// nginx's $host, else `localhost` for HTTP/1.1 (which requires one).
std::optional<std::string_view> host_of(const ValuesByRole& by, std::string_view version) {
  if (const LogValue* h = by.get(LogRole::kHttpHost)) return present(h) ? std::optional(h->text) : std::nullopt;
  if (const LogValue* h = by.get(LogRole::kHost); present(h)) return h->text;
  if (version == "HTTP/1.1") return std::string_view("localhost");
  return std::nullopt;
}

// The request fields the head carries: logged, not '-', each name once,
// never Host (host_of's).
bool carries(std::span<const LogValue> values, size_t i) noexcept {
  const LogValue& v = values[i];
  if (v.role != LogRole::kRequestField || !present(&v) || iequals(v.field, "host")) return false;
  for (size_t j = 0; j < i; ++j)
    if (values[j].role == LogRole::kRequestField && iequals(values[j].field, v.field)) return false;
  return true;
}

void append_field_name(std::string_view suffix, std::string& head) {
  bool word_start = true;
  for (char c : suffix) {
    if (c == '_') {
      head += '-';
      word_start = true;
      continue;
    }
    head += word_start && c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
    word_start = false;
  }
}

// The head, in one allocation. A line break in a logged value would write
// fields no client sent, so such a request is kept as the appliance's
// parser would have refused it (it cannot have been a well-formed head).
void write_head(const RequestLine& line, std::optional<std::string_view> host, std::span<const LogValue> values,
                RequestRecord& r) {
  const std::string_view parts[] = {line.method, line.target, line.version, line.whole};
  for (std::string_view p : parts) {
    if (p.find('\r') != std::string_view::npos) r.parse_error = http::ParseError::kBareCR;
    else if (p.find('\n') != std::string_view::npos && r.parse_error == http::ParseError::kNone)
      r.parse_error = http::ParseError::kBareLF;
  }
  if (r.parse_error != http::ParseError::kNone) return;
  if (!line.whole.empty()) {
    r.head.reserve(line.whole.size() + 4);
    r.head.append(line.whole).append("\r\n\r\n");
    return;
  }
  size_t size = line.method.size() + line.target.size() + line.version.size() + 2 + 2 + 2;
  if (host) size += 6 + host->size() + 2;
  for (size_t i = 0; i < values.size(); ++i)
    if (carries(values, i)) size += values[i].field.size() + 2 + values[i].text.size() + 2;
  bool bad_value = host && has_control(*host);
  for (size_t i = 0; i < values.size() && !bad_value; ++i) bad_value = carries(values, i) && has_control(values[i].text);
  if (bad_value) {
    r.parse_error = http::ParseError::kBadFieldValue;
    return;
  }
  r.head.reserve(size);
  r.head.append(line.method).append(" ").append(line.target).append(" ").append(line.version).append("\r\n");
  if (host) r.head.append("Host: ").append(*host).append("\r\n");
  for (size_t i = 0; i < values.size(); ++i) {
    if (!carries(values, i)) continue;
    append_field_name(values[i].field, r.head);
    r.head.append(": ").append(values[i].text).append("\r\n");
  }
  r.head.append("\r\n");
}

std::optional<LineError> build_record(std::span<const LogValue> values, uint16_t default_port, RequestRecord& r) {
  const ValuesByRole by(values);
  if (auto e = read_connection(by, default_port, r.conn)) return e;
  if (auto e = read_times(by, r)) return e;
  RequestLine line;
  if (auto e = read_request_line(by, line)) return e;
  write_head(line, line.whole.empty() ? host_of(by, line.version) : std::nullopt, values, r);
  return std::nullopt;
}

class PieceParser {
 public:
  explicit PieceParser(const LogReading& reading) : reading_(reading) {}
  void parse(Piece& piece);

 private:
  std::optional<LineError> read_line(std::string_view line, RequestRecord& r);
  std::optional<LineError> nginx_values(std::string_view line);

  const LogReading& reading_;
  std::vector<LogValue> values_;
  std::string unescaped_;  // values with escapes, undone; reserved per line so views stay valid
};

void PieceParser::parse(Piece& out) {
  const std::string_view text = out.text;
  // Room for lines of 32 bytes, so the vector never grows (and copies) for
  // real lines; what stays unused is mostly never touched.
  out.records.reserve(text.size() / 32 + 1);  // kept across the pieces this one is reused for
  for (size_t pos = 0; pos < text.size();) {
    const size_t nl = text.find('\n', pos);
    const size_t end = nl == std::string_view::npos ? text.size() : nl;
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++out.lines;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    RequestRecord r;
    std::optional<LineError> e;
    if (line.size() >= kMaxLineBytes) {
      // PieceReader kept only its first kMaxLineBytes: no request is that long.
      e = LineError{1, "a line longer than " + std::to_string(kMaxLineBytes >> 20) + " MiB: skipped"};
    } else {
      e = read_line(line, r);
    }
    if (e) {
      ++out.problem_count;
      if (out.problems.size() < InputResult::kMaxProblems)
        out.problems.emplace_back(out.lines, std::move(*e));
      continue;
    }
    r.input = reading_.input;
    r.record_number = out.lines;
    out.records.push_back(std::move(r));
  }
  out.text.clear();  // its room is read into again
}

std::optional<LineError> PieceParser::read_line(std::string_view line, RequestRecord& r) {
  control::Json doc;  // a JSON line's values are views into it
  MatchFailure failure;
  if (reading_.options.format == LogFormat::kJson) {
    if (!read_json_line(line, reading_.options.json_fields, reading_.usage_variable, doc, values_, failure))
      return failure;
  } else if (auto e = nginx_values(line)) {
    return e;
  }
  return build_record(values_, reading_.options.default_port, r);
}

std::optional<LineError> PieceParser::nginx_values(std::string_view line) {
  MatchFailure failure;
  if (!match_line(reading_.format, line, values_, failure))
    return LineError{failure.column, "does not match the log format: " + failure.message};
  unescaped_.clear();
  unescaped_.reserve(line.size());
  for (LogValue& v : values_)
    if (v.text.find('\\') != std::string_view::npos) v.text = unescape_nginx(v.text, unescaped_);
  return std::nullopt;
}

// The file in pieces of about kPieceBytes, each ending at a line end (the
// last at the file's end), read as the pipeline asks for them: a log of any
// size (a pipe too, as from `<(zcat access.log.gz)`) costs a few pieces of
// memory, and reading overlaps parsing. A line longer than kMaxLineBytes
// is kept to its first kMaxLineBytes, the rest read past and dropped, so
// that one endless line costs no more memory than a long one (the parser
// reports it and skips it).
class PieceReader {
 public:
  explicit PieceReader(InputStream& in) : in_(in) {}
  // The next piece; false at the end.
  bool next(std::string& piece) {
    piece.swap(carry_);  // the carry holds no line end: only new bytes are searched
    carry_.clear();
    size_t nl = std::string::npos;
    while (!done_ && nl == std::string::npos) {
      const size_t old = piece.size();
      piece.resize(old + kPieceBytes);
      const size_t n = read_fully(piece.data() + old, kPieceBytes);
      piece.resize(old + n);
      done_ = n < kPieceBytes;
      const size_t at = done_ ? std::string::npos : std::string_view(piece).substr(old).rfind('\n');
      if (at != std::string::npos) {
        nl = old + at;
        continue;
      }
      // No line end in the new bytes: the line under way began after the
      // last one before them.
      const size_t before = std::string_view(piece).substr(0, old).rfind('\n');
      const size_t line_start = before == std::string::npos ? 0 : before + 1;
      if (piece.size() - line_start > kMaxLineBytes) {
        piece.resize(line_start + kMaxLineBytes);
        piece += '\n';
        if (!done_ && !skip_to_line_end()) done_ = true;  // what follows its end is the carry
        return true;
      }
    }
    if (nl != std::string::npos) {
      carry_.assign(piece, nl + 1);
      piece.resize(nl + 1);
    }
    return !piece.empty();
  }

 private:
  // As fread: `n` bytes unless the input ends (a decompressor hands out
  // what one step made).
  size_t read_fully(char* out, size_t n) {
    size_t got = 0;
    while (got < n) {
      const size_t k = in_.read(out + got, n - got);
      if (k == 0) break;
      got += k;
    }
    return got;
  }
  // Reads past the rest of an overlong line, its end included; what
  // follows it becomes the carry. False at the file's end.
  bool skip_to_line_end() {
    skip_.resize(64 * 1024);
    for (;;) {
      const size_t n = read_fully(skip_.data(), skip_.size());
      const std::string_view got(skip_.data(), n);
      if (const size_t at = got.find('\n'); at != std::string_view::npos) {
        carry_.assign(got.substr(at + 1));
        return true;
      }
      if (n < skip_.size()) return false;
    }
  }

  InputStream& in_;
  std::string carry_;  // the start of a line the last piece did not end
  std::vector<char> skip_;  // made for the first overlong line: most logs have none
  bool done_ = false;
};

// One piece's lines, made the file's: line numbers counted from the lines
// of the pieces before it.
void append(Piece& piece, const std::string& path, uint32_t input, uint64_t& lines_before,
            std::vector<RequestRecord>& out, InputResult& result) {
  for (RequestRecord& r : piece.records) {
    r.record_number += lines_before;
    r.order = record_order(input, r.record_number);
    out.push_back(std::move(r));
  }
  for (auto& [line, error] : piece.problems)
    result.problem(path + ":" + std::to_string(line + lines_before) + ":" + std::to_string(error.column),
                   std::move(error.message));
  result.problem_count += piece.problem_count - piece.problems.size();
  lines_before += piece.lines;
  piece.records.clear();
  piece.problems.clear();
  piece.problem_count = piece.lines = 0;
}

bool logs_durations(const LogReading& reading) {
  if (reading.options.format == LogFormat::kJson) return true;  // any line's keys may hold one
  return std::ranges::any_of(reading.format.parts, [](const NginxFormat::Part& p) {
    return p.variable && p.role == LogRole::kRequestTime;
  });
}

}  // namespace

// Pieces are reused from one step to the next: a fresh piece's buffers
// would cost page faults on every 256 KiB read, more than parsing it does.
struct LogBuffers::Pieces {
  std::array<Piece, kPiecesPerStep> pieces;
};

LogBuffers::LogBuffers() : pieces_(std::make_unique<Pieces>()) {}
LogBuffers::~LogBuffers() = default;

struct AccessLogReader::State {
  State(const LogOptions& given, uint32_t input, InputStream& in)
      : options(given), reading{options, input, variable_suffix(options.usage_field), {}}, reader(in) {}
  const LogOptions options;  // the reader's own: the caller's may go
  LogReading reading;
  PieceReader reader;
};

AccessLogReader::AccessLogReader(std::string path, uint32_t input, const LogOptions& options, LogBuffers& buffers,
                                 InputResult& result)
    : path_(std::move(path)), buffers_(buffers), result_(result) {
  std::string error;
  in_ = InputStream::open(path_, error);
  if (!in_) {
    result_.fatal = true;
    result_.problem(path_, error);
    return;
  }
  start(options, input);
}

AccessLogReader::AccessLogReader(std::unique_ptr<InputStream> stream, std::string path, uint32_t input,
                                 const LogOptions& options, LogBuffers& buffers, InputResult& result)
    : path_(std::move(path)), buffers_(buffers), result_(result), in_(std::move(stream)) {
  start(options, input);
}

void AccessLogReader::start(const LogOptions& options, uint32_t input) {
  state_ = std::make_unique<State>(options, input, *in_);
  if (options.format == LogFormat::kNginx) {
    FormatParse parsed = parse_nginx_format(options.nginx_format, state_->reading.usage_variable);
    if (!parsed.error.empty()) {
      result_.fatal = true;
      result_.problem("log format", parsed.error);
      state_.reset();
      return;
    }
    state_->reading.format = std::move(parsed.format);
  }
  logs_durations_ = replay::logs_durations(state_->reading);
}

AccessLogReader::~AccessLogReader() = default;

bool AccessLogReader::next(std::vector<RequestRecord>& out) {
  if (!state_ || done_) return false;
  std::array<Piece, kPiecesPerStep>& pieces = buffers_.pieces_->pieces;
  // Read in order, a step's pieces parsed in parallel, joined in order.
  const size_t want = std::clamp<size_t>(2 * static_cast<size_t>(tbb::this_task_arena::max_concurrency()), 1,
                                         kPiecesPerStep);
  size_t n = 0;
  while (n < want && state_->reader.next(pieces[n].text)) ++n;
  if (n == 0) {
    done_ = true;
    result_.units_read = lines_before_;
    if (in_->failed()) {
      // What was read is kept, but the input is not whole: said first, where
      // the problems of the lines before it cannot crowd it out.
      result_.fatal = true;
      ++result_.problem_count;
      result_.problems.insert(result_.problems.begin(), InputProblem{path_, in_->error()});
      if (result_.problems.size() > InputResult::kMaxProblems) result_.problems.pop_back();
    }
    in_.reset();  // the file and its decompressor go at once
    return false;
  }
  tbb::parallel_for(size_t{0}, n, [&](size_t i) { PieceParser(state_->reading).parse(pieces[i]); });
  for (size_t i = 0; i < n; ++i) append(pieces[i], path_, state_->reading.input, lines_before_, out, result_);
  result_.units_read = lines_before_;
  return true;
}

InputResult read_access_log(const std::string& path, uint32_t input, const LogOptions& options) {
  InputResult result;
  LogBuffers buffers;
  AccessLogReader reader(path, input, options, buffers, result);
  while (reader.next(result.records)) {
  }
  return result;
}

FormatCheck check_nginx_format(const std::string& format) {
  FormatParse parsed = parse_nginx_format(format, {});
  if (!parsed.error.empty()) return {{}, std::move(parsed.error)};
  return {std::move(parsed.variables), {}};
}

}  // namespace sluice::replay

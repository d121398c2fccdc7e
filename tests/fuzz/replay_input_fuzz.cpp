// libFuzzer target for what sluice-replay reads: captures and
// access logs are anyone's files. The first input byte picks the path (its
// two low bits) and that path's options (the other bits); the rest is the
// input:
//   0  a capture image as it is: index_capture, walk_packet on every packet,
//      then read_capture on the same bytes as a file (a memfd);
//   1  a capture written from the input (up to three connections' segments:
//      flags, in order or not, pieces of requests and responses) with
//      tests/support/pcap_writer.h, then as 0: the flows get deep;
//   2  log lines: nginx's `combined` and a custom format (bit 3: a format
//      string from the first line instead) through parse_nginx_format and
//      match_line, with unescape_nginx and the time parsers on each value;
//      bit 2: JSON lines through read_json_line instead;
//   3  read_access_log on the bytes as a file (bits 2-3: combined, custom,
//      JSON, or a format string from the first line).
// Captures: bit 2 watches a usage field (DQ05), bit 3 allows CONNECT, bit 4
// HTTP/2 prior knowledge; the rest comes from config/three-budgets.yaml.
// What must hold, checked on every input (a failure traps, which libFuzzer
// reports with the input):
//   - views (packets, payloads, values, unescaped text) lie inside what they
//     view; packet numbers rise; problems come in file order;
//   - a record's number is a packet read (its time that packet's) or a line
//     of the file; `order` is record_order(input, number); a capture's
//     records come in packet order (one file is read as it was written),
//     and the streamed reader reads what the reader of the whole image
//     reads (unless the bytes begin as compressed data);
//   - a record without parse_error has a head, and the policy's HeadParser
//     reads it whole (a capture's: complete, as the stream cut it) or
//     refuses it (a log's); one with parse_error has none;
//   - lines read = the file's lines; records + problems = lines not blank;
//     at most kMaxProblems problems kept; messages are printable ASCII
//     (a hostile line's bytes escaped, as excerpt() does);
//   - the two time parsers agree on the same instant, "Z" means "+00:00".
// Single-threaded (TBB limited to one thread) so coverage is stable.
// SLUICE_FUZZ_VERBOSE=1 prints what each input gave (records, problems), for
// reading a failing input or checking the seeds; SLUICE_FUZZ_MESSAGES=0
// drops the check that messages are printable ASCII.
#include <fuzzer/FuzzedDataProvider.h>
#include <sys/mman.h>
#include <tbb/global_control.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http/head_parser.h"
#include "http/http1_policy.h"
#include "pcap_writer.h"
#include "policy/policy_loader.h"
#include "replay/access_log.h"
#include "replay/capture_file.h"
#include "replay/capture_input.h"
#include "replay/input_stream.h"
#include "replay/log_format.h"

namespace {

using namespace sluice;
namespace rp = sluice::replay;

[[noreturn]] void fail(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::fputs("replay_input_fuzz: ", stderr);
  std::vfprintf(stderr, fmt, ap);
  std::fputc('\n', stderr);
  va_end(ap);
  __builtin_trap();
}

bool g_verbose = false;
bool g_check_messages = true;

constexpr uint32_t kInput = 3;  // the input's index: not 0, so record_order's shift shows
constexpr char kUsageField[] = "x-pi-usage-tokens";
constexpr char kUsageVariable[] = "x_pi_usage_tokens";
constexpr char kCustomFormat[] =
    "$remote_addr [$time_iso8601] $msec \"$request_method $request_uri $server_protocol\" "
    "${server_addr}:$server_port host=$host hh=$http_host rt=$request_time \"$http_authorization\" "
    "\"$http_x_forwarded_for\" up=$upstream_http_x_pi_usage_tokens sent=$sent_http_x_pi_usage_tokens";
const std::vector<std::pair<std::string, std::string>> kJsonFields = {
    {"ts", "msec"}, {"client", "remote_addr"}, {"auth", "http_authorization"}, {"tokens", "upstream_http_x_pi_usage_tokens"}};

bool env_flag(const char* name, bool fallback) {
  const char* v = std::getenv(name);
  return v == nullptr || *v == '\0' ? fallback : std::string_view(v) != "0";
}

// ---------------------------------------------------------------------------
// What every input shares: the policy (loaded at the first call), a file
// the readers open by name, a head parser with the policy's fields.

const http::Http1Policy& replay_policy() {
  static const std::unique_ptr<limiter::KeyHasher> hasher = [] {
    std::array<uint8_t, limiter::KeyHasher::kSecretSize> secret{};
    for (size_t i = 0; i < secret.size(); ++i) secret[i] = static_cast<uint8_t>(i * 7 + 3);
    return std::make_unique<limiter::KeyHasher>(secret);
  }();
  static const std::unique_ptr<http::Http1Policy> compiled = [] {
    const std::string path = std::string(SLUICE_CONFIG_DIR) + "/three-budgets.yaml";
    policy::LoadResult loaded = policy::load_policy_file(path);
    if (!loaded.policy) fail("%s does not load", path.c_str());
    std::vector<policy::PolicyError> errors;
    auto c = http::compile_http1_policy(*loaded.policy, *hasher, errors);
    if (!c || !errors.empty()) fail("%s does not compile", path.c_str());
    return std::make_unique<http::Http1Policy>(std::move(*c));
  }();
  return *compiled;
}

// A memfd, rewritten for each input and opened by the readers as
// /proc/self/fd/N (a regular file: read_capture maps it).
class ScratchFile {
 public:
  ScratchFile() : fd_(memfd_create("replay_input_fuzz", MFD_CLOEXEC)) {
    if (fd_ < 0) fail("memfd_create failed");
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;
  ~ScratchFile() { ::close(fd_); }

  const std::string& write(std::string_view bytes) {
    if (::ftruncate(fd_, 0) != 0) fail("ftruncate failed");
    for (size_t done = 0; done < bytes.size();) {
      const ssize_t n = ::pwrite(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
      if (n <= 0) fail("pwrite failed");
      done += static_cast<size_t>(n);
    }
    return path_;
  }

 private:
  int fd_;
  std::string path_;
};

ScratchFile& scratch_file() {
  static ScratchFile file;
  return file;
}

// The head parser the replay decides with (replay_run.cpp's parse_head).
http::FeedResult parse_alone(std::string_view head) {
  struct Parser {
    std::vector<http::FieldLine> store;
    std::vector<char> spill;
    std::unique_ptr<http::HeadParser> parser;
  };
  static Parser p = [] {
    const http::Http1Policy& pol = replay_policy();
    Parser q;
    q.store.resize(pol.stream.head.max_fields);
    q.spill.resize(pol.stream.head.max_head_bytes);
    q.parser = std::make_unique<http::HeadParser>(pol.fields, pol.stream.head, q.store, q.spill);
    return q;
  }();
  p.parser->reset();
  return p.parser->feed(head);
}

// ---------------------------------------------------------------------------
// Checks shared by the paths.

// Whether [part, part + n) lies in [whole, whole + m); nothing always does.
bool inside_bytes(const void* part, size_t n, const void* whole, size_t m) {
  if (n == 0) return true;
  const auto p = reinterpret_cast<uintptr_t>(part), w = reinterpret_cast<uintptr_t>(whole);
  return p >= w && n <= m && p - w <= m - n;
}

bool inside(std::span<const uint8_t> part, std::span<const uint8_t> whole) {
  return inside_bytes(part.data(), part.size(), whole.data(), whole.size());
}

bool inside(std::string_view part, std::string_view whole) {
  return inside_bytes(part.data(), part.size(), whole.data(), whole.size());
}

// A message is printed to a terminal: printable ASCII only (excerpt()
// writes the rest of a hostile line as \xHH).
void check_text(std::string_view what, std::string_view s) {
  if (!g_check_messages) return;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f)
      fail("%.*s holds byte 0x%02x: %.200s", static_cast<int>(what.size()), what.data(), u, std::string(s).c_str());
  }
}

void describe(const char* what, const rp::InputResult& r) {
  if (!g_verbose) return;
  std::fprintf(stderr, "%s: %llu read, %zu records, %llu problems%s\n", what, static_cast<unsigned long long>(r.units_read),
               r.records.size(), static_cast<unsigned long long>(r.problem_count), r.fatal ? " (fatal)" : "");
  for (const rp::RequestRecord& rec : r.records)
    std::fprintf(stderr, "  record %llu: %s, %zu-byte head%s\n", static_cast<unsigned long long>(rec.record_number),
                 std::string(http::to_string(rec.parse_error)).c_str(), rec.head.size(), rec.has_usage ? ", usage" : "");
  for (const rp::InputProblem& p : r.problems) std::fprintf(stderr, "  %s\n", p.to_string().c_str());
}

void check_problems(const rp::InputResult& r) {
  if (r.problems.size() > rp::InputResult::kMaxProblems) fail("%zu problems kept", r.problems.size());
  if (r.problems.size() != std::min<uint64_t>(r.problem_count, rp::InputResult::kMaxProblems))
    fail("%zu problems kept of %llu", r.problems.size(), static_cast<unsigned long long>(r.problem_count));
  for (const rp::InputProblem& p : r.problems) {
    if (p.where.empty() || p.message.empty()) fail("a problem without where or why: %s", p.to_string().c_str());
    check_text("a problem's message", p.message);
  }
}

// A record's head against the parser the replay decides with: whole when
// the stream cut it from a capture, whole or refused when a log wrote it.
void check_head(const rp::RequestRecord& r, bool cut_by_stream) {
  if (r.parse_error != http::ParseError::kNone) {
    if (!r.head.empty()) fail("record %llu: a head with parse_error %s", static_cast<unsigned long long>(r.record_number),
                              std::string(http::to_string(r.parse_error)).c_str());
    return;
  }
  if (r.head.empty()) fail("record %llu: no head and no parse_error", static_cast<unsigned long long>(r.record_number));
  const http::FeedResult f = parse_alone(r.head);
  const bool whole = f.status == http::HeadStatus::kComplete && f.consumed == r.head.size();
  if (whole || (!cut_by_stream && f.status == http::HeadStatus::kError)) return;
  fail("record %llu: the parser reads its %zu-byte head as %s (%s, %zu consumed): %.300s",
       static_cast<unsigned long long>(r.record_number), r.head.size(),
       f.status == http::HeadStatus::kIncomplete ? "incomplete" : f.status == http::HeadStatus::kError ? "an error" : "complete",
       std::string(http::to_string(f.error)).c_str(), f.consumed, r.head.c_str());
}

// ---------------------------------------------------------------------------
// Captures (paths 0 and 1).

rp::CaptureOptions capture_options(uint8_t flags) {
  const http::Http1Policy& p = replay_policy();
  rp::CaptureOptions o;
  for (const uint16_t port : p.source.service_ports) o.service_ports.set(port);
  o.fields = &p.fields;
  o.stream = p.stream;
  o.stream.allow_connect = o.stream.allow_connect || (flags & 2) != 0;
  o.stream.allow_h2_prior_knowledge = o.stream.allow_h2_prior_knowledge || (flags & 4) != 0;
  o.usage_field = (flags & 1) != 0 ? kUsageField : p.usage_field;
  return o;
}

void check_index(const rp::CaptureIndex& index, std::span<const uint8_t> image) {
  uint64_t last = 0;
  for (const rp::CapturedPacket& p : index.packets) {
    if (!inside(p.data, image)) fail("packet %llu's bytes lie outside the image", static_cast<unsigned long long>(p.number));
    if (p.number <= last || p.number > index.packet_count)
      fail("packet number %llu after %llu, of %llu", static_cast<unsigned long long>(p.number),
           static_cast<unsigned long long>(last), static_cast<unsigned long long>(index.packet_count));
    last = p.number;
  }
  uint64_t before = 0;
  for (const rp::CaptureProblem& p : index.problems) {
    if (p.packet < before || p.packet > index.packet_count + 1)
      fail("a problem at packet %llu after %llu, of %llu", static_cast<unsigned long long>(p.packet),
           static_cast<unsigned long long>(before), static_cast<unsigned long long>(index.packet_count));
    before = p.packet;
    check_text("a capture problem", p.problem.message);
  }
  if (index.fatal && !index.packets.empty()) fail("a fatal capture with %zu packets", index.packets.size());
}

void check_walks(const rp::CaptureIndex& index) {
  std::vector<uint8_t> scratch;
  for (const rp::CapturedPacket& p : index.packets) {
    const rp::PacketFrame f = rp::walk_packet(p, scratch);
    if (!f.link_supported && f.view.kind != dataplane::FrameKind::kNonIp) fail("an unread link type walked");
    if (f.view.kind != dataplane::FrameKind::kTcp) {
      if (!f.payload.empty()) fail("packet %llu: a payload without TCP", static_cast<unsigned long long>(p.number));
      continue;
    }
    if (f.payload.size() != f.view.payload_len || !inside(f.payload, p.data))
      fail("packet %llu: a %zu-byte payload (%u by the view) outside its %zu bytes", static_cast<unsigned long long>(p.number),
           f.payload.size(), f.view.payload_len, p.data.size());
  }
}

void check_capture_records(const rp::InputResult& r, const rp::CaptureIndex& index) {
  uint64_t last_number = 0;
  for (const rp::RequestRecord& rec : r.records) {
    const auto packet = std::lower_bound(index.packets.begin(), index.packets.end(), rec.record_number,
                                         [](const rp::CapturedPacket& p, uint64_t n) { return p.number < n; });
    if (packet == index.packets.end() || packet->number != rec.record_number)
      fail("a record at packet %llu, which was not read", static_cast<unsigned long long>(rec.record_number));
    if (rec.at != packet->at) fail("a record's time is not its packet's");
    if (rec.input != kInput || rec.order != rp::record_order(kInput, rec.record_number)) fail("a record's order is wrong");
    // The connection: the input, and its number among the connections met
    // (from 1; at most one per packet).
    const uint64_t nth = rec.connection & ((uint64_t{1} << 40) - 1);
    if ((rec.connection >> 40) != kInput || nth == 0 || nth > index.packets.size())
      fail("connection %llx", static_cast<unsigned long long>(rec.connection));
    // One file is read in its packet order: records come as their packets do.
    if (rec.record_number < last_number) fail("records out of packet order");
    last_number = rec.record_number;
    check_head(rec, true);
  }
}

void fuzz_capture(std::string_view image_text, uint8_t flags) {
  const std::span<const uint8_t> image(reinterpret_cast<const uint8_t*>(image_text.data()), image_text.size());
  const rp::CaptureIndex index = rp::index_capture(image, "fuzz.pcap");
  check_index(index, image);
  check_walks(index);

  const rp::CaptureOptions options = capture_options(flags);
  const rp::InputResult r = rp::read_capture(scratch_file().write(image_text), kInput, options);
  describe("read_capture", r);
  check_problems(r);
  // A file that begins as gzip, xz or zstd data is read decompressed: not
  // the image the index read.
  if (rp::compression_of(image.first(std::min<size_t>(image.size(), 6))) != rp::Compression::kNone) return;
  if (r.fatal != index.fatal.has_value()) fail("read_capture fatal %d, the index's %d", r.fatal, index.fatal.has_value());
  if (r.units_read != index.packet_count) fail("%llu packets read, %llu indexed", static_cast<unsigned long long>(r.units_read),
                                               static_cast<unsigned long long>(index.packet_count));
  if (r.fatal && !r.records.empty()) fail("records from a fatal capture");
  if (r.problem_count < (index.fatal ? 1 : index.problems.size())) fail("fewer problems than the index found");
  check_capture_records(r, index);
}

// Path 1: the capture written from the input.
const char* const kClientPieces[] = {
    "GET /v1/models HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer sk-a\r\n\r\n",
    "POST /v1/chat HTTP/1.1\r\nHost: api\r\nContent-Length: 5\r\n\r\nhello",
    "POST /v1/chat HTTP/1.1\r\nHost: api\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n0\r\nT: v\r\n\r\n",
    "GET /ws HTTP/1.1\r\nHost: api\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
    "CONNECT api:443 HTTP/1.1\r\nHost: api:443\r\n\r\n",
    "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    "HEAD /h HTTP/1.1\r\nHost: api\r\nX-Forwarded-For: 198.18.0.9\r\n\r\n",
    "GET /e HTTP/1.1\r\nHost: api\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc",
};
const char* const kOriginPieces[] = {
    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Pi-Usage-Tokens: 42\r\n\r\nok",
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-Pi-Usage-Tokens: 7\r\n\r\n",
    "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
    "HTTP/1.1 100 Continue\r\n\r\n",
    "HTTP/1.1 204 No Content\r\n\r\n",
    "HTTP/1.1 200 Connection established\r\n\r\n",
    "HTTP/1.0 200 OK\r\n\r\nuntil close",
    "HTTP/1.1 429 Too Many Requests\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
};

std::string segment_payload(FuzzedDataProvider& in, bool from_client) {
  std::string s;
  const int pieces = in.ConsumeIntegralInRange<int>(0, 3);
  for (int i = 0; i < pieces; ++i) {
    const int pick = in.ConsumeIntegralInRange<int>(0, 8);
    if (pick == 8) {
      s += in.ConsumeRandomLengthString(64);
    } else {
      s += from_client ? kClientPieces[pick] : kOriginPieces[pick];
    }
  }
  // A cut of it: segments split heads and bodies anywhere.
  const size_t from = in.ConsumeIntegralInRange<size_t>(0, s.size());
  const size_t length = in.ConsumeIntegralInRange<size_t>(0, s.size() - from);
  return in.ConsumeBool() ? s : s.substr(from, length);
}

std::string built_capture(FuzzedDataProvider& in) {
  using test::Link;
  constexpr uint8_t kFlags[] = {test::tcp::kAck | test::tcp::kPsh, test::tcp::kAck | test::tcp::kPsh, test::tcp::kAck,
                                test::tcp::kSyn, test::tcp::kSyn | test::tcp::kAck, test::tcp::kFin | test::tcp::kAck,
                                test::tcp::kRst, test::tcp::kFin | test::tcp::kAck | test::tcp::kPsh};
  const auto link = static_cast<Link>(in.ConsumeIntegralInRange<int>(0, 4));
  const bool v6 = in.ConsumeBool();
  const net::IpAddress client = *net::parse_ip(v6 ? "2001:db8::10" : "198.18.0.10");
  const net::IpAddress origin = *net::parse_ip(v6 ? "2001:db8::1" : "198.19.0.1");
  struct Connection {
    uint16_t port;
    uint32_t client_next, origin_next;
  };
  std::array<Connection, 3> conns{};
  for (size_t i = 0; i < conns.size(); ++i)
    conns[i] = {static_cast<uint16_t>(40000 + i), in.ConsumeIntegral<uint32_t>(), in.ConsumeIntegral<uint32_t>()};
  std::vector<test::CapPacket> packets;
  uint64_t clock = 1'768'464'000ull * 1'000'000'000ull;
  while (packets.size() < 64 && in.remaining_bytes() > 0) {
    const auto op = in.ConsumeIntegral<uint8_t>();
    Connection& c = conns[op % 3];
    const bool from_client = (op & 0x04) == 0;
    const uint8_t flags = kFlags[(op >> 3) % 8];
    const std::string payload = segment_payload(in, from_client);
    uint32_t& next = from_client ? c.client_next : c.origin_next;
    uint32_t seq = next;
    bool advance = true;
    switch (in.ConsumeIntegralInRange<int>(0, 7)) {
      case 5:  // a repeat of bytes sent
        seq -= in.ConsumeIntegralInRange<uint32_t>(1, 200);
        advance = false;
        break;
      case 6:  // past a gap
        seq += in.ConsumeIntegralInRange<uint32_t>(1, 200);
        break;
      case 7:  // anywhere
        seq = in.ConsumeIntegral<uint32_t>();
        advance = false;
        break;
      default: break;
    }
    const uint32_t ack = from_client ? c.origin_next : c.client_next;
    const uint16_t client_port = (op & 0x80) != 0 ? 8080 : c.port;  // now and then not a service-port flow
    test::TcpSegment s = from_client ? test::TcpSegment{client, origin, client_port, 80, seq, ack, flags, payload}
                                     : test::TcpSegment{origin, client, 80, client_port, seq, ack, flags, payload};
    if (advance) next = seq + static_cast<uint32_t>(payload.size()) + ((flags & (test::tcp::kSyn | test::tcp::kFin)) ? 1 : 0);
    packets.push_back({clock, test::frame_of(s, link), 0, (op & 0x40) != 0 && in.ConsumeBool()});
    clock += in.ConsumeIntegralInRange<uint64_t>(0, 3'000'000'000ull);
  }
  const int container = in.ConsumeIntegralInRange<int>(0, 5);
  const uint32_t link_type = test::link_type_of(link);
  if (container < 4) {
    return test::pcap_file(packets, link_type, (container & 1) != 0, (container & 2) != 0);
  }
  const uint8_t tsresol = in.ConsumeBool() ? 6 : in.ConsumeIntegral<uint8_t>();
  return test::pcapng_file(packets, {{link_type, tsresol}}, container == 5);
}

// ---------------------------------------------------------------------------
// Log lines (path 2).

uint64_t g_sink = 0;  // every byte of a value read, so a dangling view shows under ASan

void touch(std::string_view s) {
  for (const char c : s) g_sink += static_cast<unsigned char>(c);
}

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> lines;
  for (size_t pos = 0; pos < text.size();) {
    const size_t nl = text.find('\n', pos);
    const size_t end = nl == std::string_view::npos ? text.size() : nl;
    lines.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  return lines;
}

std::string_view without_cr(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

constexpr time::Nanos kLatest = 10'000'000'000ull * 1'000'000'000ull + 999'999'999ull;

// "DD/Mon/YYYY:HH:MM:SS +hhmm" written as ISO 8601: both parsers must give
// the same instant; "Z" and "+00:00" the same.
void check_times(std::string_view text) {
  check_text("an excerpt", rp::excerpt(text));
  if (const auto s = rp::parse_seconds(text); s && *s > kLatest) fail("parse_seconds past its bound");
  const auto iso = rp::parse_time_iso8601(text);
  if (iso && *iso > kLatest) fail("parse_time_iso8601 past its bound");
  if (iso && text.ends_with("Z")) {
    const std::string other = std::string(text.substr(0, text.size() - 1)) + "+00:00";
    if (rp::parse_time_iso8601(other) != iso) fail("\"Z\" and \"+00:00\" differ: %s", std::string(text).c_str());
  }
  const auto local = rp::parse_time_local(text);
  if (!local) return;
  if (*local > kLatest) fail("parse_time_local past its bound");
  static constexpr std::array<std::string_view, 12> kMonths{"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  const auto month = std::find(kMonths.begin(), kMonths.end(), text.substr(3, 3)) - kMonths.begin() + 1;
  char iso_text[40];
  std::snprintf(iso_text, sizeof iso_text, "%.4s-%02d-%.2sT%.8s%.3s:%.2s", text.data() + 7, static_cast<int>(month),
                text.data(), text.data() + 12, text.data() + 21, text.data() + 24);
  if (rp::parse_time_iso8601(iso_text) != local)
    fail("time_local %s and time_iso8601 %s differ", std::string(text).c_str(), iso_text);
}

void check_value(const rp::LogValue& v, std::string_view line) {
  if (v.role == rp::LogRole::kOther || v.role >= rp::LogRole::kCount) fail("a value of role %d", static_cast<int>(v.role));
  if (v.column < 1 || v.column > line.size() + 1) fail("a value at column %u of a %zu-byte line", v.column, line.size());
  if (v.role == rp::LogRole::kRequestField && v.field.empty()) fail("a request field without a name");
  touch(v.text);
  check_times(v.text);
}

void check_failure(bool matched, const rp::MatchFailure& failure, std::string_view line) {
  if (matched) return;
  if (failure.column < 1 || failure.column > line.size() + 1 || failure.message.empty())
    fail("a failure at column %u of a %zu-byte line: %s", failure.column, line.size(), failure.message.c_str());
  check_text("a line's failure", failure.message);
}

void check_format(const rp::FormatParse& f, std::string_view text) {
  if (rp::check_nginx_format(std::string(text)).error != f.error) fail("check_nginx_format disagrees");
  if (!f.error.empty()) {
    if (!f.error.starts_with("1:") || f.error.find(": ", 2) == std::string::npos) fail("format error %s", f.error.c_str());
    const unsigned long column = std::strtoul(f.error.c_str() + 2, nullptr, 10);
    if (column < 1 || column > text.size() + 1) fail("format error at column %lu of %zu bytes", column, text.size());
    return;
  }
  size_t named = 0;
  for (size_t i = 0; i < f.format.parts.size(); ++i) {
    const auto& p = f.format.parts[i];
    if (p.text.empty()) fail("an empty part");
    if (p.variable && i > 0 && f.format.parts[i - 1].variable) fail("two variables in a row");
    if (p.variable && (named >= f.variables.size() || f.variables[named++] != p.text)) fail("variables out of order");
  }
  if (named != f.variables.size()) fail("%zu variables named, %zu in the parts", f.variables.size(), named);
}

void match_lines(const rp::NginxFormat& format, const std::vector<std::string_view>& lines) {
  std::vector<rp::LogValue> values;
  std::string unescaped;
  for (const std::string_view raw : lines) {
    const std::string_view line = without_cr(raw);
    rp::MatchFailure failure;
    const bool matched = rp::match_line(format, line, values, failure);
    if (g_verbose) std::fprintf(stderr, "match_line: %s\n", matched ? "matched" : failure.message.c_str());
    check_failure(matched, failure, line);
    if (!matched) continue;
    unescaped.clear();
    unescaped.reserve(line.size());
    const char* const buffer = unescaped.data();
    for (rp::LogValue& v : values) {
      if (!inside(v.text, line) || v.column != static_cast<size_t>(v.text.data() - line.data()) + 1)
        fail("a value outside its line, or not at its column");
      const std::string_view done = rp::unescape_nginx(v.text, unescaped);
      if (done.size() > v.text.size() || !inside(done, unescaped) || unescaped.data() != buffer)
        fail("unescaping grew a value, or moved the text before it");
      if (v.text.find('\\') == std::string_view::npos && done != v.text) fail("unescaping changed text without escapes");
      check_value(v, line);
      v.text = done;
      check_value(v, line);
    }
  }
}

void fuzz_nginx_lines(std::string_view text, bool format_first) {
  std::vector<std::string_view> lines = lines_of(text);
  if (format_first) {
    if (lines.empty()) return;
    const std::string_view format_text = without_cr(lines.front());
    const rp::FormatParse f = rp::parse_nginx_format(format_text, kUsageVariable);
    check_format(f, format_text);
    if (!f.error.empty()) return;
    lines.erase(lines.begin());
    match_lines(f.format, lines);
    return;
  }
  static const rp::FormatParse combined = rp::parse_nginx_format(rp::LogOptions{}.nginx_format, kUsageVariable);
  static const rp::FormatParse custom = rp::parse_nginx_format(kCustomFormat, kUsageVariable);
  if (!combined.error.empty() || !custom.error.empty()) fail("a built-in format is refused");
  match_lines(combined.format, lines);
  match_lines(custom.format, lines);
}

void fuzz_json_lines(std::string_view text) {
  std::vector<rp::LogValue> values;
  for (const std::string_view raw : lines_of(text)) {
    const std::string_view line = without_cr(raw);
    control::Json doc;
    rp::MatchFailure failure;
    const bool read = rp::read_json_line(line, kJsonFields, kUsageVariable, doc, values, failure);
    if (g_verbose) std::fprintf(stderr, "read_json_line: %s, %zu values\n", read ? "read" : failure.message.c_str(), values.size());
    check_failure(read, failure, line);
    if (!read) continue;
    for (const rp::LogValue& v : values) check_value(v, line);
  }
}

// ---------------------------------------------------------------------------
// read_access_log (path 3).

void check_log_records(const rp::InputResult& r, const std::vector<std::string_view>& lines) {
  uint64_t last = 0;
  for (const rp::RequestRecord& rec : r.records) {
    if (rec.record_number <= last || rec.record_number > lines.size())
      fail("record at line %llu after %llu, of %zu", static_cast<unsigned long long>(rec.record_number),
           static_cast<unsigned long long>(last), lines.size());
    last = rec.record_number;
    if (rec.input != kInput || rec.order != rp::record_order(kInput, rec.record_number) || rec.connection != 0)
      fail("a log record's order or connection is wrong");
    if (rec.conn.destination_port == 0) fail("a log record to port 0");
    if (rec.has_usage && rec.usage_at < rec.at) fail("usage charged before its request");
    if (rec.parse_error != http::ParseError::kNone && rec.parse_error != http::ParseError::kBadFieldValue &&
        rec.parse_error != http::ParseError::kBareCR && rec.parse_error != http::ParseError::kBareLF)
      fail("a log record with parse_error %s", std::string(http::to_string(rec.parse_error)).c_str());
    check_head(rec, false);
  }
}

void check_log_problem_places(const rp::InputResult& r, const std::string& path, const std::vector<std::string_view>& lines) {
  for (const rp::InputProblem& p : r.problems) {
    if (!p.where.starts_with(path + ":")) fail("a problem at %s", p.where.c_str());
    const char* at = p.where.c_str() + path.size() + 1;
    char* end = nullptr;
    const unsigned long line = std::strtoul(at, &end, 10);
    if (line < 1 || line > lines.size() || *end != ':') fail("a problem at %s, of %zu lines", p.where.c_str(), lines.size());
    const unsigned long column = std::strtoul(end + 1, nullptr, 10);
    if (column < 1 || column > lines[line - 1].size() + 1) fail("a problem at %s: past its line", p.where.c_str());
  }
}

void fuzz_access_log(std::string_view text, uint8_t how) {
  rp::LogOptions o;
  o.usage_field = kUsageField;
  o.json_fields = kJsonFields;
  bool format_refused = false;
  if (how == 1) o.nginx_format = kCustomFormat;
  if (how == 2) o.format = rp::LogFormat::kJson;
  if (how == 3) {
    const size_t nl = text.find('\n');
    o.nginx_format = std::string(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    format_refused = !rp::parse_nginx_format(o.nginx_format, kUsageVariable).error.empty();
  }
  const std::string& path = scratch_file().write(text);
  const rp::InputResult r = rp::read_access_log(path, kInput, o);
  describe("read_access_log", r);
  if (rp::compression_of({reinterpret_cast<const uint8_t*>(text.data()), text.size()}) != rp::Compression::kNone) {
    // Compressed, as its first bytes say: read decompressed, or fatal for
    // damaged data with that reason first; its lines are not the text's.
    if (r.fatal && !format_refused && (r.problems.empty() || r.problems.front().where != path)) {
      fail("a compressed input refused without its reason first");
    }
    return;
  }
  check_problems(r);
  if (r.fatal != format_refused) fail("read_access_log fatal %d, the format refused %d", r.fatal, format_refused);
  if (r.fatal) {
    if (!r.records.empty() || r.problem_count != 1) fail("a refused format gave records or several problems");
    return;
  }
  const std::vector<std::string_view> lines = lines_of(text);
  if (r.units_read != lines.size()) fail("%llu lines read of %zu", static_cast<unsigned long long>(r.units_read), lines.size());
  const size_t blank = static_cast<size_t>(std::count_if(lines.begin(), lines.end(), [](std::string_view l) {
    return without_cr(l).find_first_not_of(" \t") == std::string_view::npos;
  }));
  if (r.records.size() + r.problem_count != lines.size() - blank)
    fail("%zu records and %llu problems from %zu lines, %zu blank", r.records.size(),
         static_cast<unsigned long long>(r.problem_count), lines.size(), blank);
  check_log_records(r, lines);
  check_log_problem_places(r, path, lines);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // One thread: the same input always takes the same path (stable coverage).
  static tbb::global_control one_thread(tbb::global_control::max_allowed_parallelism, 1);
  g_verbose = env_flag("SLUICE_FUZZ_VERBOSE", false);
  g_check_messages = env_flag("SLUICE_FUZZ_MESSAGES", true);
  (void)replay_policy();
  (void)scratch_file();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 65536) return 0;
  const uint8_t path = data[0] & 3;
  const auto flags = static_cast<uint8_t>(data[0] >> 2);
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (path) {
    case 0: fuzz_capture(rest, flags); break;
    case 1: {
      FuzzedDataProvider in(data + 1, size - 1);
      fuzz_capture(built_capture(in), flags);
      break;
    }
    case 2:
      if ((flags & 1) != 0) {
        fuzz_json_lines(rest);
      } else {
        fuzz_nginx_lines(rest, (flags & 2) != 0);
      }
      break;
    default: fuzz_access_log(rest, flags & 3); break;
  }
  return 0;
}

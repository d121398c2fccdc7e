// sluice-replay's access-log input (replay/access_log.h, log_format.h):
// nginx lines in the default and custom formats and JSON lines turned into
// records whose heads the limiter's own parser reads, bad lines reported at
// FILE:LINE:COLUMN, and the parallel read equal to the one-thread read.
#include <gtest/gtest.h>
#include <tbb/global_control.h>
#include <lzma.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <cstdio>
#include <fstream>
#include <thread>

#include "limiter_harness.h"
#include "replay/access_log.h"
#include "replay/input_stream.h"
#include "replay/log_format.h"

namespace sluice::replay {
namespace {

constexpr time::Nanos kSecond = time::kNanosPerSecond;
constexpr time::Nanos kMilli = kSecond / 1000;
constexpr time::Nanos kDec2 = 1'796'219'736 * kSecond;  // 2026-12-02T13:55:36Z
constexpr const char* kCustom =
    R"($remote_addr [$msec] $request_time "$request" "$http_authorization" "$http_x_forwarded_for" )"
    R"($upstream_http_x_pi_usage_tokens $status)";

// A log file for one test, removed after it.
class TempLog {
 public:
  explicit TempLog(const std::string& text)
      : path_(testing::TempDir() + "sluice-access-log-" + std::to_string(getpid()) + "-" +
              testing::UnitTest::GetInstance()->current_test_info()->name() + ".log") {
    std::ofstream(path_, std::ios::binary) << text;
  }
  ~TempLog() { std::remove(path_.c_str()); }
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string path_;
};

InputResult read_log(const std::string& text, const LogOptions& options = {}, uint32_t input = 0) {
  const TempLog file(text);
  InputResult r = read_access_log(file.path(), input, options);
  for (InputProblem& p : r.problems) p.where.replace(0, file.path().size(), "LOG");
  return r;
}

LogOptions custom_options() {
  LogOptions o;
  o.nginx_format = kCustom;
  o.usage_field = "x-pi-usage-tokens";
  return o;
}

std::string combined(const std::string& client, const std::string& request, const std::string& agent) {
  return client + " - - [02/Dec/2026:13:55:36 +0000] \"" + request + "\" 200 612 \"-\" \"" + agent + "\"\n";
}

// The head as the limiter's parser reads it, with the shipped profile's fields.
class ParsedHead {
 public:
  explicit ParsedHead(const std::string& head) : text_(head) {
    static test::Limiter limiter("three-budgets.yaml");
    const http::Http1Policy& policy = limiter.policy();
    store_.resize(policy.stream.head.max_fields);
    spill_.resize(policy.stream.head.max_head_bytes);
    parser_ = std::make_unique<http::HeadParser>(policy.fields, policy.stream.head, store_, spill_);
    result_ = parser_->feed(text_);
  }
  [[nodiscard]] bool complete() const { return result_.status == http::HeadStatus::kComplete; }
  [[nodiscard]] http::ParseError error() const { return result_.error; }
  [[nodiscard]] const http::RequestHead& head() const { return parser_->head(); }

 private:
  std::string text_;
  std::vector<http::FieldLine> store_;
  std::vector<char> spill_;
  std::unique_ptr<http::HeadParser> parser_;
  http::FeedResult result_{};
};

TEST(AccessLog, DefaultCombinedFormat) {
  const InputResult r = read_log(combined("198.18.0.7", "GET /v1/things?x=1 HTTP/1.1", "curl/8.0"), {}, 3);
  ASSERT_FALSE(r.fatal);
  EXPECT_EQ(r.problem_count, 0u);
  EXPECT_EQ(r.units_read, 1u);
  ASSERT_EQ(r.records.size(), 1u);
  const RequestRecord& rec = r.records[0];
  EXPECT_EQ(rec.at, kDec2);
  EXPECT_EQ(rec.conn.peer, *net::parse_ip("198.18.0.7"));
  EXPECT_EQ(rec.conn.destination, net::IpAddress{});
  EXPECT_EQ(rec.conn.destination_port, 80);
  EXPECT_EQ(rec.head, "GET /v1/things?x=1 HTTP/1.1\r\nHost: localhost\r\nUser-Agent: curl/8.0\r\n\r\n");
  EXPECT_EQ(rec.parse_error, http::ParseError::kNone);
  EXPECT_FALSE(rec.has_usage);
  EXPECT_EQ(rec.input, 3u);
  EXPECT_EQ(rec.record_number, 1u);
  EXPECT_EQ(rec.order, record_order(3, 1));
}

TEST(AccessLog, CustomFormatWithMsecRequestTimeHeadersAndUsage) {
  const InputResult r = read_log(
      "198.18.0.9 [1796219736.250] 0.050 \"POST /v1/chat HTTP/1.1\" \"Bearer key-one\" "
      "\"203.0.113.5, 198.18.0.1\" 1234 200\n"
      "198.18.0.9 [1796219737.000] 0.000 \"GET /v1/x HTTP/1.0\" \"-\" \"-\" - 429\n",
      custom_options());
  ASSERT_EQ(r.records.size(), 2u) << (r.problems.empty() ? "" : r.problems[0].to_string());
  const RequestRecord& chat = r.records[0];
  EXPECT_EQ(chat.at, kDec2 + 200 * kMilli);  // the line's time less $request_time
  EXPECT_TRUE(chat.has_usage);
  EXPECT_EQ(chat.usage_tokens, 1234u);
  EXPECT_EQ(chat.usage_at, kDec2 + 250 * kMilli);
  EXPECT_EQ(chat.head,
            "POST /v1/chat HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer key-one\r\n"
            "X-Forwarded-For: 203.0.113.5, 198.18.0.1\r\n\r\n");
  const RequestRecord& plain = r.records[1];
  EXPECT_FALSE(plain.has_usage);
  EXPECT_EQ(plain.at, kDec2 + kSecond);
  EXPECT_EQ(plain.head, "GET /v1/x HTTP/1.0\r\n\r\n");  // HTTP/1.0 needs no Host; '-' fields absent
}

TEST(AccessLog, UsageFromSentFieldsAndTheLastUpstreamsValue) {
  LogOptions o;
  o.nginx_format = R"($remote_addr $msec "$request" "$upstream_http_x_pi_usage_tokens" "$sent_http_x_pi_usage_tokens")";
  o.usage_field = "X-Pi-Usage-Tokens";
  const InputResult r = read_log(
      "198.18.0.1 1796219736.0 \"GET / HTTP/1.1\" \"-\" \"77\"\n"
      "198.18.0.1 1796219736.0 \"GET / HTTP/1.1\" \"5, 9 : 11\" \"-\"\n"
      "198.18.0.1 1796219736.0 \"GET / HTTP/1.1\" \"lots\" \"-\"\n",
      o);
  ASSERT_EQ(r.records.size(), 3u);
  EXPECT_EQ(r.records[0].usage_tokens, 77u);
  EXPECT_EQ(r.records[1].usage_tokens, 11u);
  EXPECT_FALSE(r.records[2].has_usage);  // as the appliance: not a number charges nothing
}

TEST(AccessLog, BracedVariablesAndServerAddress) {
  LogOptions o;
  o.nginx_format = "${remote_addr}|${server_addr}:${server_port}|${msec}|${request}|${http_host}|${http_x_pi_deployment}";
  const InputResult r =
      read_log("198.18.0.1|198.19.0.1:8080|1796219736.5|GET / HTTP/1.1|api.example:8080|deploy-a\n", o);
  ASSERT_EQ(r.records.size(), 1u) << r.problems.at(0).to_string();
  EXPECT_EQ(r.records[0].conn.destination, *net::parse_ip("198.19.0.1"));
  EXPECT_EQ(r.records[0].conn.destination_port, 8080);
  EXPECT_EQ(r.records[0].at, kDec2 + 500 * kMilli);
  EXPECT_EQ(r.records[0].head, "GET / HTTP/1.1\r\nHost: api.example:8080\r\nX-Pi-Deployment: deploy-a\r\n\r\n");
}

TEST(AccessLog, TimeLocalWithAnOffsetAndTimeIso8601) {
  EXPECT_EQ(parse_time_local("02/Dec/2026:14:55:36 +0100"), kDec2);
  EXPECT_EQ(parse_time_local("02/Dec/2026:08:25:36 -0530"), kDec2);
  EXPECT_EQ(parse_time_iso8601("2026-12-02T13:55:36+00:00"), kDec2);
  EXPECT_EQ(parse_time_iso8601("2026-12-02T08:55:36-05:00"), kDec2);
  EXPECT_EQ(parse_time_iso8601("2026-12-02T13:55:36.25Z"), kDec2 + 250 * kMilli);
  EXPECT_EQ(parse_seconds("1796219736.123"), kDec2 + 123 * kMilli);
  for (const char* bad : {"31/Nov/2026:13:55:36 +0000", "02/Dez/2026:13:55:36 +0000", "02/Dec/2026:24:00:00 +0000",
                          "02/Dec/2026:13:55:36 +2500", "02/Dec/2026:13:55:36", "02/Dec/2026:13:55:36 +00:00"})
    EXPECT_FALSE(parse_time_local(bad)) << bad;
  for (const char* bad : {"2026-12-02 13:55:36+00:00", "2026-02-30T13:55:36Z", "2026-12-02T13:55:36", "2026-12-02T13:55:36.Z"})
    EXPECT_FALSE(parse_time_iso8601(bad)) << bad;
  for (const char* bad : {"", ".5", "1.", "1e9", "-1", "99999999999"}) EXPECT_FALSE(parse_seconds(bad)) << bad;

  LogOptions o;
  o.nginx_format = "$remote_addr $time_iso8601 \"$request\"";
  const InputResult r = read_log("198.18.0.1 2026-12-02T15:55:36+02:00 \"GET / HTTP/1.1\"\n", o);
  ASSERT_EQ(r.records.size(), 1u);
  EXPECT_EQ(r.records[0].at, kDec2);
  const InputResult local = read_log(
      "198.18.0.7 - - [02/Dec/2026:14:55:36 +0100] \"GET / HTTP/1.1\" 200 612 \"-\" \"-\"\n");
  ASSERT_EQ(local.records.size(), 1u);
  EXPECT_EQ(local.records[0].at, kDec2);
}

TEST(AccessLog, EscapedQuotesInAUserAgent) {
  const InputResult r = read_log(combined("198.18.0.1", "GET / HTTP/1.1", R"(Mozilla \x22quoted\x22 \x5Cagent)") +
                                 combined("198.18.0.1", "GET / HTTP/1.1", R"(Mozilla \"quoted\" \\agent)"));
  ASSERT_EQ(r.records.size(), 2u) << r.problems.at(0).to_string();
  for (const RequestRecord& rec : r.records)
    EXPECT_EQ(rec.head, "GET / HTTP/1.1\r\nHost: localhost\r\nUser-Agent: Mozilla \"quoted\" \\agent\r\n\r\n");
}

TEST(AccessLog, ALineBreakInALoggedValueInjectsNoField) {
  const InputResult r = read_log(
      "198.18.0.9 [1796219736.0] 0.0 \"GET / HTTP/1.1\" \"Bearer a\\x0D\\x0AX-Pi-Deployment: evil\" \"-\" - 200\n"
      "198.18.0.9 [1796219736.0] 0.0 \"GET / HTTP/1.1\" \"Bearer a\\r\\nHost: evil\" \"-\" - 200\n"
      "198.18.0.9 [1796219736.0] 0.0 \"GET /\\x0D\\x0AX-Evil: 1 HTTP/1.1\" \"-\" \"-\" - 200\n"
      "198.18.0.9 [1796219736.0] 0.0 \"GET / HTTP/1.1\" \"Bearer \\x01\" \"-\" - 200\n",
      custom_options());
  ASSERT_EQ(r.records.size(), 4u);  // each counted, each refused as the appliance would refuse it
  EXPECT_EQ(r.records[0].parse_error, http::ParseError::kBadFieldValue);
  EXPECT_EQ(r.records[1].parse_error, http::ParseError::kBadFieldValue);
  EXPECT_EQ(r.records[2].parse_error, http::ParseError::kBareCR);
  EXPECT_EQ(r.records[3].parse_error, http::ParseError::kBadFieldValue);
  for (const RequestRecord& rec : r.records) EXPECT_TRUE(rec.head.empty());
}

TEST(AccessLog, Ipv6Client) {
  const InputResult r = read_log(combined("2001:db8::7", "GET / HTTP/1.1", "-"));
  ASSERT_EQ(r.records.size(), 1u);
  EXPECT_EQ(r.records[0].conn.peer, *net::parse_ip("2001:db8::7"));
  EXPECT_FALSE(r.records[0].conn.peer.is_v4());
}

TEST(AccessLog, JsonLinesWithMappedKeysAndNumericMsec) {
  LogOptions o;
  o.format = LogFormat::kJson;
  o.json_fields = {{"ts", "msec"}, {"client", "remote_addr"}, {"auth", "http_authorization"}};
  const InputResult r = read_log(
      R"({"ts": 1796219736.123, "client": "198.18.0.3", "request": "GET /a HTTP/1.1", "auth": "Bearer k",)"
      R"( "status": 200, "http_referer": null, "http_user_agent": "-", "host": "api", "request_time": 0.1})"
      "\n"
      R"({"msec": "1796219736", "remote_addr": "2001:db8::1", "request_method": "PUT", "request_uri": "/b",)"
      R"( "server_protocol": "HTTP/1.0", "http_x_pi_deployment": "d\r\n"})"
      "\n"
      R"({"ts": 1796219736, "client": true, "request": "GET / HTTP/1.1"})"
      "\n"
      R"({"ts": 1796219736, "client": "198.18.0.3", "request": "GET / HTTP/1.1")"
      "\n",
      o);
  ASSERT_EQ(r.records.size(), 2u);
  EXPECT_EQ(r.records[0].at, kDec2 + 23 * kMilli);
  EXPECT_EQ(r.records[0].conn.peer, *net::parse_ip("198.18.0.3"));
  EXPECT_EQ(r.records[0].head, "GET /a HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer k\r\n\r\n");
  EXPECT_EQ(r.records[1].at, kDec2);
  EXPECT_EQ(r.records[1].parse_error, http::ParseError::kBadFieldValue);
  ASSERT_EQ(r.problems.size(), 2u);
  EXPECT_EQ(r.problems[0].where, "LOG:3:20");
  EXPECT_EQ(r.problems[0].message, "\"client\" is not a string or a number");
  EXPECT_EQ(r.problems[1].where.substr(0, 6), "LOG:4:");
  EXPECT_NE(r.problems[1].message.find("not a JSON line"), std::string::npos);
}

TEST(AccessLog, MalformedLinesAreReportedAtLineAndColumnAndTheRestKept) {
  const std::string good = combined("198.18.0.1", "GET / HTTP/1.1", "-");
  const InputResult r = read_log(good +                                                                // 1
                                 "198.18.0.1 - - 02/Dec/2026:13:55:36 +0000] \"GET / HTTP/1.1\" 200 1 \"-\" \"-\"\n"  // 2
                                 + good +                                                              // 3
                                 combined("198.18.0.300", "GET / HTTP/1.1", "-") +                     // 4
                                 "\n  \r\n" +                                                          // 5, 6
                                 good +                                                                // 7
                                 "198.18.0.1 - - [02/Dec/2026:13:61:36 +0000] \"GET / HTTP/1.1\" 200 1 \"-\" \"-\"\n"  // 8
                                 "198.18.0.1 - - [02/Dec/2026:13:55:36 +0000] \"-\" 400 0 \"-\" \"-\"\n"  // 9
                                 + good + good.substr(0, good.size() - 1));  // 10, 11 (no line end)
  EXPECT_EQ(r.units_read, 11u);
  std::vector<uint64_t> numbers;
  for (const RequestRecord& rec : r.records) numbers.push_back(rec.record_number);
  EXPECT_EQ(numbers, (std::vector<uint64_t>{1, 3, 7, 10, 11}));
  ASSERT_EQ(r.problems.size(), 4u);
  EXPECT_EQ(r.problem_count, 4u);
  EXPECT_EQ(r.problems[0].to_string(), "LOG:2:14: does not match the log format: no \" [\" after $remote_user");
  EXPECT_EQ(r.problems[1].to_string(), "LOG:4:1: the client address is not an IP address: \"198.18.0.300\"");
  EXPECT_EQ(r.problems[2].to_string(), "LOG:8:17: not a time: \"02/Dec/2026:13:61:36 +0000\"");
  EXPECT_EQ(r.problems[3].to_string(), "LOG:9:46: no request line (the client sent none)");
  const InputResult extra = read_log(good.substr(0, good.size() - 1) + " extra\n");
  ASSERT_EQ(extra.problems.size(), 1u);
  EXPECT_EQ(extra.problems[0].to_string(), "LOG:1:77: does not match the log format: text past the end of the format");
  // Quoted text in messages is escaped: a log line may carry terminal controls.
  EXPECT_EQ(excerpt("a\"\\\x1b\xff"), R"("a\"\\\x1B\xFF")");
  EXPECT_EQ(excerpt(std::string(50, 'x')), "\"" + std::string(40, 'x') + "\"...");
  LogOptions leading;
  leading.nginx_format = R"([$msec] $remote_addr "$request")";
  const InputResult bracket = read_log("[1796219736.0] 198.18.0.1 \"GET / HTTP/1.1\"\n(1796219736.0] 198.18.0.1 \"GET /\"\n", leading);
  EXPECT_EQ(bracket.records.size(), 1u);
  ASSERT_EQ(bracket.problems.size(), 1u);
  EXPECT_EQ(bracket.problems[0].to_string(), "LOG:2:1: does not match the log format: expected \"[\" here");
}

TEST(AccessLog, ALineLongerThanAPieceAndAPipe) {
  const std::string agent(600 * 1024, 'a');
  const std::string text = combined("198.18.0.1", "GET / HTTP/1.1", agent) + combined("198.18.0.2", "GET / HTTP/1.1", "-");
  const InputResult file = read_log(text);
  ASSERT_EQ(file.records.size(), 2u);
  EXPECT_NE(file.records[0].head.find(agent), std::string::npos);
  EXPECT_EQ(file.records[1].record_number, 2u);

  const std::string fifo = testing::TempDir() + "sluice-access-log-fifo-" + std::to_string(getpid());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::thread writer([&] { std::ofstream(fifo, std::ios::binary) << text; });
  const InputResult piped = read_access_log(fifo, 0, {});
  writer.join();
  std::remove(fifo.c_str());
  ASSERT_EQ(piped.records.size(), 2u);
  EXPECT_EQ(piped.records[0].head, file.records[0].head);
}

// A line past kMaxLineBytes (1 MiB) is a problem at its FILE:LINE and
// skipped, read past without being kept whole: the lines around it, and
// the line numbers after it, are as ever. An endless last line too.
TEST(AccessLog, ALineLongerThanTheLimitIsSkippedAtItsLine) {
  const std::string huge(3 * replay::kMaxLineBytes + 12345, 'x');
  const std::string text = combined("198.18.0.1", "GET /a HTTP/1.1", "-") + combined("198.18.0.2", "GET /b HTTP/1.1", huge) +
                           combined("198.18.0.3", "GET /c HTTP/1.1", "-") + huge;
  const InputResult r = read_log(text);
  ASSERT_EQ(r.records.size(), 2u);
  EXPECT_EQ(r.records[0].record_number, 1u);
  EXPECT_EQ(r.records[1].record_number, 3u);
  EXPECT_NE(r.records[1].head.find("GET /c"), std::string::npos);
  ASSERT_EQ(r.problems.size(), 2u);
  EXPECT_EQ(r.problems[0].to_string(), "LOG:2:1: a line longer than 1 MiB: skipped");
  EXPECT_EQ(r.problems[1].to_string(), "LOG:4:1: a line longer than 1 MiB: skipped");
  EXPECT_EQ(r.units_read, 4u);
  // Just under the limit is read as any line.
  const std::string long_agent(replay::kMaxLineBytes - 200, 'y');
  EXPECT_EQ(read_log(combined("198.18.0.4", "GET /d HTTP/1.1", long_agent)).records.size(), 1u);
}

// The compressors logrotate and operators use, as their tools write.
std::string gzipped(const std::string& text) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, text.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}
std::string xzed(const std::string& text) {
  std::string out(lzma_stream_buffer_bound(text.size()), '\0');
  size_t pos = 0;
  EXPECT_EQ(lzma_easy_buffer_encode(6, LZMA_CHECK_CRC64, nullptr, reinterpret_cast<const uint8_t*>(text.data()),
                                    text.size(), reinterpret_cast<uint8_t*>(out.data()), &pos, out.size()),
            LZMA_OK);
  out.resize(pos);
  return out;
}
std::string zstded(const std::string& text) {
  std::string out(ZSTD_compressBound(text.size()), '\0');
  const size_t n = ZSTD_compress(out.data(), out.size(), text.data(), text.size(), 3);
  EXPECT_FALSE(ZSTD_isError(n));
  out.resize(n);
  return out;
}

// Compressed logs (logrotate's .gz, and xz and zstd) are read as the plain
// ones, found by their first bytes and streamed: the same records, the
// same line numbers; two gzip members one after the other (cat a.gz b.gz)
// too. A damaged or cut-short one is fatal, saying where, never a quiet
// end.
TEST(AccessLog, CompressedLogsAreReadAsPlainOnes) {
  std::string text;
  for (int i = 0; i < 12000; ++i) text += combined("198.18.0." + std::to_string(i % 200), "GET /z/" + std::to_string(i) + " HTTP/1.1", "curl");
  const InputResult plain = read_log(text);
  ASSERT_EQ(plain.records.size(), 12000u);
  ASSERT_GT(text.size(), 3 * 256 * 1024u) << "several pieces";
  const size_t half = text.find('\n', text.size() / 2) + 1;
  for (const auto& [name, bytes] : std::vector<std::pair<std::string, std::string>>{
           {"gzip", gzipped(text)},
           {"gzip, two members", gzipped(text.substr(0, half)) + gzipped(text.substr(half))},
           {"xz", xzed(text)},
           {"zstd", zstded(text)}}) {
    const InputResult r = read_log(bytes);
    EXPECT_FALSE(r.fatal) << name;
    EXPECT_EQ(r.problem_count, 0u) << name;
    ASSERT_EQ(r.records.size(), plain.records.size()) << name;
    EXPECT_EQ(r.units_read, plain.units_read) << name;
    EXPECT_EQ(r.records[11999].head, plain.records[11999].head) << name;
    EXPECT_EQ(r.records[11999].record_number, 12000u) << name;
  }
  std::string damaged = gzipped(text);
  for (size_t i = damaged.size() / 2; i < damaged.size() / 2 + 64; ++i) damaged[i] = static_cast<char>(damaged[i] ^ 0x5a);
  const InputResult bad = read_log(damaged);
  EXPECT_TRUE(bad.fatal);
  ASSERT_FALSE(bad.problems.empty());
  EXPECT_EQ(bad.problems.front().to_string().rfind("LOG: gzip: damaged data after ", 0), 0u)
      << bad.problems.front().to_string();
  const std::string zst = zstded(text);
  const InputResult cut = read_log(zst.substr(0, zst.size() / 2));
  EXPECT_TRUE(cut.fatal);
  ASSERT_FALSE(cut.problems.empty());
  EXPECT_EQ(cut.problems.front().to_string().rfind("LOG: zstd: the data ends in the middle of a compressed stream", 0), 0u)
      << cut.problems.front().to_string();
  EXPECT_LT(cut.records.size(), plain.records.size());
}

TEST(AccessLog, AMissingFileIsFatal) {
  const InputResult r = read_access_log("/nonexistent/sluice/access.log", 0, {});
  EXPECT_TRUE(r.fatal);
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_EQ(r.problems[0].to_string(), "/nonexistent/sluice/access.log: cannot open: No such file or directory");
}

TEST(AccessLog, FormatStringErrorsNameTheirColumn) {
  const FormatCheck ok = check_nginx_format(LogOptions{}.nginx_format);
  EXPECT_EQ(ok.error, "");
  EXPECT_EQ(ok.variables, (std::vector<std::string>{"remote_addr", "remote_user", "time_local", "request", "status",
                                                    "body_bytes_sent", "http_referer", "http_user_agent"}));
  EXPECT_EQ(check_nginx_format("$remote_addr ${} $msec $request").error, "1:14: empty \"${}\"");
  EXPECT_EQ(check_nginx_format("$remote_addr $msec ${request").error, "1:20: unterminated \"${\"");
  EXPECT_EQ(check_nginx_format("$remote_addr$msec $request").error,
            "1:13: two variables with no text between them (where would one end?)");
  EXPECT_EQ(check_nginx_format("$remote_addr $ $msec").error, "1:14: '$' without a variable name");
  EXPECT_EQ(check_nginx_format("$msec $request").error, "1:1: no client address ($remote_addr)");
  EXPECT_EQ(check_nginx_format("$remote_addr $request").error, "1:1: no time ($msec, $time_iso8601 or $time_local)");
  EXPECT_EQ(check_nginx_format("$remote_addr $msec $request_uri").error,
            "1:1: no request line ($request, or $request_method and $request_uri)");
  LogOptions bad;
  bad.nginx_format = "$remote_addr$msec";
  EXPECT_TRUE(read_log("x\n", bad).fatal);
}

TEST(AccessLog, RequestLinesThatAreNotThreePartsReachTheParserAsTheyWere) {
  const InputResult r = read_log(combined("198.18.0.1", R"(\x16\x03\x01\x02\x00)", "-") +
                                 combined("198.18.0.1", "GET /", "-"));
  ASSERT_EQ(r.records.size(), 2u);
  EXPECT_EQ(r.records[1].head, "GET /\r\n\r\n");
  for (const RequestRecord& rec : r.records) {
    const ParsedHead parsed(rec.head);
    EXPECT_FALSE(parsed.complete());
    EXPECT_EQ(http::status_for(parsed.error()), 400);
  }
}

TEST(AccessLog, TheHeadParsesWithThePolicysFields) {
  const InputResult r = read_log(
      "198.18.0.9 [1796219736.250] 0.050 \"POST /v1/chat?stream=1 HTTP/1.1\" \"Bearer key-one\" "
      "\"203.0.113.5\" 12 200\n",
      custom_options());
  ASSERT_EQ(r.records.size(), 1u);
  const ParsedHead parsed(r.records[0].head);
  ASSERT_TRUE(parsed.complete()) << http::to_string(parsed.error());
  const http::RequestHead& h = parsed.head();
  EXPECT_EQ(h.method_kind, http::Method::kPost);
  EXPECT_EQ(h.path, "/v1/chat");
  EXPECT_EQ(h.query, "stream=1");
  EXPECT_EQ(h.value(http::KnownField::kHost), "localhost");
  EXPECT_EQ(h.value(http::KnownField::kAuthorization), "Bearer key-one");
  EXPECT_EQ(h.value(http::KnownField::kXForwardedFor), "203.0.113.5");
  EXPECT_EQ(h.head_bytes, r.records[0].head.size());
}

TEST(AccessLog, ABigLogReadsTheSameOnOneThreadAndOnTwo) {
  std::string text;
  constexpr int kLines = 200'000;
  text.reserve(kLines * 120);
  for (int i = 1; i <= kLines; ++i) {
    const std::string ms = std::to_string(1000 + i % 1000).substr(1);
    text += i % 9973 == 0 ? "garbage\n" : i % 5003 == 0 ? "\n" : "";
    if (i % 9973 == 0 || i % 5003 == 0) continue;
    text += "198.18." + std::to_string(i % 200) + "." + std::to_string(i % 250) + " [" +
            std::to_string(1796219736 + i / 1000) + "." + ms + "] 0.00" + std::to_string(i % 10) +
            " \"GET /v1/items/" + std::to_string(i) + " HTTP/1.1\" \"Bearer k" + std::to_string(i % 50) +
            "\" \"-\" " + std::to_string(i % 7) + " 200\n";
  }
  auto read_with = [&](size_t threads) {
    const tbb::global_control limit(tbb::global_control::max_allowed_parallelism, threads);
    return read_log(text, custom_options(), 1);
  };
  const InputResult one = read_with(1), two = read_with(2);
  ASSERT_EQ(one.units_read, static_cast<uint64_t>(kLines));
  EXPECT_EQ(one.problem_count, static_cast<uint64_t>(kLines / 9973));
  ASSERT_EQ(one.records.size(), static_cast<size_t>(kLines - kLines / 9973 - (kLines / 5003 - kLines / (5003 * 9973))));
  ASSERT_EQ(two.records.size(), one.records.size());
  for (size_t i = 0; i < one.records.size(); ++i) {
    const RequestRecord &a = one.records[i], &b = two.records[i];
    ASSERT_TRUE(a.record_number == b.record_number && a.order == b.order && a.at == b.at && a.head == b.head &&
                a.conn.peer == b.conn.peer && a.usage_tokens == b.usage_tokens)
        << "record " << i;
    const std::string path = "/v1/items/" + std::to_string(a.record_number) + " ";
    ASSERT_NE(a.head.find(path), std::string::npos) << "line numbers: " << a.record_number << " " << a.head;
  }
  ASSERT_EQ(one.problems.size(), two.problems.size());
  for (size_t i = 0; i < one.problems.size(); ++i) EXPECT_EQ(one.problems[i].to_string(), two.problems[i].to_string());
  EXPECT_EQ(one.problems.at(0).where, "LOG:9973:1");
}

}  // namespace
}  // namespace sluice::replay

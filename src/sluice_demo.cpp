// sluice-demo: what the limiter core in lib/ does today, on real and hostile
// input. It feeds one connection's worth of pipelined requests (real client
// heads, a chunked upload, and a request-smuggling attempt) through the
// request stream in small segments, as a network would deliver them, and
// prints what the appliance would see: each request's method, path and the
// fields the limiter keys on, and the status it would answer the attack with.
// Replaced by the inline network demo once the data plane lands.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "http/http1_policy.h"
#include "http/limiter_answer.h"
#include "http/limiter_request.h"
#include "http/request_stream.h"
#include "limiter/decide.h"
#include "policy/policy_loader.h"

namespace {

using namespace sluice::http;

constexpr std::string_view kConnection =
    "GET /v1/models HTTP/1.1\r\nHost: api.example\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\n\r\n"
    "POST /v1/chat/completions HTTP/1.1\r\nHost: api.example\r\nAuthorization: Bearer sk-test-4f2a\r\n"
    "Content-Type: application/json\r\nContent-Length: 71\r\n\r\n"
    "{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":\"user\",\"content\":\"Hello!\"}]}"
    "POST /api/events HTTP/1.1\r\nHost: api.example\r\nX-Forwarded-For: 198.18.0.7, 198.18.0.1\r\n"
    "Transfer-Encoding: chunked\r\n\r\n7\r\n{\"a\":1}\r\n0\r\n\r\n"
    "GET /vrx/run-7f3a/v1/screen HTTP/1.1\r\nHost: api.example\r\nCF-Connecting-IP: 2001:db8::42\r\n\r\n"
    "POST /v1/chat/completions HTTP/1.1\r\nHost: api.example\r\nContent-Length: 4\r\n"
    "Transfer-Encoding : chunked\r\n\r\n0\r\n\r\nGET /admin HTTP/1.1\r\nHost: api.example\r\n\r\n";

std::string field_or_dash(const RequestHead& h, KnownField f) {
  return h.has(f) ? std::string(h.value(f)) : std::string("-");
}

}  // namespace

// Part two: the limiter core deciding on the same kind of traffic with the
// three-budget profile, as the appliance will for every request.
int limiter_demo(const char* config_dir) {
  using namespace sluice;
  const std::string path = std::string(config_dir) + "/three-budgets.yaml";
  const policy::LoadResult loaded = policy::load_policy_file(path);
  for (const auto& e : loaded.errors) std::fprintf(stderr, "%s\n", e.to_string().c_str());
  if (!loaded.policy) return 1;
  const limiter::KeyHasher hasher = limiter::KeyHasher::random();
  std::vector<policy::PolicyError> errors;
  auto compiled = http::compile_http1_policy(*loaded.policy, hasher, errors);
  if (!compiled) return 1;
  limiter::BucketTable buckets({.capacity = 1 << 12, .regions = 4, .bucket_kinds = static_cast<uint16_t>(compiled->buckets.size())});
  limiter::BucketTable records({.capacity = 1 << 10, .regions = 4, .bucket_kinds = 1, .words = compiled->max_slots});
  limiter::DigestMap runs(16), users(16);
  limiter::LimiterState state{buckets, records, runs, users, hasher, hasher};
  auto scratch = std::make_unique<limiter::DecisionScratch>();

  std::printf("\n--- the limiter core on %s: 62 bare requests from 198.18.0.7 in one second ---\n", path.c_str());
  const std::string text = "GET /v1/models HTTP/1.1\r\nHost: api.example\r\n\r\n";
  std::vector<http::FieldLine> store(compiled->stream.head.max_fields);
  std::vector<char> spill(compiled->stream.head.max_head_bytes);
  http::HeadParser parser(compiled->fields, compiled->stream.head, store, spill);
  limiter::ConnectionFacts conn;
  conn.peer = *net::parse_ip("198.18.0.7");
  const time::Nanos start = time::SystemClock().now();
  for (int i = 1; i <= 62; ++i) {
    parser.reset();
    if (parser.feed(text).status != http::HeadStatus::kComplete) return 1;
    const limiter::Decision d =
        limiter::decide(*compiled, state, http::limiter_request(parser.head(), conn), start + i * 1'000'000ull, *scratch);
    if (i <= 2 || (i >= 59 && i <= 60)) {
      char rendered[512];
      const size_t n = http::write_ratelimit_fields(d.fields, rendered);
      std::string fields(rendered, n == SIZE_MAX ? 0 : n);
      for (size_t p; (p = fields.find("\r\n")) != std::string::npos;) fields.replace(p, 2, "  ");
      std::printf("#%-3d admitted  %s\n", i, fields.c_str());
    } else if (i == 3) {
      std::printf("...\n");
    } else if (d.verdict == limiter::Verdict::kRefuse) {
      // On the wire, in HTTP/1: kept open unless the request says otherwise.
      char answer[http::kMaxAnswerBytes];
      const size_t n = http::write_answer(*compiled, d, http::answer_keeps_connection(*compiled, parser.head()), answer);
      std::printf("#%-3d refused, answered on the wire:\n%.*s\n", i, static_cast<int>(n), answer);
      if (i == 61) std::printf("\n");
    }
  }
  return 0;
}

int main(int argc, char** argv) {
  size_t segment = 23;  // deliberately odd, so heads and bodies split mid-line
  if (argc > 1) {
    char* end = nullptr;
    const long v = std::strtol(argv[1], &end, 10);
    if (*end != '\0' || v < 1 || v > 65536) {
      std::fprintf(stderr, "usage: sluice-demo [SEGMENT_BYTES]  (1..65536, default 23)\n");
      return 2;
    }
    segment = static_cast<size_t>(v);
  }

  const FieldSet fields;
  const StreamConfig config;
  std::vector<FieldLine> store(config.head.max_fields);
  std::vector<char> spill(config.head.max_head_bytes);
  RequestStream stream(fields, config, store, spill);

  std::printf("sluice-demo: one keep-alive connection, %zu bytes, delivered in %zu-byte segments (scan: %s)\n\n",
              kConnection.size(), segment, std::string(to_string(best_isa())).c_str());
  std::printf("%-3s %-7s %-28s %-22s %-26s %s\n", "#", "method", "path", "authorization", "client-ip headers", "body");
  int n = 0;
  for (size_t off = 0; off < kConnection.size(); off += segment) {
    std::string_view piece = kConnection.substr(off, segment);
    while (true) {
      const StreamStep s = stream.next(piece);
      piece.remove_prefix(s.consumed);
      if (s.event == StreamEvent::kHead) {
        const RequestHead& h = stream.head();
        const std::string ip = h.has(KnownField::kXForwardedFor) ? "XFF " + field_or_dash(h, KnownField::kXForwardedFor)
                               : h.has(KnownField::kCfConnectingIp) ? "CF " + field_or_dash(h, KnownField::kCfConnectingIp)
                                                                     : std::string("(connection)");
        const char* body = h.body == BodyKind::kChunked ? "chunked" : h.body == BodyKind::kLength ? "length" : "none";
        std::printf("%-3d %-7.*s %-28.*s %-22s %-26s %s\n", ++n, static_cast<int>(h.method.size()), h.method.data(),
                    static_cast<int>(h.path.size()), h.path.data(), field_or_dash(h, KnownField::kAuthorization).c_str(),
                    ip.c_str(), body);
      } else if (s.event == StreamEvent::kError) {
        std::printf("\nrefused in the segment at byte %zu: %s -> the appliance answers %u and closes the connection;\n"
                    "the \"GET /admin\" hidden behind it never reaches the origin.\n",
                    off + (segment - piece.size()), std::string(to_string(s.error)).c_str(), status_for(s.error));
        return limiter_demo(SLUICE_CONFIG_DIR);
      }
      if (s.event == StreamEvent::kNeedMore || piece.empty()) break;
    }
  }
  std::printf("\nstream ended without the expected refusal\n");
  return 1;
}

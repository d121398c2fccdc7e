// sluice's head parser beside picohttpparser (h2o's, the usual yardstick for
// HTTP/1 head parsing), in one process and interleaved, so that the machine's
// drifts touch both alike. picohttpparser is not part of sluice:
// this program is built only when meson is given -Dpicohttpparser=PATH, a
// checkout of github.com/h2o/picohttpparser, compiled with -O3 -march=native
// (its SSE4.2 path). For each of parser_bench's three request heads: R
// repetitions, each timing N parses by sluice (its best instruction set,
// tracked fields located, framing checked) and then N by phr_parse_request
// (every field line located); the median ns per head of each and their
// ratio. Then the same for four response heads, as the origins behind sluice
// send them (nginx serving a file, an API behind Envoy, a chunked API answer,
// a page with the usual security and cookie fields), framed by sluice's
// ResponseStream (status, framing fields, every line checked) against
// phr_parse_response.
//
//   ./build/perf/parser_vs_pico [--repetitions R] [--parses N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "http/head_parser.h"
#include "http/response_stream.h"
#include "median.h"

extern "C" {
#include "picohttpparser.h"
}

namespace {

using namespace sluice::http;
using sluice::perf::median;
using Clock = std::chrono::steady_clock;

// The heads of perf/parser_bench.cpp: curl's GET, an API POST, Chromium's GET.
const char* const kHeads[] = {
    "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\n\r\n",
    "POST /v1/chat/completions HTTP/1.1\r\nHost: api.example.com\r\nUser-Agent: OpenAI/Python 1.54.4\r\n"
    "Accept: application/json\r\nAccept-Encoding: gzip, deflate\r\nContent-Type: application/json\r\n"
    "Authorization: Bearer sk-proj-4f2a9c1e7b3d8e6f0a1b2c3d4e5f6a7b8c9d0e1f\r\n"
    "X-Forwarded-For: 198.18.7.42, 198.18.0.1\r\nConnection: keep-alive\r\nContent-Length: 190\r\n\r\n",
    "GET /dashboard?tab=usage HTTP/1.1\r\nHost: app.example.com\r\nConnection: keep-alive\r\n"
    "User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0.0.0 "
    "Safari/537.36\r\n"
    "Accept: text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,"
    "application/signed-exchange;v=b3;q=0.7\r\n"
    "Sec-Fetch-Site: same-origin\r\nSec-Fetch-Mode: navigate\r\nSec-Fetch-Dest: document\r\n"
    "sec-ch-ua: \"Not:A-Brand\";v=\"8\", \"Chromium\";v=\"156\"\r\nsec-ch-ua-mobile: ?0\r\n"
    "sec-ch-ua-platform: \"Linux\"\r\nAccept-Encoding: gzip, deflate, br, zstd\r\n"
    "Accept-Language: en-US,en;q=0.9\r\n"
    "Cookie: session_id=8f14e45fceea167a5a36dedd4bea2543; csrftoken=c9f0f895fb98ab9159f51fd0297e236d; "
    "theme=dark\r\n\r\n",
};

// Response heads of 150-1200 bytes, with the fields these servers send.
const char* const kResponses[] = {
    // nginx 1.22 serving a static file.
    "HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Sun, 06 Dec 2026 12:00:00 GMT\r\n"
    "Content-Type: application/json\r\nContent-Length: 1432\r\nLast-Modified: Fri, 04 Dec 2026 09:12:44 GMT\r\n"
    "Connection: keep-alive\r\nETag: \"6571a2cc-598\"\r\nAccept-Ranges: bytes\r\n\r\n",
    // An API answer through Envoy.
    "HTTP/1.1 200 OK\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: 2318\r\n"
    "x-request-id: 5f0c8f3e-9a47-4b1e-8d6a-2f1b7c3e9d10\r\nx-ratelimit-limit-requests: 10000\r\n"
    "x-ratelimit-remaining-requests: 9998\r\nx-ratelimit-reset-requests: 8.64s\r\n"
    "date: Sun, 06 Dec 2026 12:00:00 GMT\r\nx-envoy-upstream-service-time: 412\r\nserver: envoy\r\n\r\n",
    // A chunked API answer from an application server.
    "HTTP/1.1 200 OK\r\nX-Powered-By: Express\r\nAccess-Control-Allow-Origin: *\r\n"
    "Content-Type: text/event-stream; charset=utf-8\r\nCache-Control: no-cache\r\n"
    "Date: Sun, 06 Dec 2026 12:00:00 GMT\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n"
    "Transfer-Encoding: chunked\r\n\r\n",
    // A page behind a CDN: security fields and cookies.
    "HTTP/1.1 200 OK\r\nDate: Sun, 06 Dec 2026 12:00:00 GMT\r\nContent-Type: text/html; charset=utf-8\r\n"
    "Content-Length: 48213\r\nConnection: keep-alive\r\nCache-Control: private, max-age=0, must-revalidate\r\n"
    "Vary: Accept-Encoding, Cookie\r\n"
    "Set-Cookie: __cf_bm=Qx8kS2vB1o.f3Yl9mZ0wJ4aT6nR7pE5uH2cD8gK1iL0-1796558400-1.0.1.1-aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1v"
    "W3xY5zA7bC9dE1fG3hI5jK7lM9nO1pQ3rS5tU7vW9xY1zA3bC5dE7fG9h; path=/; expires=Sun, 06-Dec-26 12:30:00 GMT; "
    "domain=.example.com; HttpOnly; Secure; SameSite=None\r\n"
    "Set-Cookie: session=8f14e45fceea167a5a36dedd4bea2543; Path=/; HttpOnly; Secure; SameSite=Lax\r\n"
    "Strict-Transport-Security: max-age=31536000; includeSubDomains; preload\r\n"
    "Content-Security-Policy: default-src 'self'; script-src 'self' 'nonce-r4nd0m' https://cdn.example.com; "
    "style-src 'self' 'unsafe-inline'; img-src 'self' data: https:; connect-src 'self' https://api.example.com; "
    "frame-ancestors 'none'; base-uri 'self'; form-action 'self'\r\n"
    "X-Content-Type-Options: nosniff\r\nX-Frame-Options: DENY\r\nReferrer-Policy: strict-origin-when-cross-origin\r\n"
    "Permissions-Policy: camera=(), microphone=(), geolocation=()\r\nServer: cloudflare\r\n"
    "CF-RAY: 8f2a6c1d9e3b4a5f-FRA\r\nalt-svc: h3=\":443\"; ma=86400\r\n\r\n",
};

template <typename Parse>
double ns_per_parse(int parses, Parse&& parse) {
  const auto start = Clock::now();
  for (int i = 0; i < parses; ++i) parse();
  return std::chrono::duration<double, std::nano>(Clock::now() - start).count() / parses;
}

// One row: `repetitions` times, `parses` by sluice then `parses` by
// picohttpparser, interleaved; the median ns per head of each and their ratio.
template <typename Ours, typename Theirs>
void compare(size_t bytes, int repetitions, int parses, Ours&& ours, Theirs&& theirs) {
  std::vector<double> a, b;
  for (int r = 0; r < repetitions; ++r) {
    a.push_back(ns_per_parse(parses, ours));
    b.push_back(ns_per_parse(parses, theirs));
  }
  const double x = median(a), y = median(b);
  std::printf("%-8s %12.1f %12.1f %7.2fx\n", (std::to_string(bytes) + "B").c_str(), x, y, x / y);
}

}  // namespace

int main(int argc, char** argv) {
  int repetitions = 301, parses = 2000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--repetitions") == 0) repetitions = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--parses") == 0) parses = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: parser_vs_pico [--repetitions R] [--parses N]\n");
      return 2;
    }
  }
  if (repetitions < 1 || parses < 1) {
    std::fprintf(stderr, "parser_vs_pico: --repetitions and --parses must be positive\n");
    return 2;
  }
  static const FieldSet fields;
  std::vector<FieldLine> store;
  std::vector<char> spill(16384);
  HeadParser parser(fields, {}, store, spill);
  std::printf("%-8s %12s %12s %8s   (median of %d repetitions of %d parses, interleaved; sluice: %s)\n", "head",
              "sluice ns", "pico ns", "ratio", repetitions, parses, std::string(to_string(best_isa())).c_str());
  volatile size_t sink = 0;
  for (const char* text : kHeads) {
    const std::string head(text);
    compare(
        head.size(), repetitions, parses,
        [&] {
          parser.reset();
          const FeedResult res = parser.feed(head);
          if (res.status != HeadStatus::kComplete) std::abort();
          sink = sink + parser.head().field_count;
        },
        [&] {
          const char *method, *path;
          size_t method_len, path_len, num_headers = 100;
          int minor;
          phr_header headers[100];
          const int n = phr_parse_request(head.data(), head.size(), &method, &method_len, &path, &path_len, &minor,
                                          headers, &num_headers, 0);
          if (n != static_cast<int>(head.size())) std::abort();
          sink = sink + num_headers;
        });
  }

  std::printf("\n%-8s %12s %12s %8s   (response heads: ResponseStream against phr_parse_response)\n", "response",
              "sluice ns", "pico ns", "ratio");
  ResponseStream stream;
  for (const char* text : kResponses) {
    const std::string head(text);
    compare(
        head.size(), repetitions, parses,
        [&] {
          stream.reset();
          if (!stream.expect(RequestKind::kOrdinary)) std::abort();
          const ResponseStep step = stream.next(head);
          if (step.event != ResponseEvent::kHead || step.consumed != head.size()) std::abort();
          sink = sink + stream.head().status;
        },
        [&] {
          const char* msg;
          size_t msg_len, num_headers = 100;
          int minor, status;
          phr_header headers[100];
          const int n = phr_parse_response(head.data(), head.size(), &minor, &status, &msg, &msg_len, headers,
                                           &num_headers, 0);
          if (n != static_cast<int>(head.size())) std::abort();
          sink = sink + static_cast<size_t>(status) + num_headers;
        });
  }
  return 0;
}

// Head parser and body framer throughput: ns per head and bytes per second
// for a small curl GET, a typical API POST and a large browser GET, each fed
// whole and split in two, on every instruction set the CPU has; the chunked
// body framer; and Node's http_parser on the same heads as a baseline.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "http/body_framer.h"
#include "http/head_parser.h"

#if SLUICE_BENCH_HTTP_PARSER
#include <http_parser.h>
#endif

namespace {

using namespace sluice::http;

// 87 bytes, as curl 7.88 sends it (tests/data/heads/curl_get.http).
const std::string kSmall =
    "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\n\r\n";

// About 340 bytes: an API client's JSON POST through a proxy.
const std::string kTypical =
    "POST /v1/chat/completions HTTP/1.1\r\n"
    "Host: api.example.com\r\n"
    "User-Agent: OpenAI/Python 1.54.4\r\n"
    "Accept: application/json\r\n"
    "Accept-Encoding: gzip, deflate\r\n"
    "Content-Type: application/json\r\n"
    "Authorization: Bearer sk-proj-4f2a9c1e7b3d8e6f0a1b2c3d4e5f6a7b8c9d0e1f\r\n"
    "X-Forwarded-For: 198.18.7.42, 198.18.0.1\r\n"
    "Connection: keep-alive\r\n"
    "Content-Length: 190\r\n"
    "\r\n";

// About 700 bytes: Chromium's navigation GET with cookies.
const std::string kLarge =
    "GET /dashboard?tab=usage HTTP/1.1\r\n"
    "Host: app.example.com\r\n"
    "Connection: keep-alive\r\n"
    "User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0.0.0 "
    "Safari/537.36\r\n"
    "Accept: text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,"
    "application/signed-exchange;v=b3;q=0.7\r\n"
    "Sec-Fetch-Site: same-origin\r\n"
    "Sec-Fetch-Mode: navigate\r\n"
    "Sec-Fetch-Dest: document\r\n"
    "sec-ch-ua: \"Not:A-Brand\";v=\"8\", \"Chromium\";v=\"156\"\r\n"
    "sec-ch-ua-mobile: ?0\r\n"
    "sec-ch-ua-platform: \"Linux\"\r\n"
    "Accept-Encoding: gzip, deflate, br, zstd\r\n"
    "Accept-Language: en-US,en;q=0.9\r\n"
    "Cookie: session_id=8f14e45fceea167a5a36dedd4bea2543; csrftoken=c9f0f895fb98ab9159f51fd0297e236d; "
    "theme=dark\r\n"
    "\r\n";

const std::string& head_of(int64_t kind) { return kind == 0 ? kSmall : kind == 1 ? kTypical : kLarge; }

// Parses one head per iteration, as the data plane does per request: reset,
// feed the piece(s), read the verdict. The data plane reads only the tracked
// fields, so by default no field store is lent; store:1 also records every
// field line's name and value view.
void BM_Head(benchmark::State& state) {
  const std::string& head = head_of(state.range(0));
  const bool split = state.range(1) != 0;
  const Isa isa = static_cast<Isa>(state.range(2));
  const bool store_all = state.range(3) != 0;
  if (!isa_supported(isa)) {
    state.SkipWithError("instruction set not supported on this CPU");
    return;
  }
  static const FieldSet fields;
  std::vector<FieldLine> store(store_all ? 100 : 0);
  std::vector<char> spill(16384);
  HeadParser parser(fields, {}, store, spill, isa);
  const std::span<const char> whole(head);
  const size_t half = head.size() / 2;
  for (auto _ : state) {
    parser.reset();
    FeedResult r;
    if (split) {
      r = parser.feed(whole.first(half));
      r = parser.feed(whole.subspan(half));
    } else {
      r = parser.feed(whole);
    }
    if (r.status != HeadStatus::kComplete) state.SkipWithError("head did not parse");
    benchmark::DoNotOptimize(parser.head().tracked_count.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * head.size()));
  state.SetLabel(std::string(to_string(isa)) + " " + std::to_string(head.size()) + "B" + (split ? " split" : "") +
                 (store_all ? " +store" : ""));
}

void head_args(benchmark::internal::Benchmark* b) {
  for (int kind = 0; kind < 3; ++kind) {
    for (int split = 0; split < 2; ++split) {
      for (Isa isa : kAllIsas) b->Args({kind, split, static_cast<int>(isa), 0});
    }
    b->Args({kind, 0, static_cast<int>(best_isa()), 1});
  }
}
BENCHMARK(BM_Head)->Apply(head_args)->ArgNames({"head", "split", "isa", "store"});

// A 4 KiB chunked upload: 16 chunks of 256 bytes with extensions, and a trailer.
void BM_ChunkedBody(benchmark::State& state) {
  const size_t chunk = static_cast<size_t>(state.range(0));
  std::string body;
  for (size_t sent = 0; sent < 4096; sent += chunk) {
    char size[32];
    std::snprintf(size, sizeof size, "%zx;i=%zu\r\n", chunk, sent / chunk);
    body += size + std::string(chunk, 'd') + "\r\n";
  }
  body += "0\r\nX-Usage-Tokens: 1234\r\n\r\n";
  BodyFramer framer;
  for (auto _ : state) {
    framer.start_chunked();
    const BodyStep s = framer.feed(body);
    if (s.status != BodyStatus::kDone) state.SkipWithError("body did not frame");
    benchmark::DoNotOptimize(s.consumed);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * body.size()));
  state.SetLabel(std::to_string(body.size()) + "B in " + std::to_string(4096 / chunk) + " chunks");
}
BENCHMARK(BM_ChunkedBody)->Arg(256)->Arg(32);

#if SLUICE_BENCH_HTTP_PARSER
// Baseline: Node's http_parser, locating header names and values through its
// callbacks (it validates less: no field-level smuggling rules).
struct Located {
  const char* last_field = nullptr;
  size_t fields = 0;
};

int on_field(http_parser* p, const char* at, size_t) {
  static_cast<Located*>(p->data)->last_field = at;
  ++static_cast<Located*>(p->data)->fields;
  return 0;
}
int on_value(http_parser* p, const char* at, size_t) {
  static_cast<Located*>(p->data)->last_field = at;
  return 0;
}
int on_complete(http_parser* p) {
  http_parser_pause(p, 1);
  return 0;
}

void BM_NodeHttpParserBaseline(benchmark::State& state) {
  const std::string& head = head_of(state.range(0));
  http_parser_settings settings;
  http_parser_settings_init(&settings);
  settings.on_header_field = on_field;
  settings.on_header_value = on_value;
  settings.on_headers_complete = on_complete;
  http_parser parser;
  Located located;
  for (auto _ : state) {
    http_parser_init(&parser, HTTP_REQUEST);
    parser.data = &located;
    const size_t n = http_parser_execute(&parser, &settings, head.data(), head.size());
    benchmark::DoNotOptimize(n);
    benchmark::DoNotOptimize(located.last_field);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * head.size()));
  state.SetLabel("http_parser " + std::to_string(head.size()) + "B");
}
BENCHMARK(BM_NodeHttpParserBaseline)->Arg(0)->Arg(1)->Arg(2)->ArgName("head");
#endif

}  // namespace

BENCHMARK_MAIN();

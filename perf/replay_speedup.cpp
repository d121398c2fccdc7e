// sluice-replay's speed, and its speed-up from Intel TBB: the whole replay
// (reading and parsing the input, merging, deciding) on one thread and on
// two, side by side in one run, alternating, repeated, medians and their
// ratio; a capture also against `tcpdump -r FILE | wc -l` on the same file,
// the floor a capture reader is measured by. Inputs
// are generated: an nginx log in the combined format and a pcap of the same
// requests over keep-alive connections (each flow with its handshake, the
// origin's responses, and its close). Each repetition also checks that both
// thread counts decided the same (a speed-up that changed a decision would
// be a bug, not a speed-up).
//
//   replay_speedup [--records N] [--repetitions R] [--policy FILE]
#include <tbb/global_control.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "median.h"
#include "pcap_writer.h"
#include "replay/access_log.h"
#include "replay/capture_input.h"
#include "replay/replay_run.h"
#include "replay/replay_state.h"
#include "replay/time_merge.h"

namespace {

using namespace sluice;

constexpr time::Nanos kStart = 1'796'212'800ull * time::kNanosPerSecond;  // 2026-12-02T13:20:00Z
constexpr unsigned kClients = 400;
constexpr unsigned kPerConnection = 20;

std::string client_ip(unsigned c) { return "198.18." + std::to_string(1 + c / 250) + "." + std::to_string(c % 250 + 1); }

// Request i: its client, its time (about 5000 a second), its target.
unsigned client_of(size_t i) { return static_cast<unsigned>((i * 7919) % kClients); }
time::Nanos time_of(size_t i) { return kStart + i * 200'000; }

void write_log(const std::string& path, size_t records) {
  std::ofstream out(path);
  char line[512];
  for (size_t i = 0; i < records; ++i) {
    const time::Nanos t = time_of(i);
    const time_t s = static_cast<time_t>(t / time::kNanosPerSecond);
    std::tm tm{};
    gmtime_r(&s, &tm);
    char when[64];
    std::strftime(when, sizeof when, "%d/%b/%Y:%H:%M:%S +0000", &tm);
    std::snprintf(line, sizeof line,
                  "%s - - [%s] \"GET /v1/items/%zu?page=%zu HTTP/1.1\" 200 512 \"-\" \"bench-client/1.0 (replay)\"\n",
                  client_ip(client_of(i)).c_str(), when, i % 977, i % 13);
    out << line;
  }
}

// The same requests as flows: each client's requests, kPerConnection per
// keep-alive connection, each answered by the origin; packets in time order.
void write_capture(const std::string& path, size_t records) {
  using namespace sluice::test;
  std::vector<std::vector<size_t>> by_client(kClients);
  for (size_t i = 0; i < records; ++i) by_client[client_of(i)].push_back(i);
  std::vector<CapPacket> packets;
  const auto add = [&](time::Nanos at, const TcpSegment& seg) { packets.push_back({at, frame_of(seg, Link::kEthernet)}); };
  for (unsigned c = 0; c < kClients; ++c) {
    const std::vector<size_t>& mine = by_client[c];
    for (size_t from = 0; from < mine.size(); from += kPerConnection) {
      Conversation f(client_ip(c), static_cast<uint16_t>(20000 + from / kPerConnection % 40000), "198.18.0.20", 80);
      const time::Nanos opened = time_of(mine[from]) - 100'000;
      add(opened, f.syn());
      add(opened + 10'000, f.syn_ack());
      add(opened + 20'000, f.ack());
      time::Nanos last = opened;
      for (size_t k = from; k < std::min(mine.size(), from + kPerConnection); ++k) {
        const size_t i = mine[k];
        add(time_of(i), f.client("GET /v1/items/" + std::to_string(i % 977) +
                                 " HTTP/1.1\r\nHost: api.example\r\nUser-Agent: bench-client/1.0\r\nAccept: */*\r\n\r\n"));
        add(time_of(i) + 50'000, f.origin("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"));
        last = time_of(i) + 50'000;
      }
      add(last + 10'000, f.client_fin());
      add(last + 20'000, f.origin_fin());
    }
  }
  std::stable_sort(packets.begin(), packets.end(), [](const CapPacket& a, const CapPacket& b) { return a.at < b.at; });
  write_file(path, pcap_file(packets, 1, false, true));
}

struct Run {
  double records_per_second = 0;
  uint64_t admitted = 0, refused = 0;
};

Run replay_once(const std::string& input, bool capture, const std::string& policy_file, unsigned threads) {
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, threads);
  replay::BoxStateLoad box = replay::load_box_state({});
  replay::LoadedPolicy policy = replay::load_policy(policy_file, *box.state.credential_hasher);
  if (!policy.policy) {
    std::fprintf(stderr, "replay_speedup: %s\n", policy.errors.empty() ? "no policy" : policy.errors[0].c_str());
    std::exit(2);
  }
  replay::PolicyLimiter limiter(*policy.policy, box.state, 1 << 16);
  const auto t0 = std::chrono::steady_clock::now();
  replay::InputResult in;
  replay::ReplayReport report;
  if (capture) {
    // As sluice-replay reads a capture: streamed, a packet at a time, through the merge.
    replay::CaptureOptions c;
    c.service_ports.set(80);
    c.fields = &policy.policy->fields;
    c.stream = policy.policy->stream;
    replay::InputResult* results[] = {&in};
    std::vector<replay::MergeInput> merge;
    merge.push_back({.opened = std::make_unique<replay::CaptureStream>(std::vector<replay::CaptureFile>{{input, 0}},
                                                                       std::vector<std::unique_ptr<replay::InputStream>>{},
                                                                       c, results),
                     .look_back = replay::kCaptureLookBack});
    replay::TimeMerge stream(std::move(merge), {});
    replay::decide_stream(stream, {&limiter, policy_file}, std::nullopt, {}, report);
  } else {
    // As sluice-replay reads a log: streamed, a step at a time, through the merge.
    const replay::LogOptions options;
    replay::LogBuffers buffers;
    std::vector<replay::MergeInput> merge;
    merge.push_back({.opened = std::make_unique<replay::AccessLogReader>(input, 0, options, buffers, in),
                     .look_back = 2 * time::kNanosPerSecond});
    replay::TimeMerge stream(std::move(merge), {});
    replay::decide_stream(stream, {&limiter, policy_file}, std::nullopt, {}, report);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (in.problem_count > 0 || in.fatal) {
    std::fprintf(stderr, "replay_speedup: %s: %s\n", input.c_str(),
                 in.problems.empty() ? "unreadable" : in.problems[0].to_string().c_str());
    std::exit(1);
  }
  return {static_cast<double>(report.records) / s, report.outcome.admitted, report.outcome.refused};
}

int measure(const char* what, const std::string& input, bool capture, const std::string& policy, size_t records,
            int repetitions) {
  std::vector<double> one, two, floor;
  // The floor a capture is set against: tcpdump reading the same file,
  // every packet printed and counted (the yardstick).
  const bool tcpdump = capture && std::system("command -v tcpdump >/dev/null 2>&1") == 0;
  const std::string floor_command = "tcpdump -r '" + input + "' 2>/dev/null | wc -l >/dev/null";
  for (int r = 0; r < repetitions; ++r) {
    const Run a = replay_once(input, capture, policy, 1);
    const Run b = replay_once(input, capture, policy, 2);
    if (tcpdump) {
      const auto t0 = std::chrono::steady_clock::now();
      if (std::system(floor_command.c_str()) != 0) return 1;
      floor.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    if (a.admitted != b.admitted || a.refused != b.refused || a.admitted + a.refused != records) {
      std::fprintf(stderr, "replay_speedup: %s: 1 thread decided %llu/%llu, 2 threads %llu/%llu of %zu records\n",
                   what, static_cast<unsigned long long>(a.admitted), static_cast<unsigned long long>(a.refused),
                   static_cast<unsigned long long>(b.admitted), static_cast<unsigned long long>(b.refused), records);
      return 1;
    }
    one.push_back(a.records_per_second);
    two.push_back(b.records_per_second);
  }
  const double m1 = perf::median(one), m2 = perf::median(two);
  std::printf("%-12s %8zu records: 1 thread %9.0f records/s, 2 threads %9.0f records/s, speed-up %.2f "
              "(medians of %d)\n",
              what, records, m1, m2, m2 / m1, repetitions);
  if (!floor.empty()) {
    const double replay_seconds = static_cast<double>(records) / m2;
    std::printf("%-12s %8zu records: tcpdump -r | wc -l %.3f s, sluice-replay (2 threads) %.3f s: %.2fx tcpdump's "
                "speed\n",
                what, records, perf::median(floor), replay_seconds, perf::median(floor) / replay_seconds);
  } else if (capture) {
    std::printf("%-12s no tcpdump: no floor to compare with\n", what);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  size_t records = 200000;
  int repetitions = 5;
  std::string policy = std::string(SLUICE_CONFIG_DIR) + "/three-budgets.yaml";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--records") == 0) records = std::strtoull(argv[i + 1], nullptr, 10);
    else if (std::strcmp(argv[i], "--repetitions") == 0) repetitions = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--policy") == 0) policy = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: replay_speedup [--records N] [--repetitions R] [--policy FILE]\n");
      return 2;
    }
  }
  if (records == 0 || repetitions < 1) return 2;
  char dir[] = "/tmp/sluice-replay-bench.XXXXXX";
  if (!mkdtemp(dir)) return 1;
  const std::string log = std::string(dir) + "/access.log", pcap = std::string(dir) + "/capture.pcap";
  write_log(log, records);
  write_capture(pcap, records);
  int rc = measure("nginx log", log, false, policy, records, repetitions);
  if (rc == 0) rc = measure("pcap", pcap, true, policy, records, repetitions);
  std::remove(log.c_str());
  std::remove(pcap.c_str());
  rmdir(dir);
  return rc;
}

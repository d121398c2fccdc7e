// What cluster budgets cost Redis per admitted request, beside how far the
// boxes overshoot: three boxes in this process (each its own BucketTable,
// spend log, ClusterService and sync thread at 20 ms, as sluiced runs them)
// share one redis-server this program starts on 127.0.0.1 (a free port, its
// own temporary directory, no persistence; killed by its PID at exit, and
// with this process if it dies: tests/support/redis_server.h). Requests for
// many keys arrive at random (Poisson) and each goes to a box at random; a
// box decides it on its own table (charge_gcra, the workers' decision) and
// logs what it admitted (SpendLog::record, the workers' hot path).
//
// Per scenario (a count of keys, a rate per key), it reports:
//   admitted          requests admitted, all boxes
//   cpu_us/adm        Redis CPU (used_cpu_user + used_cpu_sys, INFO cpu) per
//                     admitted request, before/after the traffic
//   calls/adm         round trips (EVAL and EVALSHA and the rest, INFO
//                     commandstats, less the commands scripts ran inside)
//   cmds/adm          every command Redis ran, those inside scripts included
//   overshoot         per key: admitted - (burst + rate x the time from its
//                     first request to its last), the worst key and the mean
//   bound             (boxes - 1) x (burst + rate x (interval + round trip)),
//                     the bound docs/cluster.md states
//
// Run:
//   ./build/perf/cluster_redis_cost                  # 1000 keys at 0.6/s, 200 keys at 50/s, 15 s each
//   ./build/perf/cluster_redis_cost --seconds 5 --check   # the meson check: exits 1 past the bound
// Options: --seconds S, --low-keys N, --high-keys N, --no-replica (leave out
// the runs-and-credentials stream sluiced reads at every sync), --partition
// T (a third scenario: one box of three cut from Redis for T seconds, the
// excess per key by the cut's end and after its repayment), --verbose
// (Redis's INFO commandstats at the end: each command's calls and time). The program
// uses only what ClusterService offered before its change logs, so the same
// source measures an older tree (docs/cluster.md gives the commands).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "control/cluster/cluster_service.h"
#include "limiter/charge.h"
#include "redis_processes.h"  // tests/support
#include "redis_server.h"

namespace {

using namespace sluice;
using namespace sluice::control;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kBurst = 20;
constexpr double kRate = 1.0;  // per second
constexpr unsigned kBoxes = 3;
constexpr auto kInterval = std::chrono::milliseconds(20);

limiter::GcraLimit limit() {
  limiter::GcraLimit l;
  if (!limiter::GcraLimit::make(1, time::kNanosPerSecond, kBurst, l)) std::abort();
  return l;
}

time::Nanos wall_now() {
  return static_cast<time::Nanos>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
}

limiter::BucketKey key(uint64_t i) { return {(uint64_t{1} << 63) | (i * 0x9e3779b97f4a7c15ull), i << 16}; }

struct Box {
  Box(const RedisEndpoint& redis, bool replica, const std::string& name)
      : table(limiter::BucketTable::Options{.capacity = 1 << 16, .bucket_kinds = 1}) {
    policy::ClusterSpec spec;
    spec.redis = {redis.to_string()};
    spec.key_prefix = "sluice:cost";
    spec.boxes = kBoxes;
    spec.sync_interval = std::chrono::duration_cast<std::chrono::nanoseconds>(kInterval).count();
    ClusterService::Setup setup{
        .spec = spec,
        .table = &table,
        .logs = {&log},
        // The traffic thread writes the log under `writing`: once the lock
        // is taken here, no record begun before the flip is still going on.
        .wait_for_readers = [this] { std::lock_guard lock(writing); },
        .box_clock = [] { return wall_now(); },
        .bucket_names = [] { return std::vector<SharedBucket>{"shared"}; },
    };
    if (replica) {
      setup.apply_change = [](const ReplicaChange&) { return true; };
      setup.box = name;
    }
    service = std::make_unique<ClusterService>(std::move(setup));
  }

  limiter::BucketTable table;
  limiter::SpendLog log{16384};
  std::mutex writing;
  std::unique_ptr<ClusterService> service;
};

// INFO SECTION's field `name`, as a number (0 when absent).
double info_field(const RedisEndpoint& e, const char* section, const std::string& name) {
  RedisLink raw(e, {});
  const std::string_view argv[] = {"INFO", section};
  const RedisLink::Result r = raw.command(argv, RedisLink::Clock::now());
  std::istringstream lines{std::string(r.reply.text())};
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with(name + ":")) return std::strtod(line.c_str() + name.size() + 1, nullptr);
  }
  return 0;
}

// Every command Redis ran (INFO commandstats), and those that came in from
// clients: the scripts' own commands are counted too, and taken out here by
// what the scripts' bodies call (each EVAL/EVALSHA is a round trip).
struct Commands {
  uint64_t all = 0;
  uint64_t calls = 0;
};

Commands commands(const RedisEndpoint& e) {
  RedisLink raw(e, {});
  const std::string_view argv[] = {"INFO", "commandstats"};
  const RedisLink::Result r = raw.command(argv, RedisLink::Clock::now());
  std::istringstream lines{std::string(r.reply.text())};
  Commands c;
  uint64_t in_scripts = 0;
  for (std::string line; std::getline(lines, line);) {
    const size_t at = line.find(":calls=");
    if (!line.starts_with("cmdstat_") || at == std::string::npos) continue;
    const std::string name = line.substr(8, at - 8);
    const uint64_t n = std::strtoull(line.c_str() + at + 7, nullptr, 10);
    c.all += n;
    // What only the scripts call: TIME, and the keys' own commands.
    if (name == "time" || name == "get" || name == "set" || name == "xadd" || name == "xrange" ||
        name == "xrevrange" || name == "pexpire" || name == "hincrby" || name == "hmget") {
      in_scripts += n;
    }
  }
  c.calls = c.all - in_scripts;
  return c;
}

struct Result {
  uint64_t admitted = 0, requests = 0;
  double seconds = 0, cpu_us = 0;
  Commands cmds;
  double worst_overshoot = 0, mean_overshoot = 0;
  double bound = 0;
  uint64_t sync_failures = 0;
  double mean_sync_us = 0;
};

Result run(const RedisEndpoint& redis, unsigned keys, double per_key, double seconds, bool replica, uint64_t seed) {
  std::vector<std::unique_ptr<Box>> boxes;
  for (unsigned b = 0; b < kBoxes; ++b) {
    boxes.push_back(std::make_unique<Box>(redis, replica, "box" + std::to_string(b)));
  }
  // A fresh key space per run: keys of seed * 1e6 on.
  const uint64_t base = seed * 1'000'000;
  std::atomic<bool> stop{false};
  std::vector<std::thread> syncs;
  for (auto& b : boxes) syncs.emplace_back([&b, &stop] { b->service->serve(stop); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // connected, scripts loaded

  const double cpu0 = info_field(redis, "cpu", "used_cpu_user") + info_field(redis, "cpu", "used_cpu_sys");
  const Commands c0 = commands(redis);

  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(keys * per_key);
  std::uniform_int_distribution<unsigned> pick_key(0, keys - 1), pick_box(0, kBoxes - 1);
  std::vector<uint64_t> admitted(keys, 0);
  std::vector<double> first(keys, -1), last(keys, 0);
  const limiter::GcraLimit l = limit();
  Result out;
  const Clock::time_point start = Clock::now();
  double due = 0;  // seconds since start of the next request
  while (due < seconds) {
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    if (due > elapsed) {
      std::this_thread::sleep_for(std::chrono::duration<double>(std::min(due - elapsed, 0.002)));
      continue;
    }
    // Every request due by now, each box's in one hold of its lock.
    std::vector<std::vector<unsigned>> per_box(kBoxes);
    while (due <= elapsed && due < seconds) {
      const unsigned k = pick_key(rng);
      per_box[pick_box(rng)].push_back(k);
      if (first[k] < 0) first[k] = due;
      last[k] = due;
      due += gap(rng);
    }
    const time::Nanos now = wall_now();
    for (unsigned b = 0; b < kBoxes; ++b) {
      if (per_box[b].empty()) continue;
      std::lock_guard lock(boxes[b]->writing);
      for (unsigned k : per_box[b]) {
        ++out.requests;
        if (!charge_gcra(boxes[b]->table, key(base + k), now, l).decision.admit) continue;
        boxes[b]->log.record(key(base + k), l.interval);
        ++admitted[k];
      }
    }
  }
  // The last admissions' syncs, then the figures.
  std::this_thread::sleep_for(3 * kInterval);
  out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const double cpu1 = info_field(redis, "cpu", "used_cpu_user") + info_field(redis, "cpu", "used_cpu_sys");
  const Commands c1 = commands(redis);
  stop = true;
  for (auto& t : syncs) t.join();

  out.cpu_us = (cpu1 - cpu0) * 1e6;
  out.cmds = {c1.all - c0.all - 1, c1.calls - c0.calls - 1};  // less our own INFO
  double sum = 0;
  unsigned met = 0;
  out.worst_overshoot = -1e9;
  for (unsigned k = 0; k < keys; ++k) {
    if (first[k] < 0) continue;
    out.admitted += admitted[k];
    const double over = static_cast<double>(admitted[k]) - (kBurst + kRate * (last[k] - first[k]));
    out.worst_overshoot = std::max(out.worst_overshoot, over);
    sum += over;
    ++met;
  }
  out.mean_overshoot = met != 0 ? sum / met : 0;
  uint64_t syncs_done = 0, sync_us = 0;
  for (auto& b : boxes) {
    out.sync_failures += b->service->counters().sync_failures.load();
    syncs_done += b->service->counters().syncs.load();
    sync_us += b->service->counters().sync_us_total.load();
  }
  out.mean_sync_us = syncs_done != 0 ? static_cast<double>(sync_us) / syncs_done : 0;
  // The bound with the sync's measured time as its round trip.
  out.bound = (kBoxes - 1) * (kBurst + kRate * (std::chrono::duration<double>(kInterval).count() +
                                                 out.mean_sync_us / 1e6));
  return out;
}

// A TCP relay on loopback between one box and Redis that can be cut: while
// cut it closes every connection it relays and every one it is offered
// (the box sees Redis gone, as behind a firewall that rejects), then relays
// again. One thread, poll(), bounded buffers: a test tool, not a proxy.
class CutRelay {
 public:
  CutRelay(uint16_t listen_port, uint16_t redis_port) : redis_port_(redis_port) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a = loopback(listen_port);
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listener_, 16) != 0) {
      std::perror("cluster_redis_cost: relay");
      std::exit(1);
    }
    thread_ = std::thread([this] { loop(); });
  }
  ~CutRelay() {
    stop_ = true;
    thread_.join();
    for (const Pair& p : pairs_) ::close(p.box), ::close(p.redis);
    ::close(listener_);
  }
  void cut(bool on) { cut_ = on; }

 private:
  struct Pair {
    int box, redis;
  };
  static sockaddr_in loopback(uint16_t port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
  }
  void loop() {
    char buf[65536];
    while (!stop_) {
      if (cut_) {
        for (const Pair& p : pairs_) ::close(p.box), ::close(p.redis);
        pairs_.clear();
      }
      std::vector<pollfd> fds{{listener_, POLLIN, 0}};
      for (const Pair& p : pairs_) fds.push_back({p.box, POLLIN, 0}), fds.push_back({p.redis, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), 10) <= 0) continue;
      if ((fds[0].revents & POLLIN) != 0) {
        const int box = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
        if (box >= 0 && cut_) {
          ::close(box);
        } else if (box >= 0) {
          const int redis = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
          sockaddr_in a = loopback(redis_port_);
          if (::connect(redis, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
            pairs_.push_back({box, redis});
          } else {
            ::close(box), ::close(redis);
          }
        }
      }
      std::vector<size_t> dead;
      for (size_t i = 0; i < pairs_.size(); ++i) {
        for (int side = 0; side < 2; ++side) {
          const pollfd& f = fds[1 + 2 * i + side];
          if ((f.revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
          const ssize_t n = ::read(f.fd, buf, sizeof buf);
          const int to = side == 0 ? pairs_[i].redis : pairs_[i].box;
          if (n <= 0 || ::send(to, buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n) {
            dead.push_back(i);
            break;
          }
        }
      }
      for (auto it = dead.rbegin(); it != dead.rend(); ++it) {
        ::close(pairs_[*it].box), ::close(pairs_[*it].redis);
        pairs_.erase(pairs_.begin() + static_cast<std::ptrdiff_t>(*it));
      }
    }
  }
  uint16_t redis_port_;
  int listener_ = -1;
  std::vector<Pair> pairs_;
  std::atomic<bool> cut_{false}, stop_{false};
  std::thread thread_;
};

// A partition: box 2 of 3 cut from Redis for `cut_s` seconds while all
// three keep offering every key far more than its budget (each box a
// request per key every 50 ms), then the repayment. Per key: the excess
// by the cut's end, against (b + r x T) / N plus the sync bound, and over
// the whole run (cut and repayment), against the sync bound alone.
struct Partition {
  double cut_s = 0, after_s = 0;
  double worst_at_cut_end = -1e9, worst_total = -1e9;
  double bound_at_cut_end = 0, bound_total = 0;
  uint64_t fallback_keys = 0, repaid_keys = 0;
  uint64_t cut_box_admitted_in_cut = 0;
};

Partition partition(const RedisEndpoint& redis, uint16_t relay_port, double cut_s, bool replica) {
  constexpr unsigned kKeys = 20;
  constexpr double kWarm = 3, kStep = 0.05;
  CutRelay relay(relay_port, redis.port);
  std::vector<std::unique_ptr<Box>> boxes;
  for (unsigned b = 0; b < kBoxes; ++b) {
    const RedisEndpoint via = b == 2 ? RedisEndpoint{"127.0.0.1", relay_port, {}} : redis;
    boxes.push_back(std::make_unique<Box>(via, replica, "box" + std::to_string(b)));
  }
  std::atomic<bool> stop{false};
  std::vector<std::thread> syncs;
  for (auto& b : boxes) syncs.emplace_back([&b, &stop] { b->service->serve(stop); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));

  Partition out;
  out.cut_s = cut_s;
  // The cut box reconnects within its back-off (at most 5 s), then the
  // repayment takes about T / N.
  out.after_s = 5 + cut_s / kBoxes + 5;
  const double cut_at = kWarm, cut_end = kWarm + cut_s, end = cut_end + out.after_s;
  const uint64_t base = 3'000'000;
  const limiter::GcraLimit l = limit();
  std::vector<uint64_t> by_cut_end(kKeys, 0), total(kKeys, 0);
  const Clock::time_point start = Clock::now();
  bool cut = false, restored = false;
  for (double t = 0; t < end; t += kStep) {
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    if (t > elapsed) std::this_thread::sleep_for(std::chrono::duration<double>(t - elapsed));
    if (!cut && t >= cut_at) relay.cut(cut = true);
    if (cut && !restored && t >= cut_end) relay.cut(!(restored = true));
    const time::Nanos now = wall_now();
    for (unsigned b = 0; b < kBoxes; ++b) {
      std::lock_guard lock(boxes[b]->writing);
      for (unsigned k = 0; k < kKeys; ++k) {
        if (!charge_gcra(boxes[b]->table, key(base + k), now, l).decision.admit) continue;
        boxes[b]->log.record(key(base + k), l.interval);
        ++total[k];
        if (t < cut_end) ++by_cut_end[k];
        if (b == 2 && t >= cut_at && t < cut_end) ++out.cut_box_admitted_in_cut;
      }
    }
  }
  std::this_thread::sleep_for(3 * kInterval);
  out.fallback_keys = boxes[2]->service->counters().fallback_keys.load();
  out.repaid_keys = boxes[2]->service->counters().repaid_keys.load();
  stop = true;
  for (auto& t : syncs) t.join();
  uint64_t syncs_done = 0, sync_us = 0;
  for (auto& b : boxes) {
    syncs_done += b->service->counters().syncs.load();
    sync_us += b->service->counters().sync_us_total.load();
  }
  const double round_trip = syncs_done != 0 ? static_cast<double>(sync_us) / syncs_done / 1e6 : 0;
  const double sync_bound = (kBoxes - 1) * (kBurst + kRate * (std::chrono::duration<double>(kInterval).count() + round_trip));
  out.bound_at_cut_end = (kBurst + kRate * cut_s) / kBoxes + sync_bound;
  out.bound_total = sync_bound;
  for (unsigned k = 0; k < kKeys; ++k) {
    out.worst_at_cut_end = std::max(out.worst_at_cut_end, static_cast<double>(by_cut_end[k]) - (kBurst + kRate * cut_end));
    out.worst_total = std::max(out.worst_total, static_cast<double>(total[k]) - (kBurst + kRate * end));
  }
  return out;
}

void print(const char* name, unsigned keys, double per_key, const Result& r) {
  const double adm = std::max<double>(1, static_cast<double>(r.admitted));
  std::printf("%-5s %5u keys x %4.1f/s: %8" PRIu64 " requests, %7" PRIu64
              " admitted (%6.1f/s) | Redis cpu %7.1f us/adm, %5.2f calls/adm, %6.2f cmds/adm | overshoot worst %+6.2f "
              "mean %+6.2f, bound %.2f | sync %.0f us, %" PRIu64 " failures\n",
              name, keys, per_key, r.requests, r.admitted, r.admitted / r.seconds, r.cpu_us / adm,
              static_cast<double>(r.cmds.calls) / adm, static_cast<double>(r.cmds.all) / adm, r.worst_overshoot,
              r.mean_overshoot, r.bound, r.mean_sync_us, r.sync_failures);
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 15, cut_s = 0;
  unsigned low_keys = 1000, high_keys = 200;
  bool check = false, replica = true, verbose = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto next = [&] { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--seconds") {
      seconds = std::atof(next());
    } else if (a == "--low-keys") {
      low_keys = static_cast<unsigned>(std::atoi(next()));
    } else if (a == "--high-keys") {
      high_keys = static_cast<unsigned>(std::atoi(next()));
    } else if (a == "--check") {
      check = true;
    } else if (a == "--verbose") {
      verbose = true;
    } else if (a == "--no-replica") {
      replica = false;
    } else if (a == "--partition") {
      cut_s = std::atof(next());
    } else {
      std::fprintf(stderr,
                   "usage: cluster_redis_cost [--seconds S] [--low-keys N] [--high-keys N] [--no-replica] "
                   "[--partition SECONDS] [--check]\n");
      return 2;
    }
  }
  if (seconds <= 0 || seconds > 600 || low_keys == 0 || high_keys == 0 || cut_s < 0 || cut_s > 600) {
    std::fprintf(stderr, "cluster_redis_cost: --seconds in (0, 600], --partition in [0, 600], key counts above 0\n");
    return 2;
  }
  const std::vector<uint16_t> port = redis_processes::free_ports(2);  // Redis, the cut box's relay
  if (port.size() < 2) {
    std::fprintf(stderr, "cluster_redis_cost: no free port on 127.0.0.1\n");
    return 1;
  }
  // Its Unix socket unused: the boxes speak TCP on loopback, as to a Redis
  // on another host (a system call per read and write, as there).
  RedisServer server({"--port", std::to_string(port[0]), "--bind", "127.0.0.1"});
  if (!server.start()) {
    std::fprintf(stderr, "cluster_redis_cost: %s\n", server.error().c_str());
    return 1;
  }
  const RedisEndpoint redis{"127.0.0.1", port[0], {}};
  std::printf("cluster_redis_cost: 3 boxes, burst %u + %.0f/s per key, sync every %lld ms, redis-server pid %d on "
              "127.0.0.1:%u, %.0f s a scenario%s\n",
              kBurst, kRate, static_cast<long long>(kInterval.count()), static_cast<int>(server.pid()), port[0],
              seconds, replica ? "" : ", no replica stream");
  const Result low = run(redis, low_keys, 0.6, seconds, replica, 1);
  print("low", low_keys, 0.6, low);
  const Result high = run(redis, high_keys, 50, seconds, replica, 2);
  print("high", high_keys, 50, high);
  std::optional<Partition> cut;
  if (cut_s > 0) {
    cut = partition(redis, port[1], cut_s, replica);
    std::printf("cut   box 3 of 3 cut %.0f s, 20 keys: excess by the cut's end worst %+.2f (bound (b + r T)/N + sync "
                "bound %.2f); over cut and %.0f s after worst %+.2f (bound %.2f) | the cut box admitted %" PRIu64
                " in the cut, fallback keys %" PRIu64 ", repaid keys %" PRIu64 "\n",
                cut->cut_s, cut->worst_at_cut_end, cut->bound_at_cut_end, cut->after_s, cut->worst_total,
                cut->bound_total, cut->cut_box_admitted_in_cut, cut->fallback_keys, cut->repaid_keys);
  }
  if (verbose) {
    RedisLink raw(redis, {});
    const std::string_view info[] = {"INFO", "commandstats"};
    std::printf("%s", std::string(raw.command(info, RedisLink::Clock::now()).reply.text()).c_str());
  }
  int rc = 0;
  if (check) {
    if (cut && (cut->worst_at_cut_end > cut->bound_at_cut_end || cut->worst_total > cut->bound_total ||
                cut->repaid_keys == 0)) {
      std::fprintf(stderr, "cluster_redis_cost: check failed: a %.0f s cut: excess %.2f by its end (bound %.2f), %.2f "
                           "over all (bound %.2f), %" PRIu64 " keys repaid\n",
                   cut->cut_s, cut->worst_at_cut_end, cut->bound_at_cut_end, cut->worst_total, cut->bound_total,
                   cut->repaid_keys);
      rc = 1;
    }
    for (const Result* r : {&low, &high}) {
      if (r->admitted == 0 || r->worst_overshoot > r->bound || r->sync_failures != 0) {
        std::fprintf(stderr, "cluster_redis_cost: check failed: %" PRIu64 " admitted, worst overshoot %.2f "
                             "(bound %.2f), %" PRIu64 " sync failures\n",
                     r->admitted, r->worst_overshoot, r->bound, r->sync_failures);
        rc = 1;
      }
    }
  }
  server.stop();
  return rc;
}

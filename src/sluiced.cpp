// sluiced: the appliance. Loads the policy, brings up the EAL and the two
// ports, starts one worker per lcore, and runs until SIGINT or SIGTERM, then
// stops the workers, prints what they counted and releases everything.
#include <grp.h>
#include <net/if.h>
#include <signal.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "control/control_server.h"
#include "control/metrics_server.h"
#include "control/policy_publisher.h"
#include "control/protocol.h"
#include "dataplane/policy_snapshot.h"
#include "dataplane/ports.h"
#include "dataplane/worker.h"
#include "limiter/compiled_policy.h"
#include "policy/policy_loader.h"
#include "sluiced_options.h"

namespace {

using namespace sluice;
using sluiced::ExitCode;

std::atomic<bool> g_stop{false};  // set by the signal handler; async-signal-safe
std::atomic<bool> g_reload{false};  // SIGHUP: reload the policy file
volatile sig_atomic_t g_signal = 0;

// Bucket kinds the shared table has room for over a run (each reload that
// names a new bucket takes one).
constexpr uint16_t kMaxBucketKinds = 256;

void on_signal(int sig) {
  if (sig == SIGHUP) {
    g_reload.store(true, std::memory_order_relaxed);
    return;
  }
  g_signal = sig;
  g_stop.store(true, std::memory_order_relaxed);
}

int fail(ExitCode code, const std::string& msg) {
  std::fprintf(stderr, "sluiced: %s\n", msg.c_str());
  return static_cast<int>(code);
}

struct LoadedPolicy {
  std::unique_ptr<dataplane::PolicySnapshot> snapshot;
  std::vector<std::string> errors;  // file:line:column: message, when there is no snapshot
};

std::string digest_hex(uint64_t digest) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, digest);
  return buf;
}

LoadedPolicy load_policy(const std::string& path, const limiter::KeyHasher& credential_hasher) {
  LoadedPolicy out;
  if (access(path.c_str(), R_OK) != 0) {
    out.errors.push_back(path + ": cannot read the policy file");
    return out;
  }
  policy::LoadResult loaded = policy::load_policy_file(path);
  std::vector<policy::PolicyError> errors = std::move(loaded.errors);
  std::optional<limiter::CompiledPolicy> compiled;
  if (loaded.policy) compiled = limiter::compile_policy(*loaded.policy, credential_hasher, errors);
  if (!errors.empty() || !compiled) {
    for (const auto& e : errors) out.errors.push_back(e.to_string());
    if (out.errors.empty()) out.errors.push_back(path + ": the policy does not compile");
    return out;
  }
  out.snapshot = std::make_unique<dataplane::PolicySnapshot>();
  out.snapshot->policy = std::move(*compiled);
  for (uint16_t p : out.snapshot->policy.source.service_ports) out.snapshot->service_ports.set(p);
  return out;
}

std::string port_list(const std::bitset<65536>& ports) {
  std::string s;
  for (size_t p = 1; p < ports.size(); ++p) {
    if (ports.test(p)) s += (s.empty() ? "" : ",") + std::to_string(p);
  }
  return s;
}

int run(const sluiced::Options& o) {
  const limiter::KeyHasher bucket_hasher = limiter::KeyHasher::random();
  // Credential digests must match the credential file's across restarts; the
  // control plane (issue 5) keeps that secret in --state-dir. Until then a
  // per-process secret keys them, which is exact within one run.
  const limiter::KeyHasher credential_hasher = limiter::KeyHasher::random();

  LoadedPolicy loaded = load_policy(o.config, credential_hasher);
  if (!loaded.snapshot) {
    for (const std::string& e : loaded.errors) std::fprintf(stderr, "%s\n", e.c_str());
    return fail(ExitCode::kConfig, "the policy " + o.config + " is not usable; nothing started");
  }
  dataplane::PolicySnapshot& snap = *loaded.snapshot;
  if (o.service_ports) {
    snap.service_ports.reset();
    for (uint16_t p : *o.service_ports) snap.service_ports.set(p);
  }
  if (snap.service_ports.none()) {
    return fail(ExitCode::kConfig, o.config + ": no service ports (set service_ports in the policy or --service-ports)");
  }
  if (o.mode == sluiced::Options::Mode::kCheckConfig) {
    std::printf("%s: ok: policy '%s', digest %016" PRIx64 ", %zu rules, %zu buckets, service ports %s\n",
                o.config.c_str(), snap.policy.source.name.c_str(), snap.policy.digest, snap.policy.rules.size(),
                snap.policy.buckets.size(), port_list(snap.service_ports).c_str());
    return 0;
  }

  if (o.af_packet) {
    for (const std::string& ifname : {o.client_if, o.origin_if}) {
      if (if_nametoindex(ifname.c_str()) == 0) {
        return fail(ExitCode::kInterface, "interface '" + ifname + "' does not exist in this network namespace");
      }
    }
    if (geteuid() != 0) return fail(ExitCode::kEal, "--af-packet needs root (raw sockets on both interfaces)");
  }

  // The EAL's own command line.
  std::vector<std::string> eal = {"sluiced"};
  if (o.af_packet) {
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    eal.insert(eal.end(), {"--no-huge", "--no-shconf", "--no-pci", "-m", std::to_string(o.memory_mb),
                           "--log-level", "*:warning"});
    // Every lcore may run on every CPU: with AF_PACKET the box is usually
    // shared (CI, a demo), and the kernel places the threads best.
    eal.push_back("--lcores=(0-" + std::to_string(o.workers) + ")@(0-" + std::to_string(cpus > 0 ? cpus - 1 : 0) + ")");
    const std::string q = ",qpairs=" + std::to_string(o.workers);
    eal.push_back("--vdev=net_af_packet0,iface=" + o.client_if + q);
    eal.push_back("--vdev=net_af_packet1,iface=" + o.origin_if + q);
  } else {
    eal.insert(eal.end(), o.eal_args.begin(), o.eal_args.end());
  }
  std::vector<char*> argv;
  for (std::string& s : eal) argv.push_back(s.data());
  argv.push_back(nullptr);
  if (rte_eal_init(static_cast<int>(argv.size() - 1), argv.data()) < 0) {
    return fail(ExitCode::kEal, std::string("DPDK would not start: ") + rte_strerror(rte_errno));
  }
  auto cleanup_eal = [] { rte_eal_cleanup(); };

  if (rte_lcore_count() < o.workers + 1) {
    cleanup_eal();
    return fail(ExitCode::kUsage, std::to_string(o.workers) + " workers need " + std::to_string(o.workers + 1) +
                                      " lcores (one main), the EAL has " + std::to_string(rte_lcore_count()));
  }
  uint16_t client_port = o.client_port, origin_port = o.origin_port;
  if (o.af_packet) {
    if (rte_eth_dev_get_port_by_name("net_af_packet0", &client_port) != 0 ||
        rte_eth_dev_get_port_by_name("net_af_packet1", &origin_port) != 0) {
      cleanup_eal();
      return fail(ExitCode::kInterface, "the AF_PACKET ports did not come up (is the interface up?)");
    }
  } else {
    for (uint16_t p : {client_port, origin_port}) {
      if (!rte_eth_dev_is_valid_port(p)) {
        cleanup_eal();
        return fail(ExitCode::kInterface, "DPDK port " + std::to_string(p) + " does not exist (" +
                                              std::to_string(rte_eth_dev_count_avail()) + " ports available)");
      }
    }
  }

  const dataplane::PortSetup port_setup{static_cast<uint16_t>(o.workers), 1024, 1024};
  const unsigned ring_size = 4096;
  const unsigned mbufs = o.workers * (2 * (port_setup.rx_descriptors + port_setup.tx_descriptors) + ring_size +
                                      4 * dataplane::kBurst) + 4096;
  rte_mempool* pool = rte_pktmbuf_pool_create("sluice_mbufs", mbufs, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
                                              static_cast<int>(rte_socket_id()));
  if (pool == nullptr) {
    cleanup_eal();
    return fail(ExitCode::kNoMemory, "no memory for " + std::to_string(mbufs) +
                                         " packet buffers; raise --memory (or the huge pages) or lower --workers");
  }
  dataplane::PortInfo ports[2];
  for (int i = 0; i < 2; ++i) {
    const std::string err = dataplane::start_port(i == 0 ? client_port : origin_port, port_setup, pool, ports[i]);
    if (!err.empty()) {
      if (i == 1) dataplane::stop_port(client_port);
      cleanup_eal();
      return fail(ExitCode::kInterface, err);
    }
  }
  auto stop_ports = [&] {
    dataplane::stop_port(client_port);
    dataplane::stop_port(origin_port);
  };

  // The limiter's shared state.
  std::unique_ptr<limiter::BucketTable> buckets, records;
  std::unique_ptr<limiter::DigestMap> runs, users;
  try {
    buckets = std::make_unique<limiter::BucketTable>(limiter::BucketTable::Options{
        .capacity = o.buckets, .bucket_kinds = kMaxBucketKinds});
    records = std::make_unique<limiter::BucketTable>(limiter::BucketTable::Options{
        .capacity = std::max<size_t>(o.buckets / 16, 4096), .bucket_kinds = 1,
        .words = std::max(2u, (snap.policy.max_slots + 1) & ~1u)});
    runs = std::make_unique<limiter::DigestMap>(1 << 16);
    users = std::make_unique<limiter::DigestMap>(1 << 16);
  } catch (const std::bad_alloc&) {
    stop_ports();
    cleanup_eal();
    return fail(ExitCode::kNoMemory, "no memory for " + std::to_string(o.buckets) + " buckets; lower --buckets");
  }
  limiter::LimiterState state{*buckets, *records, *runs, *users, bucket_hasher, credential_hasher};

  time::TscClock clock;
  std::atomic<const dataplane::PolicySnapshot*> published{nullptr};

  const size_t qsbr_size = rte_rcu_qsbr_get_memsize(o.workers);
  auto* qsbr = static_cast<rte_rcu_qsbr*>(rte_zmalloc("sluice_qsbr", qsbr_size, RTE_CACHE_LINE_SIZE));
  if (qsbr == nullptr || rte_rcu_qsbr_init(qsbr, o.workers) != 0) {
    stop_ports();
    cleanup_eal();
    return fail(ExitCode::kNoMemory, "no memory for the RCU state");
  }
  std::vector<rte_ring*> inboxes(o.workers, nullptr);
  if (o.workers > 1) {
    for (unsigned i = 0; i < o.workers; ++i) {
      inboxes[i] = rte_ring_create(("sluice_inbox" + std::to_string(i)).c_str(), ring_size,
                                   static_cast<int>(rte_socket_id()), RING_F_SC_DEQ);
      if (inboxes[i] == nullptr) {
        stop_ports();
        cleanup_eal();
        return fail(ExitCode::kNoMemory, "no memory for the hand-off rings");
      }
    }
  }

  control::PolicyPublisher publisher(
      published, qsbr,
      {snap.policy.stream.head.max_head_bytes, snap.policy.stream.head.max_fields,
       std::max(2u, (snap.policy.max_slots + 1) & ~1u), kMaxBucketKinds});
  const uint32_t start_max_head = snap.policy.stream.head.max_head_bytes;
  const uint16_t start_max_fields = snap.policy.stream.head.max_fields;
  publisher.start(std::move(loaded.snapshot), o.config);
  // Loads, checks and publishes a policy file; the reasons it was refused,
  // each a line, or nothing.
  auto reload_from = [&](const std::string& file) -> std::vector<std::string> {
    LoadedPolicy next = load_policy(file, credential_hasher);
    if (!next.snapshot) return next.errors;
    if (o.service_ports) {  // the command line wins over every policy, reloaded ones too
      next.snapshot->service_ports.reset();
      for (uint16_t port : *o.service_ports) next.snapshot->service_ports.set(port);
    }
    if (next.snapshot->service_ports.none()) return {file + ": no service ports"};
    return publisher.reload(std::move(next.snapshot), file);
  };

  const dataplane::WorkerShared shared{&published, qsbr, inboxes, &g_stop, &clock};
  auto counters = std::make_unique<dataplane::WorkerCounters[]>(o.workers);
  std::vector<std::unique_ptr<dataplane::Worker>> workers;
  try {
    for (unsigned i = 0; i < o.workers; ++i) {
      dataplane::WorkerSetup ws;
      ws.index = i;
      ws.workers = o.workers;
      ws.client_port = client_port;
      ws.origin_port = origin_port;
      ws.pool = pool;
      ws.idle_sleep_us = o.idle_sleep_us.value_or(o.af_packet ? 20 : 0);
      ws.engine.flows = o.flows;
      ws.engine.contexts = o.contexts;
      ws.engine.timeouts.idle = time::Nanos{o.idle_timeout_s} * time::kNanosPerSecond;
      ws.engine.timeouts.half_open = time::Nanos{o.half_open_timeout_s} * time::kNanosPerSecond;
      ws.engine.max_head_bytes = start_max_head;
      ws.engine.max_fields = start_max_fields;
      workers.push_back(std::make_unique<dataplane::Worker>(ws, shared, state, counters[i]));
    }
  } catch (const std::bad_alloc&) {
    stop_ports();
    cleanup_eal();
    return fail(ExitCode::kNoMemory, "no memory for the flow tables; lower --flows or --contexts");
  }

  // The control socket, before anything runs: a box that cannot be operated
  // does not start.
  gid_t control_gid = static_cast<gid_t>(-1);
  if (!o.control_group.empty()) {
    const group* g = getgrnam(o.control_group.c_str());
    if (g == nullptr) {
      stop_ports();
      cleanup_eal();
      return fail(ExitCode::kUsage, "--control-group: no group named '" + o.control_group + "'");
    }
    control_gid = g->gr_gid;
  }
  control::ControlServer control_server;
  if (const std::string err = control_server.open(o.control_socket, control_gid); !err.empty()) {
    stop_ports();
    cleanup_eal();
    return fail(ExitCode::kControl, err);
  }
  control::MetricsServer metrics_server;
  if (!o.metrics.empty()) {
    if (const std::string err = metrics_server.open(o.metrics); !err.empty()) {
      stop_ports();
      cleanup_eal();
      return fail(ExitCode::kControl, err);
    }
  }
  // Prometheus: every worker counter as sluice_<name>_total (summed, and per
  // worker), the flows tracked, the policy generation.
  const control::MetricsServer::Render render_metrics = [&]() -> std::string {
    std::string m;
    auto line = [&m](const std::string& s) { m += s + '\n'; };
#define SLUICE_METRIC(name, help)                                                                    \
  {                                                                                                  \
    line(std::string("# HELP sluice_") + #name + "_total " + help);                                  \
    line(std::string("# TYPE sluice_") + #name + "_total counter");                                  \
    for (unsigned i = 0; i < o.workers; ++i) {                                                       \
      line(std::string("sluice_") + #name + "_total{worker=\"" + std::to_string(i) + "\"} " +        \
           std::to_string(counters[i].name.get()));                                                  \
    }                                                                                                \
  }
    SLUICE_WORKER_COUNTERS(SLUICE_METRIC)
#undef SLUICE_METRIC
    line("# HELP sluice_flows_active TCP flows tracked");
    line("# TYPE sluice_flows_active gauge");
    for (unsigned i = 0; i < o.workers; ++i) {
      line("sluice_flows_active{worker=\"" + std::to_string(i) + "\"} " +
           std::to_string(counters[i].flows_active.load(std::memory_order_relaxed)));
    }
    const dataplane::PolicySnapshot& cur = publisher.current();
    line("# HELP sluice_policy_generation policies published since start (0: the first)");
    line("# TYPE sluice_policy_generation gauge");
    line("sluice_policy_generation{policy=\"" + cur.policy.source.name + "\"} " + std::to_string(cur.generation));
    return m;
  };
  const auto started = std::chrono::steady_clock::now();
  const control::ControlServer::Handler handler = [&](const control::JsonValue& request) -> std::string {
    const control::JsonValue* cmd = request.get("cmd");
    if (cmd == nullptr || cmd->string() == nullptr) {
      return control::error_response(control::ErrorCode::kBadRequest, "a request names its command in \"cmd\"");
    }
    control::JsonWriter w;
    w.begin_object().key("v").value(control::kProtocolVersion).key("ok").value(true);
    const dataplane::PolicySnapshot& cur = publisher.current();
    const std::string policy_file = publisher.file();
    if (*cmd->string() == "status") {
      const auto up = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started);
      uint64_t flows = 0;
      for (unsigned i = 0; i < o.workers; ++i) flows += counters[i].flows_active.load(std::memory_order_relaxed);
      w.key("version").value(SLUICE_VERSION).key("uptime_s").value(static_cast<uint64_t>(up.count()));
      w.key("policy").begin_object().key("name").value(cur.policy.source.name).key("file").value(policy_file);
      w.key("generation").value(cur.generation);
      const std::string digest = digest_hex(cur.policy.digest);
      w.key("digest").value(digest).key("service_ports").value(port_list(cur.service_ports)).end_object();
      w.key("workers").value(o.workers).key("flows").value(flows);
      w.key("ports").begin_array();
      for (int i = 0; i < 2; ++i) {
        w.begin_object().key("side").value(i == 0 ? "client" : "origin").key("name").value(ports[i].name);
        w.key("mac").value(ports[i].mac).key("link_up").value(ports[i].link_up).end_object();
      }
      w.end_array();
    } else if (*cmd->string() == "stats") {
      w.key("counters").begin_object();
#define SLUICE_SUM_COUNTER(name, help)                                                       \
  {                                                                                          \
    uint64_t total = 0;                                                                      \
    for (unsigned i = 0; i < o.workers; ++i) total += counters[i].name.get();                \
    w.key(#name).value(total);                                                               \
  }
      SLUICE_WORKER_COUNTERS(SLUICE_SUM_COUNTER)
#undef SLUICE_SUM_COUNTER
      w.end_object();
      w.key("help").begin_object();
#define SLUICE_HELP_COUNTER(name, help) w.key(#name).value(help);
      SLUICE_WORKER_COUNTERS(SLUICE_HELP_COUNTER)
#undef SLUICE_HELP_COUNTER
      w.end_object();
      w.key("workers").begin_array();
      for (unsigned i = 0; i < o.workers; ++i) {
        w.begin_object().key("flows_active").value(counters[i].flows_active.load(std::memory_order_relaxed));
#define SLUICE_WORKER_COUNTER(name, help) w.key(#name).value(counters[i].name.get());
        SLUICE_WORKER_COUNTERS(SLUICE_WORKER_COUNTER)
#undef SLUICE_WORKER_COUNTER
        w.end_object();
      }
      w.end_array();
    } else if (*cmd->string() == "policy.show") {
      const std::string digest = digest_hex(cur.policy.digest);
      w.key("name").value(cur.policy.source.name).key("file").value(policy_file).key("digest").value(digest);
      w.key("generation").value(cur.generation);
      w.key("service_ports").value(port_list(cur.service_ports));
      w.key("buckets").begin_array();
      for (const auto& b : cur.policy.buckets) w.value(b.name);
      w.end_array().key("rules").begin_array();
      for (const auto& r : cur.policy.rules) w.value(r.name);
      w.end_array();
    } else if (*cmd->string() == "policy.check") {
      const control::JsonValue* file = request.get("file");
      if (file == nullptr || file->string() == nullptr || file->string()->empty()) {
        return control::error_response(control::ErrorCode::kBadRequest, "policy.check needs \"file\": a path");
      }
      // Checked with the running daemon's own loader and compiler, so what
      // passes here is what a reload would accept.
      const LoadedPolicy checked = load_policy(*file->string(), credential_hasher);
      if (!checked.snapshot) {
        return control::invalid_policy_response(*file->string() + " is not a usable policy", checked.errors);
      }
      w.key("file").value(*file->string()).key("name").value(checked.snapshot->policy.source.name);
      w.key("digest").value(digest_hex(checked.snapshot->policy.digest));
      w.key("rules").value(checked.snapshot->policy.rules.size());
      w.key("buckets").value(checked.snapshot->policy.buckets.size());
    } else if (*cmd->string() == "policy.reload") {
      const control::JsonValue* file = request.get("file");
      if (file != nullptr && (file->string() == nullptr || file->string()->empty())) {
        return control::error_response(control::ErrorCode::kBadRequest, "\"file\" is a path");
      }
      const std::string path = file != nullptr ? *file->string() : policy_file;
      const std::vector<std::string> refused = reload_from(path);
      if (!refused.empty()) {
        return control::invalid_policy_response(path + " was not loaded; the running policy is unchanged", refused);
      }
      const dataplane::PolicySnapshot& now_active = publisher.current();
      const std::string digest = digest_hex(now_active.policy.digest);
      std::printf("sluiced: policy '%s' from %s (digest %s, generation %" PRIu64 ") published\n",
                  now_active.policy.source.name.c_str(), path.c_str(), digest.c_str(), now_active.generation);
      std::fflush(stdout);
      w.key("name").value(now_active.policy.source.name).key("file").value(path).key("digest").value(digest);
      w.key("generation").value(now_active.generation);
    } else {
      return control::error_response(control::ErrorCode::kUnknownCommand,
                                      "unknown command '" + *cmd->string() +
                                          "' (this sluiced knows status, stats, policy.show, policy.check, policy.reload)");
    }
    w.end_object();
    return w.str();
  };

  if (!o.quiet) {
    std::printf("sluiced %s\n", SLUICE_VERSION);
    for (int i = 0; i < 2; ++i) {
      const auto& p = ports[i];
      std::printf("  %s port %u: %s (%s) mac %s link %s%s, %u queue%s%s\n", i == 0 ? "client" : "origin", p.id,
                  p.name.c_str(), p.driver.c_str(), p.mac.c_str(), p.link_up ? "up" : "down",
                  p.speed_mbps != 0 && p.link_up ? (" " + std::to_string(p.speed_mbps) + " Mb/s").c_str() : "",
                  o.workers, o.workers == 1 ? "" : "s", p.rss ? ", symmetric RSS" : "");
    }
    std::printf("  workers: %u (flows %zu, contexts %zu each), buckets %zu\n", o.workers, o.flows, o.contexts,
                buckets->capacity());
    std::printf("  policy: '%s' from %s, digest %016" PRIx64 ", %zu rules, %zu buckets, service ports %s\n",
                snap.policy.source.name.c_str(), o.config.c_str(), snap.policy.digest, snap.policy.rules.size(),
                snap.policy.buckets.size(), port_list(snap.service_ports).c_str());
    std::printf("  clock: TSC%s\n", clock.invariant_tsc() ? " (invariant)" : " (not invariant: re-anchored every second)");
    std::printf("  control: %s (sluicectl --socket %s status)\n", control_server.path().c_str(),
                control_server.path().c_str());
    if (!o.metrics.empty()) std::printf("  metrics: http://%s/metrics\n", o.metrics.c_str());
    std::printf("sluiced: ready\n");
    std::fflush(stdout);
  }

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  unsigned lcore = rte_get_next_lcore(-1, 1, 0);
  for (unsigned i = 0; i < o.workers; ++i, lcore = rte_get_next_lcore(lcore, 1, 0)) {
    rte_eal_remote_launch(
        [](void* w) -> int {
          static_cast<dataplane::Worker*>(w)->run();
          return 0;
        },
        workers[i].get(), lcore);
  }

  std::thread control_thread([&] { control_server.serve(g_stop, handler); });
  std::thread metrics_thread;
  if (!o.metrics.empty()) metrics_thread = std::thread([&] { metrics_server.serve(g_stop, render_metrics); });

  auto last_anchor = std::chrono::steady_clock::now();
  while (!g_stop.load(std::memory_order_relaxed)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (g_reload.exchange(false)) {
      const std::string file = publisher.file();
      const std::vector<std::string> refused = reload_from(file);
      if (refused.empty()) {
        std::printf("sluiced: SIGHUP: policy '%s' reloaded from %s (generation %" PRIu64 ")\n",
                    publisher.current().policy.source.name.c_str(), file.c_str(), publisher.current().generation);
      } else {
        for (const std::string& line : refused) std::fprintf(stderr, "%s\n", line.c_str());
        std::fprintf(stderr, "sluiced: SIGHUP: %s not loaded; the running policy is unchanged\n", file.c_str());
      }
      std::fflush(stdout);
    }
    if (std::chrono::steady_clock::now() - last_anchor >= std::chrono::seconds(1)) {
      clock.reanchor();
      last_anchor = std::chrono::steady_clock::now();
    }
  }
  rte_eal_mp_wait_lcore();
  control_thread.join();
  if (metrics_thread.joinable()) metrics_thread.join();

  if (!o.quiet) {
    std::printf("sluiced: stopping on %s\n", g_signal == SIGINT ? "SIGINT" : "SIGTERM");
#define SLUICE_PRINT_COUNTER(name, help)                                                  \
  {                                                                                       \
    uint64_t total = 0;                                                                   \
    for (unsigned i = 0; i < o.workers; ++i) total += counters[i].name.get();             \
    if (total != 0) std::printf("  %-20s %12" PRIu64 "  %s\n", #name, total, help);       \
  }
    SLUICE_WORKER_COUNTERS(SLUICE_PRINT_COUNTER)
#undef SLUICE_PRINT_COUNTER
    std::fflush(stdout);
  }
  workers.clear();
  for (rte_ring* r : inboxes) rte_ring_free(r);
  rte_free(qsbr);
  stop_ports();
  rte_mempool_free(pool);
  cleanup_eal();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const sluiced::ParseResult parsed = sluiced::parse_options(argc, argv);
  if (!parsed.error.empty()) return fail(ExitCode::kUsage, parsed.error + " (see sluiced --help)");
  const sluiced::Options& o = parsed.options;
  switch (o.mode) {
    case sluiced::Options::Mode::kHelp:
      std::fputs(sluiced::usage_text(), stdout);
      return 0;
    case sluiced::Options::Mode::kVersion:
      std::printf("sluiced %s\n", SLUICE_VERSION);
      return 0;
    default:
      break;
  }
  try {
    return run(o);
  } catch (const std::bad_alloc&) {
    return fail(ExitCode::kNoMemory, "out of memory");
  } catch (const std::exception& e) {
    return fail(ExitCode::kRuntime, e.what());
  }
}

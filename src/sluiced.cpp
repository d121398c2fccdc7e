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

#include "control/command_table.h"
#include "control/control_server.h"
#include "control/credential_registry.h"
#include "control/metrics_server.h"
#include "control/policy_publisher.h"
#include "control/protocol.h"
#include "control/reclaimer.h"
#include "control/run_journal.h"
#include "control/run_registry.h"
#include "control/state_dir.h"
#include "control/telemetry.h"
#include "dataplane/policy_snapshot.h"
#include "dataplane/ports.h"
#include "dataplane/worker.h"
#include "limiter/compiled_policy.h"
#include "limiter/credential_slots.h"
#include "sluiced_commands.h"
#include "sluiced_metrics.h"
#include "sluiced_options.h"
#include "sluiced_policy.h"

namespace {

using namespace sluice;
using sluiced::ExitCode;
using sluiced::LoadedPolicy;
using sluiced::digest_hex;
using sluiced::load_policy;
using sluiced::port_list;

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

// A policy file as this sluiced runs it: --service-ports wins over the
// file's (for reloaded files too), and a policy with none is refused.
LoadedPolicy load_with_ports(const sluiced::Options& o, const std::string& file, const limiter::KeyHasher& hasher) {
  LoadedPolicy loaded = load_policy(file, hasher);
  if (!loaded.snapshot) return loaded;
  if (o.service_ports) {
    loaded.snapshot->service_ports.reset();
    for (uint16_t p : *o.service_ports) loaded.snapshot->service_ports.set(p);
  }
  if (loaded.snapshot->service_ports.none()) {
    loaded.snapshot.reset();
    loaded.errors.push_back(file + ": no service ports (set service_ports in the policy or --service-ports)");
  }
  return loaded;
}

int policy_unusable(const LoadedPolicy& loaded, const std::string& file) {
  for (const std::string& e : loaded.errors) std::fprintf(stderr, "%s\n", e.c_str());
  return fail(ExitCode::kConfig, "the policy " + file + " is not usable; nothing started");
}

// --check-config: the policy alone, hashed with a throw-away secret (the
// anonymous tokens' digests are all that depends on it).
int check_config(const sluiced::Options& o) {
  const LoadedPolicy loaded = load_with_ports(o, o.config, limiter::KeyHasher::random());
  if (!loaded.snapshot) return policy_unusable(loaded, o.config);
  const dataplane::PolicySnapshot& snap = *loaded.snapshot;
  std::printf("%s: ok: policy '%s', digest %016" PRIx64 ", %zu rules, %zu buckets, service ports %s\n",
              o.config.c_str(), snap.policy.source.name.c_str(), snap.policy.digest, snap.policy.rules.size(),
              snap.policy.buckets.size(), port_list(snap.service_ports).c_str());
  return 0;
}

int run(const sluiced::Options& o) {
  const limiter::KeyHasher bucket_hasher = limiter::KeyHasher::random();

  // The cheap checks first, so a typo costs nothing and touches no state:
  // the policy (compiled here with a throw-away secret), the interfaces.
  if (const LoadedPolicy checked = load_with_ports(o, o.config, limiter::KeyHasher::random()); !checked.snapshot) {
    return policy_unusable(checked, o.config);
  }
  if (o.af_packet) {
    for (const std::string& ifname : {o.client_if, o.origin_if}) {
      if (if_nametoindex(ifname.c_str()) == 0) {
        return fail(ExitCode::kInterface, "interface '" + ifname + "' does not exist in this network namespace");
      }
    }
    if (geteuid() != 0) return fail(ExitCode::kEal, "--af-packet needs root (raw sockets on both interfaces)");
  }

  // The state directory: credential digests must match the credential map's
  // across restarts, so they are keyed with a secret kept there; live runs
  // are journalled there.
  if (const std::string err = control::prepare_state_dir(o.state_dir); !err.empty()) {
    return fail(ExitCode::kState, "--state-dir " + o.state_dir + ": " + err);
  }
  control::StateDirLock state_lock;
  if (const std::string err = state_lock.acquire(o.state_dir); !err.empty()) {
    return fail(ExitCode::kState, "--state-dir: " + err);
  }
  const control::Secret secret = control::load_or_create_secret(o.state_dir, "credential.secret");
  if (!secret.error.empty()) return fail(ExitCode::kState, secret.error);
  const limiter::KeyHasher credential_hasher{std::span<const uint8_t, limiter::KeyHasher::kSecretSize>(secret.bytes)};
  control::RunJournal journal;
  control::RunJournal::Replay replay = journal.open(o.state_dir);
  if (!replay.error.empty()) return fail(ExitCode::kState, replay.error);
  for (const std::string& w : replay.warnings) std::fprintf(stderr, "sluiced: warning: %s\n", w.c_str());

  LoadedPolicy loaded = load_with_ports(o, o.config, credential_hasher);
  if (!loaded.snapshot) return policy_unusable(loaded, o.config);  // changed since the check above
  dataplane::PolicySnapshot& snap = *loaded.snapshot;

  // The EAL's own command line.
  std::vector<std::string> eal = {"sluiced"};
  if (o.af_packet) {
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    // A prefix of its own puts the telemetry socket at a known place:
    // /var/run/dpdk/sluice/dpdk_telemetry.v2.
    eal.insert(eal.end(), {"--no-huge", "--no-shconf", "--no-pci", "-m", std::to_string(o.memory_mb),
                           "--log-level", "*:warning", "--file-prefix", "sluice"});
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
    runs = std::make_unique<limiter::DigestMap>(o.runs);
    users = std::make_unique<limiter::DigestMap>(o.credentials);
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
    LoadedPolicy next = load_with_ports(o, file, credential_hasher);
    if (!next.snapshot) return next.errors;
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
  // What the control plane owns and publishes to the workers: live runs,
  // credentials, and the reclamation of idle buckets.
  auto wait_for_readers = [qsbr] { rte_rcu_qsbr_synchronize(qsbr, RTE_QSBR_THRID_INVALID); };
  control::RunRegistry run_registry(*runs, credential_hasher, &journal, wait_for_readers);
  for (const std::string& w : run_registry.restore(replay.live)) std::fprintf(stderr, "sluiced: warning: %s\n", w.c_str());
  control::CredentialRegistry credential_registry(*users, credential_hasher, o.state_dir, wait_for_readers);
  if (const std::vector<std::string> errors = credential_registry.restore(); !errors.empty()) {
    for (const std::string& e : errors) std::fprintf(stderr, "%s\n", e.c_str());
    stop_ports();
    cleanup_eal();
    return fail(ExitCode::kState, "the credential map in " + o.state_dir + " is not usable; fix or remove it");
  }
  control::Reclaimer reclaimer(
      {{"buckets", buckets.get(),
        [&] {
          std::shared_ptr<const dataplane::PolicySnapshot> p = publisher.current();
          const time::Nanos now = clock.now();
          return limiter::BucketTable::IdlePredicate([p, now](uint16_t kind, const uint64_t* words) {
            return limiter::bucket_idle(p->policy, kind, words, now);
          });
        }},
       {"credential_slots", records.get(),
        [&] {
          std::shared_ptr<const dataplane::PolicySnapshot> p = publisher.current();
          const time::Nanos now = clock.now();
          time::Nanos quiet = 0;
          for (const limiter::CompiledRule& r : p->policy.rules) quiet = std::max(quiet, r.slots_quiet);
          const unsigned slots = std::max(1u, p->policy.max_slots);
          return limiter::BucketTable::IdlePredicate([slots, quiet, now](uint16_t, const uint64_t* words) {
            return limiter::credential_record_idle(words, slots, quiet, now);
          });
        }}},
      wait_for_readers);

  sluiced::Daemon daemon;
  daemon.workers = o.workers;
  daemon.counters = counters.get();
  daemon.ports = ports;
  daemon.started = std::chrono::steady_clock::now();
  daemon.state_dir = o.state_dir;
  daemon.publisher = &publisher;
  daemon.limiter = &state;
  daemon.clock = &clock;
  daemon.runs = &run_registry;
  daemon.credentials = &credential_registry;
  daemon.reclaimer = &reclaimer;
  daemon.check_policy = [&](const std::string& file) { return load_with_ports(o, file, credential_hasher); };
  daemon.reload_policy = reload_from;
  control::CommandTable commands;
  sluiced::add_commands(commands, daemon);
  // The same counters on DPDK's telemetry socket (dpdk-telemetry.py).
  control::TelemetrySource telemetry;
  telemetry.stats = [&] {
    std::vector<std::pair<std::string, uint64_t>> out;
#define SLUICE_TELEMETRY_COUNTER(name, help)                                  \
  {                                                                           \
    uint64_t total = 0;                                                       \
    for (unsigned i = 0; i < o.workers; ++i) total += counters[i].name.get(); \
    out.emplace_back(#name, total);                                           \
  }
    SLUICE_WORKER_COUNTERS(SLUICE_TELEMETRY_COUNTER)
#undef SLUICE_TELEMETRY_COUNTER
    uint64_t flows = 0;
    for (unsigned i = 0; i < o.workers; ++i) flows += counters[i].flows_active.load(std::memory_order_relaxed);
    out.emplace_back("flows_active", flows);
    out.emplace_back("runs_live", run_registry.size());
    out.emplace_back("credentials", credential_registry.summary().credentials);
    return out;
  };
  telemetry.status = [&] {
    const std::shared_ptr<const dataplane::PolicySnapshot> cur_held = publisher.current();
    const dataplane::PolicySnapshot& cur = *cur_held;
    return std::vector<std::pair<std::string, std::string>>{
        {"version", SLUICE_VERSION},
        {"policy", cur.policy.source.name},
        {"policy_digest", digest_hex(cur.policy.digest)},
        {"policy_generation", std::to_string(cur.generation)},
        {"workers", std::to_string(o.workers)},
        {"control_socket", control_server.path()},
        {"state_dir", o.state_dir}};
  };
  telemetry.runs = [&] {
    std::vector<std::pair<std::string, uint64_t>> out;
    for (const control::LiveRun& r : run_registry.list()) out.emplace_back(r.token, r.budget);
    return out;
  };
  if (const std::string err = control::register_telemetry(std::move(telemetry)); !err.empty()) {
    std::fprintf(stderr, "sluiced: warning: no telemetry commands: %s\n", err.c_str());
  }
  const control::ControlServer::Handler handler = [&](const control::JsonValue& request) {
    return commands.dispatch(request);
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
    std::printf("  telemetry: %s/dpdk_telemetry.v2 (/sluice/stats, /sluice/status, /sluice/runs)\n",
                rte_eal_get_runtime_dir());
    std::printf("  state: %s (%zu live runs restored, %zu credentials)\n", o.state_dir.c_str(), run_registry.size(),
                credential_registry.summary().credentials);
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
  if (!o.metrics.empty()) {
    metrics_thread = std::thread([&] { metrics_server.serve(g_stop, [&] { return sluiced::render_metrics(daemon); }); });
  }
  // Every region of both tables once every 10 s: a bucket is dropped within
  // 10 s of becoming droppable (RF08's 10 minutes idle, TB07's quiet time).
  std::thread reclaimer_thread([&] { reclaimer.serve(g_stop, std::chrono::seconds(10)); });

  auto last_anchor = std::chrono::steady_clock::now();
  while (!g_stop.load(std::memory_order_relaxed)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (g_reload.exchange(false)) {
      const std::string file = publisher.file();
      const std::vector<std::string> refused = reload_from(file);
      if (refused.empty()) {
        std::printf("sluiced: SIGHUP: policy '%s' reloaded from %s (generation %" PRIu64 ")\n",
                    publisher.current()->policy.source.name.c_str(), file.c_str(), publisher.current()->generation);
      } else {
        for (const std::string& line : refused) std::fprintf(stderr, "%s\n", line.c_str());
        std::fprintf(stderr, "sluiced: SIGHUP: %s not loaded; the running policy is unchanged\n", file.c_str());
      }
      std::fflush(stdout);
    }
    if (std::chrono::steady_clock::now() - last_anchor >= std::chrono::seconds(1)) {
      clock.reanchor();
      last_anchor = std::chrono::steady_clock::now();
      // Retired policies no request in flight may still use.
      uint64_t oldest = ~uint64_t{0};
      for (unsigned i = 0; i < o.workers; ++i) {
        oldest = std::min(oldest, counters[i].oldest_policy_generation.load(std::memory_order_relaxed));
      }
      (void)publisher.collect(oldest);
    }
  }
  rte_eal_mp_wait_lcore();
  control_thread.join();
  reclaimer_thread.join();
  if (metrics_thread.joinable()) metrics_thread.join();
  control::unregister_telemetry();

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
    return o.mode == sluiced::Options::Mode::kCheckConfig ? check_config(o) : run(o);
  } catch (const std::bad_alloc&) {
    return fail(ExitCode::kNoMemory, "out of memory");
  } catch (const std::exception& e) {
    return fail(ExitCode::kRuntime, e.what());
  }
}

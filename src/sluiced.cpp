// sluiced: the appliance. Loads the policy, brings up the EAL and the two
// ports, starts one worker per lcore, and runs until SIGINT or SIGTERM, then
// stops the workers, prints what they counted and releases everything.
//
// Start-up is a sequence of steps (Appliance::start), each acquiring into
// members of Appliance that own what they hold (sluiced_guards.h). The
// members are declared in the order the steps acquire them, so whatever ends
// a run (a step that fails, an exception, a signal) releases exactly what was
// acquired, once, in reverse order. A start-up failure is reported after that
// release: one line on stderr and its own exit code (sluiced --help).
#include <grp.h>
#include <net/if.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_rcu_qsbr.h>
#include <signal.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <future>
#include <thread>
#include <vector>

#include "control/command_table.h"
#include "control/bucket_snapshot.h"
#include "control/control_server.h"
#include "control/credential_file.h"
#include "control/credential_registry.h"
#include "control/log.h"
#include "control/metrics_server.h"
#include "control/policy_publisher.h"
#include "control/protocol.h"
#include "control/reclaimer.h"
#include "control/run_journal.h"
#include "control/run_registry.h"
#include "control/mapped_file.h"
#include "control/state_dir.h"
#include "control/telemetry.h"
#include "dataplane/policy_snapshot.h"
#include "dataplane/ports.h"
#include "dataplane/refusal_sampler.h"
#include "dataplane/populated_memory.h"
#include "dataplane/worker.h"
#include "limiter/compiled_policy.h"
#include "limiter/credential_slots.h"
#include "sluiced_cluster.h"
#include "sluiced_bucket_commands.h"
#include "sluiced_penalty_commands.h"
#include "sluiced_credential_commands.h"
#include "sluiced_flows.h"
#include "sluiced_guards.h"
#include "sluiced_interfaces.h"
#include "sluiced_metrics.h"
#include "sluiced_notify.h"
#include "sluiced_options.h"
#include "sluiced_policy.h"
#include "sluiced_policy_commands.h"
#include "sluiced_run_commands.h"
#include "sluiced_signals.h"
#include "sluiced_status_commands.h"
#include "sluiced_tables.h"

namespace {

using namespace sluice;
using sluiced::digest_hex;
using sluiced::ExitCode;
using sluiced::load_policy;
using sluiced::load_policy_text;
using sluiced::LoadedPolicy;
using sluiced::port_list;

// Bucket kinds the shared table has room for over a run (each reload that
// names a new bucket takes one).
constexpr uint16_t kMaxBucketKinds = 256;
// Entries of each worker's hand-off ring.
constexpr unsigned kRingSize = 4096;

// What keeps sluiced from starting: its exit code and the line that says why.
struct Failure {
  ExitCode code;
  std::string message;
};
// Empty: the step is done.
using Status = std::optional<Failure>;

int fail(ExitCode code, const std::string& msg) {
  std::fprintf(stderr, "sluiced: %s\n", msg.c_str());
  return static_cast<int>(code);
}

int report(const Failure& f) {
  return fail(f.code, f.message);
}

// A policy file as this sluiced runs it: --service-ports wins over the
// file's (for reloaded files too), and a policy with none is refused.
LoadedPolicy with_ports(const sluiced::Options& o, LoadedPolicy loaded, const std::string& file) {
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

LoadedPolicy load_with_ports(const sluiced::Options& o, const std::string& file, const limiter::KeyHasher& hasher) {
  return with_ports(o, load_policy(file, hasher), file);
}

// Prints the policy's errors, each a line; the failure that follows them.
[[nodiscard]] Failure policy_unusable(const LoadedPolicy& loaded, const std::string& file) {
  for (const std::string& e : loaded.errors) std::fprintf(stderr, "%s\n", e.c_str());
  return {ExitCode::kConfig, "the policy " + file + " is not usable; nothing started"};
}

// Words of a TB07 credential record: the policy's slots and a header, even.
[[nodiscard]] unsigned record_words(const limiter::CompiledPolicy& p) {
  return std::max(2u, (p.max_slots + 1) & ~1u);
}

// A cluster section's secret file is read at the check too, so a
// missing or loose one is found before anything starts.
[[nodiscard]] Status cluster_secret_usable(const dataplane::PolicySnapshot& snap) {
  const std::optional<policy::ClusterSpec>& c = snap.policy.source.cluster;
  std::string error;
  if (c && !sluiced::read_cluster_secret(c->secret_file, error)) return Failure{ExitCode::kConfig, error};
  if (c && !sluiced::cluster_link_options(*c, error)) return Failure{ExitCode::kConfig, error};
  return std::nullopt;
}

// The cluster's Redis as the sync will meet it. Credentials it refuses (or
// wants) stop sluiced here: no retry mends them, and a box that started
// anyway would sit in fallback for good with one warning. A Redis not
// reachable yet is only said: the sync connects when it comes.
[[nodiscard]] Status cluster_redis_usable(const dataplane::PolicySnapshot& snap) {
  const std::optional<policy::ClusterSpec>& c = snap.policy.source.cluster;
  if (!c) return std::nullopt;
  std::string error;
  const std::optional<control::RedisLink::Options> link = sluiced::cluster_link_options(*c, error);
  if (!link) return Failure{ExitCode::kConfig, error};
  const control::RedisLink::Result r = sluiced::probe_cluster(*c, *link);
  if (control::is_setup_error(r.error)) {
    return Failure{ExitCode::kCluster, "cluster redis: " + r.detail +
                                           (link->password.empty() ? " (the policy gives no password_file)" : "")};
  }
  if (r.error != control::RedisError::kNone) {
    control::log(control::LogLevel::kWarning, control::LogEvent::kCluster,
                 "cluster redis cannot be reached at start (" + r.detail +
                     "); cluster buckets start in fallback until it can");
  }
  return std::nullopt;
}

// --check-config: the policy alone, hashed with a throw-away secret (the
// anonymous tokens' digests are all that depends on it).
int check_config(const sluiced::Options& o) {
  const LoadedPolicy loaded = load_with_ports(o, o.config, limiter::KeyHasher::random());
  if (!loaded.snapshot) return report(policy_unusable(loaded, o.config));
  if (Status failed = cluster_secret_usable(*loaded.snapshot)) return report(*failed);
  const dataplane::PolicySnapshot& snap = *loaded.snapshot;
  std::printf("%s: ok: policy '%s', digest %016" PRIx64 ", %zu rules, %zu buckets, service ports %s\n",
              o.config.c_str(), snap.policy.source.name.c_str(), snap.policy.digest, snap.policy.rules.size(),
              snap.policy.buckets.size(), port_list(snap.service_ports).c_str());
  const std::optional<policy::ClusterSpec>& c = snap.policy.source.cluster;
  if (!o.connect || !c) {
    if (o.connect) std::printf("%s: no cluster section: nothing to connect to\n", o.config.c_str());
    return 0;
  }
  std::string error;
  const std::optional<control::RedisLink::Options> link = sluiced::cluster_link_options(*c, error);
  const control::RedisLink::Result r = sluiced::probe_cluster(*c, *link);  // the link was read just above
  if (r.error != control::RedisError::kNone) {
    return report(Failure{ExitCode::kCluster, "cluster redis: " + r.detail});
  }
  const std::string who = std::string(link->tls ? "over TLS, " : "") +
                          (link->password.empty() ? "without credentials"
                           : link->username.empty() ? "authenticated as the default user"
                                                    : "authenticated as " + link->username);
  std::printf("%s: ok: cluster redis answered, %s\n", o.config.c_str(), who.c_str());
  return 0;
}

// The cheap checks first, so a typo costs nothing and touches no state: the
// policy (compiled here with a throw-away secret), the interfaces.
[[nodiscard]] Status preflight(const sluiced::Options& o) {
  // Test-only (sluiced_notify.h), but refused like a bad option when malformed.
  if (const sluiced::WorkerStallSetting stall = sluiced::worker_stall_from_env(o.workers); !stall.error.empty()) {
    return Failure{ExitCode::kUsage, stall.error};
  }
  if (const sluiced::DieInChangeSetting die = sluiced::die_in_change_from_env(); !die.error.empty()) {
    return Failure{ExitCode::kUsage, die.error};
  }
  const LoadedPolicy checked = load_with_ports(o, o.config, limiter::KeyHasher::random());
  if (!checked.snapshot) return policy_unusable(checked, o.config);
  if (Status failed = cluster_secret_usable(*checked.snapshot)) return failed;
  if (Status failed = cluster_redis_usable(*checked.snapshot)) return failed;
  if (!o.kernel_interfaces()) return std::nullopt;
  for (const std::string& ifname : {o.client_if, o.origin_if}) {
    if (if_nametoindex(ifname.c_str()) == 0) {
      return Failure{ExitCode::kInterface, "interface '" + ifname + "' does not exist in this network namespace"};
    }
  }
  if (o.af_packet) {
    // A packet socket reads after GRO and LRO: what they merged would be
    // dropped by the receipt checks (XDP runs before them).
    for (const std::string& ifname : {o.client_if, o.origin_if}) {
      const sluiced::MergingOffloads m = sluiced::merging_offloads(ifname);
      if (m.gro || m.lro) {
        const std::string what = m.gro ? "generic-receive-offload" : "large-receive-offload";
        return Failure{ExitCode::kInterface,
                       "interface '" + ifname + "' merges received segments (" + what +
                           " on): a merged segment's checksum is stale, so sluiced would drop it; turn it off first: "
                           "ethtool -K " + ifname + (m.gro ? " gro off" : "") + (m.lro ? " lro off" : "")};
      }
    }
  }
  if (o.af_xdp) {
    // AF_XDP binds a socket to each queue: the interface needs one per worker.
    for (const std::string& ifname : {o.client_if, o.origin_if}) {
      const unsigned queues = sluiced::receive_queues(ifname);
      if (queues != 0 && queues < o.workers) {
        return Failure{ExitCode::kInterface, "interface '" + ifname + "' has " + std::to_string(queues) +
                                                 " receive queue" + (queues == 1 ? "" : "s") + "; --workers " +
                                                 std::to_string(o.workers) + " needs one each (ethtool -L " + ifname +
                                                 " combined " + std::to_string(o.workers) + ")"};
      }
    }
  }
  if (geteuid() != 0) {
    return Failure{ExitCode::kEal, o.af_packet ? "--af-packet needs root (raw sockets on both interfaces)"
                                               : "--af-xdp needs root (XDP programs and sockets on both interfaces)"};
  }
  return std::nullopt;
}

// The virtual devices the EAL makes of the two interfaces (client, origin).
constexpr const char* kAfPacketDevice[2] = {"net_af_packet0", "net_af_packet1"};
constexpr const char* kAfXdpDevice[2] = {"net_af_xdp0", "net_af_xdp1"};

// The EAL's own command line: the operator's with --ports; with --af-packet
// or --af-xdp, ours (no huge pages, the two interfaces as virtual devices).
[[nodiscard]] std::vector<std::string> eal_arguments(const sluiced::Options& o) {
  std::vector<std::string> eal = {"sluiced"};
  if (!o.kernel_interfaces()) {
    eal.insert(eal.end(), o.eal_args.begin(), o.eal_args.end());
    return eal;
  }
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  // A prefix of its own puts the telemetry socket at a known place:
  // /var/run/dpdk/sluice/dpdk_telemetry.v2.
  eal.insert(eal.end(), {"--no-huge", "--no-shconf", "--no-pci", "-m", std::to_string(o.memory_mb), "--log-level",
                         "*:warning", "--file-prefix", "sluice"});
  // Every lcore may run on every CPU: with AF_PACKET the box is usually
  // shared (CI, a demo), and the kernel places the threads best.
  eal.push_back("--lcores=(0-" + std::to_string(o.workers) + ")@(0-" + std::to_string(cpus > 0 ? cpus - 1 : 0) + ")");
  if (o.af_xdp) {
    // Queues 0 .. workers-1 of each interface, an XDP program redirecting
    // each to its socket. Busy polling off: the workers poll, and the box is
    // shared.
    const std::string q = ",start_queue=0,queue_count=" + std::to_string(o.workers) + ",busy_budget=0";
    eal.push_back("--vdev=" + std::string(kAfXdpDevice[0]) + ",iface=" + o.client_if + q);
    eal.push_back("--vdev=" + std::string(kAfXdpDevice[1]) + ",iface=" + o.origin_if + q);
    return eal;
  }
  const std::string q = ",qpairs=" + std::to_string(o.workers);
  eal.push_back("--vdev=" + std::string(kAfPacketDevice[0]) + ",iface=" + o.client_if + q);
  eal.push_back("--vdev=" + std::string(kAfPacketDevice[1]) + ",iface=" + o.origin_if + q);
  return eal;
}

// The client and origin port ids: the AF_PACKET devices the EAL made, or
// the ones --ports names.
[[nodiscard]] Status resolve_ports(const sluiced::Options& o, uint16_t& client, uint16_t& origin) {
  client = o.client_port;
  origin = o.origin_port;
  if (o.kernel_interfaces()) {
    const auto& names = o.af_xdp ? kAfXdpDevice : kAfPacketDevice;
    if (rte_eth_dev_get_port_by_name(names[0], &client) != 0 ||
        rte_eth_dev_get_port_by_name(names[1], &origin) != 0) {
      return Failure{ExitCode::kInterface,
                     o.af_xdp ? "the AF_XDP ports did not come up (is the interface up, with --workers queues?)"
                              : "the AF_PACKET ports did not come up (is the interface up?)"};
    }
    return std::nullopt;
  }
  for (uint16_t p : {client, origin}) {
    if (!rte_eth_dev_is_valid_port(p)) {
      return Failure{ExitCode::kInterface, "DPDK port " + std::to_string(p) + " does not exist (" +
                                               std::to_string(rte_eth_dev_count_avail()) + " ports available)"};
    }
  }
  return std::nullopt;
}

// Everything the appliance runs on, each member owning what it holds. The
// members are declared in the order start() acquires them: destruction
// releases them in reverse, whichever step got last. It loads and publishes
// policies for the control socket's policy commands as for SIGHUP
// (PolicyLoading).
class Appliance final : private sluiced::PolicyLoading {
 public:
  explicit Appliance(const sluiced::Options& o) : o_(o), log_(o.log) {}
  Appliance(const Appliance&) = delete;
  Appliance& operator=(const Appliance&) = delete;

  // Acquires everything, step by step, and prints the start-up summary. On
  // failure, what was acquired stays held until the object ends.
  [[nodiscard]] Status start();
  // Runs the workers and the control plane until SIGINT or SIGTERM, then
  // stops them and prints what the workers counted.
  void serve();

 private:
  // The steps of start(), in order.
  [[nodiscard]] Status open_state_dir();
  [[nodiscard]] Status load_running_policy();
  [[nodiscard]] Status start_eal();
  [[nodiscard]] Status start_ports();
  [[nodiscard]] Status open_table_files();
  [[nodiscard]] Status create_tables();
  [[nodiscard]] Status create_rcu_and_rings();
  void start_publisher();
  [[nodiscard]] Status create_workers();
  [[nodiscard]] Status open_control();
  [[nodiscard]] Status restore_state();
  void build_control_plane();
  void register_telemetry();
  void print_summary() const;
  // How long each step of start() took (ms), for the summary.
  std::vector<std::pair<const char*, double>> start_steps_;

  // The steps of serve().
  void start_running();
  void poll_until_stopped();
  void stop_running() noexcept;
  void print_counters() const;
  // The refusal log (--refusal-log): the refusals the workers sampled, logged.
  void log_refusals();
  // The keys the workers boxed, into the penalty book (and the log).
  void collect_penalties();
  void log_refusal(const limiter::CompiledPolicy& p, unsigned worker, const dataplane::RefusalRecord& r);
  // What the service manager is told (sluiced_notify.h).
  void read_heartbeats(std::vector<uint64_t>& out) const;
  [[nodiscard]] std::string service_status() const;

  [[nodiscard]] dataplane::WorkerSetup worker_setup(unsigned index, const dataplane::PolicySnapshot& first) const;
  [[nodiscard]] std::function<void()> wait_for_readers() const;
  [[nodiscard]] limiter::BucketTable::IdlePredicate idle_buckets() const;
  [[nodiscard]] limiter::BucketTable::IdlePredicate idle_credential_records() const;
  // The --config file (SIGHUP, and policy.reload without a file) loaded and
  // published; and a loaded policy published under `name`. The reasons it
  // was refused, or none.
  [[nodiscard]] std::vector<std::string> reload_config();
  [[nodiscard]] std::vector<std::string> publish(LoadedPolicy next, const std::string& name);
  [[nodiscard]] LoadedPolicy same_cluster(LoadedPolicy next, const std::string& name) const;
  void reload_on_sighup();
  // PolicyLoading, for policy.check and policy.reload.
  [[nodiscard]] LoadedPolicy check_text(const std::string& text, const std::string& name) const override;
  [[nodiscard]] std::vector<std::string> publish_text(const std::string& text, const std::string& name) override;
  [[nodiscard]] std::vector<std::string> publish_config(std::string& file) override;
  void restore_buckets();
  void snapshot_region(unsigned region);
  void warn_if_utc_stepped();
  void collect_retired_policies();
  [[nodiscard]] control::TelemetrySource telemetry_source();
  [[nodiscard]] std::vector<std::pair<std::string, uint64_t>> telemetry_stats() const;

  const sluiced::Options& o_;
  const control::LogSettings& log_;  // o_.log
  // The seeds of the flow file (control/flow_file.h): kept with the flows
  // they key, across restarts.
  uint64_t share_seed_ = 0;
  std::array<uint8_t, 32> cookie_seed_{};
  uint64_t flow_seed_ = 0;
  // Keyed with the state directory's bucket.secret, so that a snapshot's
  // keys mean the same after a restart (control/bucket_snapshot.h).
  std::optional<limiter::KeyHasher> bucket_hasher_;
  // What SIGINT, SIGTERM and SIGHUP ask for. Its `stop` is the flag every
  // worker and thread polls, so it comes before all of them and outlives
  // them.
  sluiced::SignalRequests requests_;
  // Installed by start_running(), released last of all: a second signal
  // while everything else is released is recorded, not acted on (a second
  // Ctrl-C must not cut the EAL's clean-up short).
  sluiced::SignalHandling signal_handling_;
  // systemd's Type=notify and watchdog (sluiced_notify.h); sends nothing
  // unless sluiced was started with NOTIFY_SOCKET.
  sluiced::ServiceNotifier notifier_;

  // Acquired by open_state_dir() and load_running_policy().
  control::StateDirLock state_lock_;
  control::StateDirLock table_lock_;  // --table-dir's, when it is not the state directory
  // By open_table_files(): each worker's parse contexts' buffers.
  std::vector<std::unique_ptr<dataplane::PopulatedMemory>> context_arenas_;
  std::optional<limiter::KeyHasher> credential_hasher_;  // keyed with the state directory's secret
  control::RunJournal journal_;
  std::vector<control::LiveRun> replayed_runs_;
  LoadedPolicy loaded_;  // its snapshot goes to the publisher
  // The shared secret, the workers' spend logs, the sync service
  // (by load_running_policy(), create_tables() and build_control_plane()).
  sluiced::ClusterPart cluster_;
  // By start_eal() and start_ports().
  sluiced::Eal eal_;
  sluiced::Mempool pool_;
  sluiced::StartedPorts ports_;
  // The limiter's shared state: the tables and maps by open_table_files(),
  // the rest by create_tables(). The buckets and TB07 records are on table
  // files that outlive the process.
  sluiced::LimiterTables tables_;
  limiter::BucketTable* buckets_ = nullptr;
  limiter::BucketTable* records_ = nullptr;
  std::unique_ptr<limiter::DigestMap> runs_, users_;
  std::optional<limiter::LimiterState> limiter_;
  std::optional<time::TscClock> clock_;
  bool utc_step_reported_ = false;
  std::atomic<const dataplane::PolicySnapshot*> published_{nullptr};
  // By create_rcu_and_rings(), start_publisher() and create_workers().
  sluiced::RcuVariable qsbr_;
  sluiced::HandOffRings inboxes_;
  std::optional<control::PolicyPublisher> publisher_;
  std::unique_ptr<dataplane::WorkerCounters[]> counters_;
  // The workers' flow tables, on a file that outlives the process.
  sluiced::FlowTables flows_;
  std::vector<std::unique_ptr<dataplane::Worker>> workers_;
  // By open_control(), restore_state(), build_control_plane() and register_telemetry().
  control::ControlServer control_server_;
  control::MetricsServer metrics_server_;
  std::optional<control::RunRegistry> run_registry_;
  std::optional<control::CredentialRegistry> credential_registry_;
  std::optional<control::Reclaimer> reclaimer_;
  std::optional<control::BucketSnapshotter> snapshotter_;
  bool snapshot_failing_ = false;  // said once until it works again
  uint64_t refusals_dropped_ = 0;   // sampled refusals the workers' rings had no room for, as last said
  // What status, stats, the metrics and the refusal log read; and the
  // commands' sources, each registering its own in commands_.
  sluiced::DaemonView daemon_;
  std::optional<sluiced::StatusCommands> status_commands_;
  std::optional<sluiced::PolicyCommands> policy_commands_;
  std::optional<sluiced::RunCommands> run_commands_;
  std::optional<sluiced::CredentialCommands> credential_commands_;
  std::optional<sluiced::BucketCommands> bucket_commands_;
  control::PenaltyBook penalty_book_;  // the keys the workers boxed (penalty.list)
  std::optional<sluiced::PenaltyCommands> penalty_commands_;
  control::CommandTable commands_;
  sluiced::TelemetryRegistration telemetry_;
  // By start_running(); stop_running() releases them.
  sluiced::LaunchedWorkers launched_;
  sluiced::ServiceThread control_thread_, metrics_thread_, reclaimer_thread_, cluster_thread_;
};

Status Appliance::start() {
  // Each step timed: a restart or an upgrade forwards nothing from the old
  // process's end to the new one's first poll, and the summary says where
  // that time went.
  const auto timed = [this](const char* step, auto&& run) -> Status {
    const auto t0 = std::chrono::steady_clock::now();
    Status failed = run();
    start_steps_.emplace_back(step, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    return failed;
  };
  if (Status failed = timed("state", [&] { return open_state_dir(); })) return failed;
  if (Status failed = timed("policy", [&] { return load_running_policy(); })) return failed;
  // The tables' files are opened and their pages faulted in while DPDK
  // starts, beside it: a third of EAL's start is a 100 ms sleep (its
  // TSC-frequency estimate), and the files need nothing of DPDK. "files"
  // is what is left to wait for once the ports are up.
  std::future<Status> files = std::async(std::launch::async, [this] { return open_table_files(); });
  if (Status failed = timed("EAL", [&] { return start_eal(); })) return failed;
  if (Status failed = timed("ports", [&] { return start_ports(); })) return failed;
  if (Status failed = timed("files", [&] { return files.get(); })) return failed;
  if (Status failed = timed("tables", [&] { return create_tables(); })) return failed;
  if (Status failed = timed("rings", [&] { return create_rcu_and_rings(); })) return failed;
  (void)timed("buckets", [&] {
    start_publisher();
    return Status{};
  });
  if (Status failed = timed("flows", [&] { return create_workers(); })) return failed;
  if (Status failed = timed("control", [&] { return open_control(); })) return failed;
  if (Status failed = timed("registries", [&] { return restore_state(); })) return failed;
  build_control_plane();
  register_telemetry();
  if (!o_.quiet) print_summary();
  return std::nullopt;
}

void Appliance::serve() {
  start_running();
  notifier_.serving({.heartbeats = [this](std::vector<uint64_t>& out) { read_heartbeats(out); },
                     .status = [this] { return service_status(); }});
  poll_until_stopped();
  const int stop_signal = requests_.signal.load(std::memory_order_relaxed);
  notifier_.stopping(stop_signal == SIGINT    ? "stopping on SIGINT"
                     : stop_signal == SIGTERM ? "stopping on SIGTERM"
                                              : "stopping");
  // The counters are final only once the workers are stopped; the rest
  // (signal handling included) is released when the appliance ends.
  stop_running();
  if (!o_.quiet) print_counters();
}

// The state directory: credential digests must match the credential map's
// across restarts, so they are keyed with a secret kept there; live runs
// are journalled there.
Status Appliance::open_state_dir() {
  if (const std::string err = control::prepare_state_dir(o_.state_dir); !err.empty()) {
    return Failure{ExitCode::kState, "--state-dir " + o_.state_dir + ": " + err};
  }
  if (const std::string err = state_lock_.acquire(o_.state_dir); !err.empty()) {
    return Failure{ExitCode::kState, "--state-dir: " + err};
  }
  // Two processes must never map the same tables: their directory is
  // locked too when it is not the state directory.
  if (!o_.table_dir.empty() && o_.table_dir != o_.state_dir) {
    if (const std::string err = control::prepare_state_dir(o_.table_dir); !err.empty()) {
      return Failure{ExitCode::kState, "--table-dir " + o_.table_dir + ": " + err};
    }
    if (const std::string err = table_lock_.acquire(o_.table_dir); !err.empty()) {
      return Failure{ExitCode::kState, "--table-dir: " + err};
    }
  }
  const control::Secret secret = control::load_or_create_secret(o_.state_dir, "credential.secret");
  if (!secret.error.empty()) return Failure{ExitCode::kState, secret.error};
  credential_hasher_.emplace(std::span<const uint8_t, limiter::KeyHasher::kSecretSize>(secret.bytes));
  const control::Secret bucket_secret = control::load_or_create_secret(o_.state_dir, "bucket.secret");
  if (!bucket_secret.error.empty()) return Failure{ExitCode::kState, bucket_secret.error};
  bucket_hasher_.emplace(std::span<const uint8_t, limiter::KeyHasher::kSecretSize>(bucket_secret.bytes));
  control::RunJournal::Replay replay = journal_.open(o_.state_dir);
  if (!replay.error.empty()) return Failure{ExitCode::kState, replay.error};
  for (const std::string& w : replay.warnings) control::log(control::LogLevel::kWarning, control::LogEvent::kState, w);
  replayed_runs_ = std::move(replay.live);
  return std::nullopt;
}

// Compiled again with the credential hasher the workers use.
Status Appliance::load_running_policy() {
  loaded_ = load_with_ports(o_, o_.config, *credential_hasher_);
  if (!loaded_.snapshot) return policy_unusable(loaded_, o_.config);  // changed since preflight
  if (const std::string err = cluster_.prepare(loaded_.snapshot->policy.source); !err.empty()) {
    return Failure{ExitCode::kConfig, err};
  }
  return std::nullopt;
}

Status Appliance::start_eal() {
  if (!eal_.init(eal_arguments(o_))) {
    return Failure{ExitCode::kEal, std::string("DPDK would not start: ") + rte_strerror(rte_errno)};
  }
  if (rte_lcore_count() < o_.workers + 1) {
    return Failure{ExitCode::kUsage, std::to_string(o_.workers) + " workers need " + std::to_string(o_.workers + 1) +
                                         " lcores (one main), the EAL has " + std::to_string(rte_lcore_count())};
  }
  return std::nullopt;
}

// The packet buffers, then both ports, one queue pair per worker.
Status Appliance::start_ports() {
  uint16_t client = 0, origin = 0;
  if (Status failed = resolve_ports(o_, client, origin)) return failed;
  const dataplane::PortSetup setup{static_cast<uint16_t>(o_.workers), 1024, 1024};
  const unsigned mbufs =
      o_.workers * (2 * (setup.rx_descriptors + setup.tx_descriptors) + kRingSize + 4 * dataplane::kBurst) + 4096;
  pool_.reset(rte_pktmbuf_pool_create("sluice_mbufs", mbufs, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
                                      static_cast<int>(rte_socket_id())));
  if (!pool_) {
    return Failure{ExitCode::kNoMemory, "no memory for " + std::to_string(mbufs) +
                                            " packet buffers; raise --memory (or the huge pages) or lower --workers"};
  }
  if (std::string err = ports_.start(client, origin, setup, pool_.get()); !err.empty()) {
    return Failure{ExitCode::kInterface, std::move(err)};
  }
  if (!ports_.rss_note().empty()) {
    control::log(control::LogLevel::kWarning, control::LogEvent::kPorts,
                 ports_.rss_note() +
                     "; flows are owned by their hash, and frames a worker does not own are handed over");
  }
  return std::nullopt;
}

// The limiter's shared state, and the clock the workers and the reclaimer
// read.
// The mapped files: the bucket and credential-slot tables, the flow file
// (with the flows the last process left read out). Runs beside start_eal()
// and start_ports(): it touches none of what they do.
Status Appliance::open_table_files() {
  const limiter::BucketTable::Options buckets{.capacity = o_.buckets, .bucket_kinds = kMaxBucketKinds};
  const limiter::BucketTable::Options records{.capacity = std::max<size_t>(o_.buckets / 16, 4096),
                                              .bucket_kinds = 1,
                                              .words = record_words(loaded_.snapshot->policy)};
  const auto wall = std::chrono::system_clock::now().time_since_epoch();
  const auto now = static_cast<uint64_t>(std::chrono::nanoseconds(wall).count());
  try {
    if (std::string err = tables_.open(o_.tables_in(), buckets, records, now); !err.empty()) {
      return Failure{ExitCode::kState, err};
    }
  } catch (const std::bad_alloc&) {
    return Failure{ExitCode::kNoMemory, "no memory for " + std::to_string(o_.buckets) + " buckets; lower --buckets"};
  }
  // The contexts' buffers are sized by the first policy (worker_setup).
  const dataplane::EngineConfig pools;  // the pools sluiced has no option for
  if (std::string err = flows_.open(o_.tables_in(), o_.workers, o_.flows, o_.contexts,
                                    loaded_.snapshot->policy.stream.head.max_head_bytes, pools.edit_holds,
                                    pools.bind_stashes, pools.answer_bytes, now);
      !err.empty()) {
    return Failure{ExitCode::kState, err};
  }
  // The contexts' buffers too (their objects and held heads are in the flow
  // file), and the run and credential maps: memory faulted in beside DPDK.
  const auto& head = loaded_.snapshot->policy.stream.head;
  try {
    runs_ = std::make_unique<limiter::DigestMap>(o_.runs);
    users_ = std::make_unique<limiter::DigestMap>(o_.credentials);
    for (unsigned i = 0; i < o_.workers; ++i) {
      context_arenas_.emplace_back(std::make_unique<dataplane::PopulatedMemory>(
          dataplane::ContextPool::arena_bytes(o_.contexts, head.max_head_bytes, head.max_fields, false, false)));
    }
  } catch (const std::bad_alloc&) {
    return Failure{ExitCode::kNoMemory,
                   "no memory for the parse contexts' buffers or the run and credential maps; lower --contexts, "
                   "--runs or --credentials"};
  }
  return std::nullopt;
}

Status Appliance::create_tables() {
  buckets_ = &tables_.buckets();
  records_ = &tables_.records();
  limiter_.emplace(limiter::LimiterState{*buckets_, *records_, *runs_, *users_, *bucket_hasher_, *credential_hasher_,
                                         cluster_.hasher(), tables_.in_flight_epoch()});
  cluster_.make_logs(o_.workers);
  clock_.emplace();
  return std::nullopt;
}

// The RCU variable that tells when every worker has moved past a change,
// and the rings workers hand frames over through.
Status Appliance::create_rcu_and_rings() {
  const size_t qsbr_size = rte_rcu_qsbr_get_memsize(o_.workers);
  qsbr_.reset(static_cast<rte_rcu_qsbr*>(rte_zmalloc("sluice_qsbr", qsbr_size, RTE_CACHE_LINE_SIZE)));
  if (!qsbr_ || rte_rcu_qsbr_init(qsbr_.get(), o_.workers) != 0) {
    return Failure{ExitCode::kNoMemory, "no memory for the RCU state"};
  }
  if (!inboxes_.create(o_.workers, kRingSize, static_cast<int>(rte_socket_id()))) {
    return Failure{ExitCode::kNoMemory, "no memory for the hand-off rings"};
  }
  return std::nullopt;
}

// The tables and buffers are sized for the first policy; a reload that
// needs more is refused until a restart.
void Appliance::start_publisher() {
  const http::Http1Policy& p = loaded_.snapshot->policy;
  publisher_.emplace(published_, qsbr_.get(),
                     control::PolicyPublisher::Limits{p.stream.head.max_head_bytes, p.stream.head.max_fields,
                                                      record_words(p), kMaxBucketKinds});
  publisher_->start(std::move(loaded_.snapshot), o_.config);
  restore_buckets();
}

// Before any worker runs: the buckets the last run left (re-attached, or
// from the snapshot), where the policy still has them unchanged.
void Appliance::restore_buckets() { tables_.settle(o_.state_dir, publisher_->current()->policy, clock_->now()); }

Status Appliance::create_workers() {
  // The flow tables, with the flows the last process left. Their seeds
  // key the workers' client-share tables (a client that cannot predict
  // where its addresses land cannot line them up on one probe run), the SYN
  // cookies and the flow hash, one for all workers.
  // (The file was opened beside EAL's start: open_table_files.)
  const std::shared_ptr<const dataplane::PolicySnapshot> first = publisher_->current();
  const control::FlowFile::Seeds seeds = flows_.seeds();
  share_seed_ = seeds.share;
  cookie_seed_ = seeds.cookie;
  flow_seed_ = seeds.flow;
  const dataplane::WorkerShared shared{&published_, qsbr_.get(), inboxes_.rings(), &requests_.stop, &*clock_};
  counters_ = std::make_unique<dataplane::WorkerCounters[]>(o_.workers);
  try {
    for (unsigned i = 0; i < o_.workers; ++i) {
      workers_.push_back(std::make_unique<dataplane::Worker>(worker_setup(i, *first), shared, *limiter_, counters_[i]));
    }
  } catch (const std::bad_alloc&) {
    return Failure{ExitCode::kNoMemory, "no memory for the flow tables; lower --flows or --contexts"};
  }
  const dataplane::RssOwner* rss = ports_.rss_owner();
  flows_.resume(
      workers_,
      [this, rss](const dataplane::FlowKey& key) {
        return rss != nullptr ? rss->owner(key) : dataplane::address_owner(key, flow_seed_, o_.workers);
      },
      flow_seed_, *first);
  return std::nullopt;
}

dataplane::WorkerSetup Appliance::worker_setup(unsigned index, const dataplane::PolicySnapshot& first) const {
  dataplane::WorkerSetup ws;
  ws.index = index;
  ws.workers = o_.workers;
  ws.client_port = ports_.client();
  ws.origin_port = ports_.origin();
  ws.pool = pool_.get();
  ws.idle_sleep_us = o_.idle_sleep_us.value_or(o_.kernel_interfaces() ? 20 : 0);
  ws.engine.flows = o_.flows;
  ws.engine.contexts = o_.contexts;
  ws.engine.delay_slots = o_.delay_slots_or_default();
  ws.engine.flows_per_client = o_.flows_per_client;
  ws.engine.contexts_per_client = o_.contexts_per_client;
  ws.engine.share_seed = share_seed_ + index;
  ws.engine.cookie_seed = cookie_seed_;
  ws.engine.flow_memory = flows_.memory(index);
  ws.engine.mark = flows_.mark(index);
  ws.engine.undo = flows_.undo(index);
  ws.engine.context_memory = flows_.contexts(index);
  ws.engine.hold_memory = flows_.holds(index);
  ws.engine.head_memory = flows_.heads(index);
  ws.engine.stash_memory = flows_.stashes(index);
  ws.engine.context_arena = {context_arenas_[index]->data(), context_arenas_[index]->size()};
  ws.engine.stash_slots = flows_.stash_slots(index);
  ws.engine.answer_memory = flows_.answers(index);
  ws.engine.answers_written = flows_.answers_written(index);
  ws.flow_seed = flow_seed_;
  ws.rss = ports_.rss_owner();
  ws.engine.spends = cluster_.log(index);
  ws.engine.timeouts.idle = time::Nanos{o_.idle_timeout_s} * time::kNanosPerSecond;
  ws.engine.timeouts.half_open = time::Nanos{o_.half_open_timeout_s} * time::kNanosPerSecond;
  ws.engine.max_head_bytes = first.policy.stream.head.max_head_bytes;
  ws.engine.max_fields = first.policy.stream.head.max_fields;
  ws.refusal_rate = log_.refusal_rate;
  const sluiced::WorkerStallSetting stall = sluiced::worker_stall_from_env(o_.workers);
  if (stall.stall && stall.stall->worker == index) {
    ws.test_stall_after = time::Nanos{stall.stall->seconds} * time::kNanosPerSecond;
    control::log(control::LogLevel::kWarning, control::LogEvent::kWatchdog,
                 std::string(sluiced::kWorkerStallVariable) + " (test-only): worker " + std::to_string(index) +
                     " stops looping " + std::to_string(stall.stall->seconds) + " s after it starts");
  }
  if (const sluiced::DieInChangeSetting die = sluiced::die_in_change_from_env(); die.change != 0) {
    ws.test_die_in_change = die.change;
    control::log(control::LogLevel::kWarning, control::LogEvent::kState,
                 std::string(sluiced::kDieInChangeVariable) + " (test-only): worker " + std::to_string(index) +
                     " kills the process in the middle of its change number " + std::to_string(die.change) +
                     " for a client segment with payload");
  }
  return ws;
}

// The control socket, before anything runs: a box that cannot be operated
// does not start.
Status Appliance::open_control() {
  gid_t control_gid = static_cast<gid_t>(-1);
  if (!o_.control_group.empty()) {
    const group* g = getgrnam(o_.control_group.c_str());
    if (g == nullptr) return Failure{ExitCode::kUsage, "--control-group: no group named '" + o_.control_group + "'"};
    control_gid = g->gr_gid;
  }
  if (const std::string err = control_server_.open(o_.control_socket, control_gid); !err.empty()) {
    return Failure{ExitCode::kControl, err};
  }
  if (!o_.metrics.empty()) {
    if (const std::string err = metrics_server_.open(o_.metrics); !err.empty()) {
      return Failure{ExitCode::kControl, err};
    }
  }
  return std::nullopt;
}

// What the control plane owns and publishes to the workers: the live runs
// and the credential map, as the state directory kept them.
Status Appliance::restore_state() {
  run_registry_.emplace(*runs_, *credential_hasher_, &journal_, wait_for_readers());
  for (const std::string& w : run_registry_->restore(replayed_runs_)) {
    control::log(control::LogLevel::kWarning, control::LogEvent::kState, w);
  }
  credential_registry_.emplace(*users_, *credential_hasher_, o_.state_dir, wait_for_readers());
  if (const std::vector<std::string> errors = credential_registry_->restore(); !errors.empty()) {
    for (const std::string& e : errors) std::fprintf(stderr, "%s\n", e.c_str());
    return Failure{ExitCode::kState, "the credential map in " + o_.state_dir + " is not usable; fix or remove it"};
  }
  return std::nullopt;
}

std::function<void()> Appliance::wait_for_readers() const {
  return [qsbr = qsbr_.get()] { rte_rcu_qsbr_synchronize(qsbr, RTE_QSBR_THRID_INVALID); };
}

// The reclamation of idle buckets, and the commands the control socket
// serves, over what the daemon owns.
void Appliance::build_control_plane() {
  snapshotter_.emplace(*buckets_, o_.state_dir, [this] { return publisher_->current(); },
                       [this] { return clock_->now(); });
  reclaimer_.emplace(
      std::vector<control::Reclaimer::Table>{
          {"buckets", buckets_, [this] { return idle_buckets(); },
           [this](unsigned region) { snapshot_region(region); }},
          {"credential_slots", records_, [this] { return idle_credential_records(); }}},
      wait_for_readers());
  control::ClusterService::Setup setup;  // spec: the cluster section's, filled in by build()
  setup.table = buckets_;
  setup.wait_for_readers = wait_for_readers();
  setup.box_clock = [this] { return clock_->now(); };
  setup.bucket_names = [this] { return sluiced::cluster_bucket_names(publisher_->current()->policy, kMaxBucketKinds); };
  setup.apply_change = [this](const control::ReplicaChange& c) {
    if (c.table == control::ReplicaChange::Table::kPenalties) return penalty_commands_->apply_replicated(c);
    return sluiced::apply_replica_change(c, *run_registry_, *credential_registry_);
  };
  setup.box = sluiced::box_name();
  setup.credential_fingerprint = sluiced::credential_fingerprint(*credential_hasher_);
  cluster_.build(std::move(setup));
  control::ClusterService* cluster = cluster_.service();  // null without a cluster section
  daemon_.cluster = cluster;
  daemon_.workers = o_.workers;
  daemon_.counters = counters_.get();
  daemon_.ports = ports_.info();
  daemon_.started = std::chrono::steady_clock::now();
  daemon_.state_dir = o_.state_dir;
  daemon_.publisher = &*publisher_;
  daemon_.limiter = &*limiter_;
  daemon_.clock = &*clock_;
  daemon_.runs = &*run_registry_;
  daemon_.credentials = &*credential_registry_;
  daemon_.reclaimer = &*reclaimer_;
  daemon_.bucket_snapshots = &*snapshotter_;
  status_commands_.emplace(daemon_);
  policy_commands_.emplace(*publisher_, static_cast<sluiced::PolicyLoading&>(*this));
  run_commands_.emplace(*run_registry_, cluster);
  credential_commands_.emplace(*credential_registry_, cluster);
  bucket_commands_.emplace(sluiced::BucketCommands::Parts{
      .publisher = *publisher_, .limiter = *limiter_, .clock = *clock_, .runs = *run_registry_, .cluster = cluster});
  penalty_commands_.emplace(sluiced::PenaltyCommands::Parts{
      .publisher = *publisher_, .limiter = *limiter_, .clock = *clock_, .book = penalty_book_, .cluster = cluster});
  for (const control::CommandSource* source : std::initializer_list<const control::CommandSource*>{
           &*status_commands_, &*policy_commands_, &*run_commands_, &*credential_commands_, &*bucket_commands_,
           &*penalty_commands_}) {
    source->register_commands(commands_);
  }
}

LoadedPolicy Appliance::check_text(const std::string& text, const std::string& name) const {
  return same_cluster(with_ports(o_, load_policy_text(text, name, *credential_hasher_), name), name);
}

std::vector<std::string> Appliance::publish_text(const std::string& text, const std::string& name) {
  return publish(with_ports(o_, load_policy_text(text, name, *credential_hasher_), name), name);
}

std::vector<std::string> Appliance::publish_config(std::string& file) {
  file = o_.config;
  return reload_config();
}

// Asked once per reclaimer step, so they follow the policy published now.
limiter::BucketTable::IdlePredicate Appliance::idle_buckets() const {
  std::shared_ptr<const dataplane::PolicySnapshot> p = publisher_->current();
  const time::Nanos now = clock_->now();
  const uint16_t epoch = limiter_->in_flight_epoch;
  return limiter::BucketTable::IdlePredicate([p, now, epoch](uint16_t kind, const uint64_t* words) {
    return limiter::bucket_idle(p->policy, kind, words, now, epoch);
  });
}

limiter::BucketTable::IdlePredicate Appliance::idle_credential_records() const {
  std::shared_ptr<const dataplane::PolicySnapshot> p = publisher_->current();
  const time::Nanos now = clock_->now();
  time::Nanos quiet = 0;
  for (const limiter::CompiledRule& r : p->policy.rules) quiet = std::max(quiet, r.slots_quiet);
  const unsigned slots = std::max(1u, p->policy.max_slots);
  return limiter::BucketTable::IdlePredicate([slots, quiet, now](uint16_t, const uint64_t* words) {
    return limiter::credential_record_idle(words, slots, quiet, now);
  });
}

// Loads, checks and publishes a policy file; the reasons it was refused,
// each a line, or nothing.
std::vector<std::string> Appliance::reload_config() {
  return publish(load_with_ports(o_, o_.config, *credential_hasher_), o_.config);
}

// The service manager hears of every reload (SIGHUP or the control socket),
// refused ones too: READY=1 ends its reloading state either way.
std::vector<std::string> Appliance::publish(LoadedPolicy next, const std::string& name) {
  notifier_.reloading();
  next = same_cluster(std::move(next), name);
  std::vector<std::string> refused =
      next.snapshot ? publisher_->reload(std::move(next.snapshot), name) : std::move(next.errors);
  if (refused.empty()) tables_.record_current_kinds([this] { return publisher_->current(); });
  notifier_.reloaded(refused.empty() ? service_status()
                                     : name + " refused (" + refused.front() + "); " + service_status());
  return refused;
}

// The cluster section (the Redis, the shared secret the keys are
// made with, the fallback) is the one part of a policy a reload cannot
// change: the workers' keys and the sync thread were made from it.
LoadedPolicy Appliance::same_cluster(LoadedPolicy next, const std::string& name) const {
  if (!next.snapshot) return next;
  const std::optional<policy::ClusterSpec>& now = publisher_->current()->policy.source.cluster;
  if (next.snapshot->policy.source.cluster != now) {
    next.snapshot.reset();
    next.errors.push_back(name + ": the cluster section differs from the running one; it takes a restart of sluiced "
                                 "to change (nothing was changed)");
  }
  return next;
}

// The same counters on DPDK's telemetry socket (dpdk-telemetry.py).
void Appliance::register_telemetry() {
  if (const std::string err = telemetry_.register_source(telemetry_source()); !err.empty()) {
    control::log(control::LogLevel::kWarning, control::LogEvent::kTelemetry, "no telemetry commands: " + err);
  }
}

control::TelemetrySource Appliance::telemetry_source() {
  control::TelemetrySource telemetry;
  telemetry.stats = [this] { return telemetry_stats(); };
  telemetry.status = [this] {
    const std::shared_ptr<const dataplane::PolicySnapshot> cur_held = publisher_->current();
    const dataplane::PolicySnapshot& cur = *cur_held;
    return std::vector<std::pair<std::string, std::string>>{{"version", SLUICE_VERSION},
                                                            {"policy", cur.policy.source.name},
                                                            {"policy_digest", digest_hex(cur.policy.digest)},
                                                            {"policy_generation", std::to_string(cur.generation)},
                                                            {"workers", std::to_string(o_.workers)},
                                                            {"control_socket", control_server_.path()},
                                                            {"state_dir", o_.state_dir}};
  };
  telemetry.runs = [this] {
    std::vector<std::pair<std::string, uint64_t>> out;
    for (const control::LiveRun& r : run_registry_->list()) out.emplace_back(r.token, r.budget);
    return out;
  };
  return telemetry;
}

std::vector<std::pair<std::string, uint64_t>> Appliance::telemetry_stats() const {
  std::vector<std::pair<std::string, uint64_t>> out;
#define SLUICE_TELEMETRY_COUNTER(name, help)                                    \
  {                                                                             \
    uint64_t total = 0;                                                         \
    for (unsigned i = 0; i < o_.workers; ++i) total += counters_[i].name.get(); \
    out.emplace_back(#name, total);                                             \
  }
  SLUICE_WORKER_COUNTERS(SLUICE_TELEMETRY_COUNTER)
#undef SLUICE_TELEMETRY_COUNTER
  uint64_t flows = 0;
  for (unsigned i = 0; i < o_.workers; ++i) flows += counters_[i].flows_active.load(std::memory_order_relaxed);
  out.emplace_back("flows_active", flows);
  uint64_t unbound = 0;
  for (unsigned i = 0; i < o_.workers; ++i) unbound += counters_[i].flows_unbound.load(std::memory_order_relaxed);
  out.emplace_back("flows_unbound", unbound);
  uint64_t waiting = 0;
  for (unsigned i = 0; i < o_.workers; ++i) waiting += counters_[i].delayed_waiting.load(std::memory_order_relaxed);
  out.emplace_back("delayed_waiting", waiting);
  out.emplace_back("runs_live", run_registry_->size());
  out.emplace_back("credentials", credential_registry_->summary().credentials);
  return out;
}

void Appliance::print_summary() const {
  std::printf("sluiced %s\n", SLUICE_VERSION);
  for (int i = 0; i < 2; ++i) {
    const dataplane::PortInfo& p = ports_.info()[i];
    std::printf("  %s port %u: %s (%s) mac %s link %s%s, %u queue%s%s, checksums verified by %s\n",
                i == 0 ? "client" : "origin", p.id, p.name.c_str(), p.driver.c_str(), p.mac.c_str(),
                p.link_up ? "up" : "down",
                p.speed_mbps != 0 && p.link_up ? (" " + std::to_string(p.speed_mbps) + " Mb/s").c_str() : "",
                o_.workers, o_.workers == 1 ? "" : "s", p.rss ? ", symmetric RSS (a flow's owner is its queue)" : "",
                p.rx_checksum ? "the device" : "the workers");
  }
  std::printf("  workers: %u (flows %zu, contexts %zu each), buckets %zu\n", o_.workers, o_.flows, o_.contexts,
              buckets_->capacity());
  const std::shared_ptr<const dataplane::PolicySnapshot> snap = publisher_->current();
  std::printf("  policy: '%s' from %s, digest %016" PRIx64 ", %zu rules, %zu buckets, service ports %s\n",
              snap->policy.source.name.c_str(), o_.config.c_str(), snap->policy.digest, snap->policy.rules.size(),
              snap->policy.buckets.size(), port_list(snap->service_ports).c_str());
  std::printf("  clock: TSC%s\n",
              clock_->invariant_tsc() ? " (invariant)" : " (not invariant: re-anchored every second)");
  std::printf("  control: %s (sluicectl --socket %s status)\n", control_server_.path().c_str(),
              control_server_.path().c_str());
  if (!o_.metrics.empty()) std::printf("  metrics: http://%s/metrics\n", o_.metrics.c_str());
  std::printf("  telemetry: %s/dpdk_telemetry.v2 (/sluice/stats, /sluice/status, /sluice/runs)\n",
              rte_eal_get_runtime_dir());
  std::printf("  state: %s (%zu live runs restored, %zu credentials)\n", o_.state_dir.c_str(), run_registry_->size(),
              credential_registry_->summary().credentials);
  std::printf("  tables: %s, on %s\n", o_.tables_in().c_str(), control::store_of(o_.tables_in()).c_str());
  double total = 0;
  std::string steps;
  for (const auto& [step, ms] : start_steps_) {
    total += ms;
    char part[64];
    std::snprintf(part, sizeof part, "%s%s %.1f", steps.empty() ? "" : ", ", step, ms);
    steps += part;
  }
  std::printf("  started in %.1f ms (%s)\n", total, steps.c_str());
  std::printf("sluiced: ready\n");
  std::fflush(stdout);
}

// Signal handling first, so a signal from here on stops the appliance
// cleanly; then the workers, then the control-plane threads.
void Appliance::start_running() {
  signal_handling_.install(requests_);
  launched_.launch(workers_, requests_.stop);
  control_thread_.start(requests_.stop, [this] {
    control_server_.serve(requests_.stop,
                          [this](const control::Json& request, const control::PassedFile& file) {
                            return commands_.dispatch(request, file);
                          });
  });
  if (!o_.metrics.empty()) {
    metrics_thread_.start(requests_.stop, [this] {
      metrics_server_.serve(requests_.stop, [this] { return sluiced::render_metrics(daemon_); });
    });
  }
  // Every region of both tables every 400 ms: a bucket is dropped within
  // that of becoming droppable (RF08's 10 minutes idle, TB07's quiet time),
  // and the bucket snapshot, written at the end of each sweep and as old as
  // its oldest region, is at most two sweeps (800 ms) old when the process
  // dies: what the fallback gives back when the table file cannot be used
  // stays under a second. A sweep reads the table once (32 MB at the
  // default 1 M buckets) and writes its live slots.
  reclaimer_thread_.start(requests_.stop,
                          [this] { reclaimer_->serve(requests_.stop, std::chrono::milliseconds(400)); });
  if (control::ClusterService* cluster = cluster_.service()) {
    cluster_thread_.start(requests_.stop, [this, cluster] { cluster->serve(requests_.stop); });
  }
}

// The main thread's own work while the appliance runs: SIGHUP's reloads,
// the clock's anchor, and freeing the policies no request uses any more.
void Appliance::poll_until_stopped() {
  auto last_anchor = std::chrono::steady_clock::now();
  while (!requests_.stop.load(std::memory_order_relaxed)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (requests_.reload.exchange(false)) reload_on_sighup();
    log_refusals();
    collect_penalties();
    notifier_.tick(std::chrono::steady_clock::now());
    if (std::chrono::steady_clock::now() - last_anchor >= std::chrono::seconds(1)) {
      clock_->reanchor();
      warn_if_utc_stepped();
      last_anchor = std::chrono::steady_clock::now();
      collect_retired_policies();
      control::process_log().report_suppressed();
    }
  }
}

void Appliance::read_heartbeats(std::vector<uint64_t>& out) const {
  out.resize(o_.workers);
  for (unsigned i = 0; i < o_.workers; ++i) out[i] = counters_[i].heartbeat.get();
}

// STATUS= for systemctl status: the policy and what the workers decided.
std::string Appliance::service_status() const {
  uint64_t requests = 0, admitted = 0, refused = 0, answered = 0;
  for (unsigned i = 0; i < o_.workers; ++i) {
    requests += counters_[i].requests.get();
    admitted += counters_[i].admitted.get();
    refused += counters_[i].refused.get();
    answered += counters_[i].answered.get();
  }
  const std::shared_ptr<const dataplane::PolicySnapshot> p = publisher_->current();
  return "policy '" + p->policy.source.name + "' (generation " + std::to_string(p->generation) + "), " +
         std::to_string(o_.workers) + (o_.workers == 1 ? " worker: " : " workers: ") + std::to_string(requests) +
         " requests, " + std::to_string(admitted) + " admitted, " + std::to_string(refused) + " refused, " +
         std::to_string(answered) + " answered";
}

// Every record the workers' rings hold (a second of each one's share at
// most), and a warning when a ring had no room for some.
void Appliance::log_refusals() {
  if (log_.refusal_rate == 0) return;
  const std::shared_ptr<const dataplane::PolicySnapshot> p = publisher_->current();
  std::array<dataplane::RefusalRecord, 64> batch;
  uint64_t dropped = 0;
  for (unsigned i = 0; i < o_.workers; ++i) {
    dataplane::RefusalSampler& sampler = workers_[i]->refusals();
    for (size_t left = sampler.capacity(); left > 0;) {
      const size_t n = sampler.drain(batch);
      for (size_t k = 0; k < n; ++k) log_refusal(p->policy, i, batch[k]);
      left = n < batch.size() ? 0 : left - std::min(left, n);
    }
    dropped += sampler.dropped();
  }
  if (dropped != refusals_dropped_) {
    control::log(control::LogLevel::kWarning, control::LogEvent::kGeneral,
                 std::to_string(dropped - refusals_dropped_) + " sampled refusals dropped: the log did not keep up");
    refusals_dropped_ = dropped;
  }
}

// Each boxing the workers handed on: logged (`penalty: rule=NAME key=KEY
// boxed for N s`) and kept in the book penalty.list reads.
void Appliance::collect_penalties() {
  const std::shared_ptr<const dataplane::PolicySnapshot> p = publisher_->current();
  std::array<dataplane::PenaltyRecord, 64> batch;
  for (unsigned i = 0; i < o_.workers; ++i) {
    dataplane::PenaltyLog& ring = workers_[i]->penalties();
    for (size_t left = ring.capacity(); left > 0;) {
      const size_t n = ring.drain(batch);
      for (size_t k = 0; k < n; ++k) {
        const dataplane::PenaltyRecord& r = batch[k];
        const auto named = std::find_if(p->policy.rules.begin(), p->policy.rules.end(),
                                        [&](const limiter::CompiledRule& c) { return c.counter_slot == r.rule_slot; });
        const std::string rule = named != p->policy.rules.end() ? named->name : "#" + std::to_string(r.rule_slot);
        const std::string key = sluiced::label_text(daemon_, r.label);
        const std::string secs = std::to_string((r.until - r.at) / time::kNanosPerSecond);
        control::log(control::LogLevel::kNotice, control::LogEvent::kPenalty,
                     "penalty: rule=" + rule + " key=" + key + " boxed for " + secs + " s",
                     {{"SLUICE_RULE", rule}, {"SLUICE_KEY", key}, {"SLUICE_BOXED_S", secs}});
        const control::PenaltyBook::Entry entry{.rule = rule, .key = key, .box_key = r.key, .since = r.at, .until = r.until};
        penalty_book_.add(entry);
        penalty_commands_->boxed(p->policy, entry);  // to the other boxes, if the cluster shares the box
      }
      left = n < batch.size() ? 0 : left - std::min(left, n);
    }
  }
}

// `refusal: rule=NAME status=429 key=KEY`; in the journal with the record's
// fields. The rule is named by the policy now running (a counter slot keeps
// its rule's name across reloads).
void Appliance::log_refusal(const limiter::CompiledPolicy& p, unsigned worker, const dataplane::RefusalRecord& r) {
  std::string rule = "-";
  if (r.has_rule) {
    const auto named = std::find_if(p.rules.begin(), p.rules.end(),
                                    [&](const limiter::CompiledRule& c) { return c.counter_slot == r.rule_slot; });
    rule = named != p.rules.end() ? named->name : "#" + std::to_string(r.rule_slot);
  }
  const std::string key = sluiced::label_text(daemon_, r.label);
  const std::string status = std::to_string(r.status);
  const std::string at = std::to_string(r.at / 1000);
  const std::string w = std::to_string(worker);
  control::log(control::LogLevel::kInfo, control::LogEvent::kRefusal,
               "refusal: rule=" + rule + " status=" + status + " key=" + key,
               {{"SLUICE_RULE", rule},
                {"SLUICE_STATUS", status},
                {"SLUICE_KEY", key},
                {"SLUICE_WORKER", w},
                {"SLUICE_DECIDED_USEC", at}});
}

void Appliance::warn_if_utc_stepped() {
  // Said once per step: when UTC has moved a second or more from the
  // limiter's clock, which follows it at 0.05% rather than jump.
  const int64_t behind = clock_->behind_utc();
  constexpr auto kSecond = static_cast<int64_t>(time::kNanosPerSecond);
  const bool stepped = behind > kSecond || behind < -kSecond;
  if (stepped && !utc_step_reported_) {
    char message[192];
    std::snprintf(message, sizeof message,
                  "the system clock was stepped by %.3f s; buckets do not move, and the limiter's clock follows "
                  "UTC at 0.05%% (%.0f s to converge)",
                  static_cast<double>(behind) / 1e9,
                  static_cast<double>(behind < 0 ? -behind : behind) /
                      static_cast<double>(time::TscClock::kMaxSlewPerReanchor));
    control::log(control::LogLevel::kWarning, control::LogEvent::kClock, message);
  }
  utc_step_reported_ = stepped;
}

void Appliance::reload_on_sighup() {
  // The operator's --config file, whatever a client published since: the
  // daemon opens no path a client named.
  const std::string& file = o_.config;
  const std::vector<std::string> refused = reload_config();
  if (refused.empty()) {
    const std::shared_ptr<const dataplane::PolicySnapshot> now = publisher_->current();
    const std::string generation = std::to_string(now->generation);
    control::log(control::LogLevel::kNotice, control::LogEvent::kPolicy,
                 "SIGHUP: policy '" + now->policy.source.name + "' reloaded from " + file + " (generation " +
                     generation + ")",
                 {{"SLUICE_POLICY", now->policy.source.name}, {"SLUICE_GENERATION", generation}});
  } else {
    for (const std::string& line : refused) control::log(control::LogLevel::kWarning, control::LogEvent::kPolicy, line);
    control::log(control::LogLevel::kWarning, control::LogEvent::kPolicy,
                 "SIGHUP: " + file + " not loaded; the running policy is unchanged");
  }
}

// Retired policies no request in flight may still use.
void Appliance::collect_retired_policies() {
  uint64_t oldest = ~uint64_t{0};
  for (unsigned i = 0; i < o_.workers; ++i) {
    oldest = std::min(oldest, counters_[i].oldest_policy_generation.load(std::memory_order_relaxed));
  }
  (void)publisher_->collect(oldest);
}

// In reverse order of start_running(); the signal handling stays until the
// appliance ends.
void Appliance::stop_running() noexcept {
  cluster_thread_.stop();
  reclaimer_thread_.stop();
  metrics_thread_.stop();
  control_thread_.stop();
  launched_.stop();
  // The workers are stopped: the buckets as they are now, for the next start.
  if (snapshotter_) {
    if (const std::string err = snapshotter_->write_all(); !err.empty()) {
      control::log(control::LogLevel::kWarning, control::LogEvent::kSnapshot, "buckets not saved: " + err);
    }
  }
}

// The reclaimer has just passed `region` of the bucket table: it is copied
// for the snapshot, and after the last region the file is written.
void Appliance::snapshot_region(unsigned region) {
  snapshotter_->region_visited(region);
  if (region + 1 != buckets_->regions()) return;
  if (const std::string err = snapshotter_->write(); !err.empty()) {
    if (!snapshot_failing_) {
      control::log(control::LogLevel::kWarning, control::LogEvent::kSnapshot, "buckets not saved: " + err);
    }
    snapshot_failing_ = true;
  } else {
    snapshot_failing_ = false;
  }
}

void Appliance::print_counters() const {
  std::printf("sluiced: stopping on %s\n",
              requests_.signal.load(std::memory_order_relaxed) == SIGINT ? "SIGINT" : "SIGTERM");
#define SLUICE_PRINT_COUNTER(name, help)                                            \
  {                                                                                 \
    uint64_t total = 0;                                                             \
    for (unsigned i = 0; i < o_.workers; ++i) total += counters_[i].name.get();     \
    if (total != 0) std::printf("  %-20s %12" PRIu64 "  %s\n", #name, total, help); \
  }
  SLUICE_WORKER_COUNTERS(SLUICE_PRINT_COUNTER)
#undef SLUICE_PRINT_COUNTER
  std::fflush(stdout);
}

// Starts the appliance and serves until SIGINT or SIGTERM. What kept it from
// starting is returned once everything it had acquired is released.
[[nodiscard]] Status start_and_serve(const sluiced::Options& o) {
  Appliance appliance(o);
  if (Status failed = appliance.start()) return failed;
  appliance.serve();
  return std::nullopt;
}

// The process's logger (control/log.h) lives as long as the appliance: every
// thread that logs has ended before it does.
int run(const sluiced::Options& o, const control::LogSettings& log) {
  control::Logger logger(control::make_log_sink(log.target), log.level);
  if (log.refusal_rate != 0) {
    // The workers' samplers keep the rate; the logger only bounds a batch.
    logger.set_rate(control::LogEvent::kRefusal,
                    {static_cast<double>(log.refusal_rate), log.refusal_rate + o.workers});
  }
  const control::ProcessLog installed(logger);
  if (log.target == control::LogTarget::kJournal && !control::journal_available()) {
    control::log(control::LogLevel::kWarning, control::LogEvent::kGeneral,
                 "the journal is not running (no /run/systemd/journal/socket); logging to stderr");
  }
  Status failed = preflight(o);
  if (!failed) failed = start_and_serve(o);
  return failed ? report(*failed) : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const sluiced::ParseResult parsed = sluiced::parse_options(argc, argv);
  if (!parsed.error.empty()) return fail(ExitCode::kUsage, parsed.error + " (see sluiced --help)");
  const sluiced::Options& o = parsed.options;
  switch (o.mode) {
    case sluiced::Options::Mode::kHelp:
      std::fputs(sluiced::usage_text().c_str(), stdout);
      return 0;
    case sluiced::Options::Mode::kManual:
      std::fputs(sluiced::manual_text().c_str(), stdout);
      return 0;
    case sluiced::Options::Mode::kVersion:
      std::printf("sluiced %s\n", SLUICE_VERSION);
      return 0;
    default:
      break;
  }
  try {
    return o.mode == sluiced::Options::Mode::kCheckConfig ? check_config(o) : run(o, o.log);
  } catch (const std::bad_alloc&) {
    return fail(ExitCode::kNoMemory, "out of memory");
  } catch (const std::exception& e) {
    return fail(ExitCode::kRuntime, e.what());
  }
}

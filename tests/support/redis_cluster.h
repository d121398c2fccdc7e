// A Redis Cluster of a program's own (Debian's redis-server and redis-cli),
// for the router tests (control/cluster/redis_router.h) and perf/cluster_sync_bench:
// N primaries with R replicas each, on 127.0.0.1 only, on TCP ports (and
// cluster bus ports, set with --cluster-port) that were free when it started,
// each node in a directory of its own, no persistence; with replicas, a short
// node timeout so a failover takes a couple of seconds. A single primary
// (1, 0) gets every slot by hand (redis-cli --cluster create wants three
// primaries).
//
// Every process it starts is stopped by its PID (SIGKILL) in the destructor,
// which also runs when an ASSERT fails; the nodes are also made to die with
// the process that started them (PR_SET_PDEATHSIG: redis_processes.h), so
// that a test killed by a timeout or a crash leaves no redis-server behind
// either.
#pragma once

#include <hiredis/hiredis.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "control/cluster/redis_link.h"
#include "redis_processes.h"

namespace sluice::control {

class RedisCluster {
 public:
  using Clock = std::chrono::steady_clock;

  explicit RedisCluster(int primaries = 3, int replicas = 1) : primaries_(primaries), replicas_(replicas) {}
  ~RedisCluster() { stop_all(); }
  RedisCluster(const RedisCluster&) = delete;
  RedisCluster& operator=(const RedisCluster&) = delete;

  // Starts the nodes, makes them a cluster and waits (at most 20 s) until
  // every node says cluster_state:ok. On false, error() says why.
  [[nodiscard]] bool start() {
    if (!((primaries_ >= 3 && replicas_ >= 0) || (primaries_ == 1 && replicas_ == 0))) {
      return fail("a cluster is 1 primary alone, or 3 or more primaries");
    }
    server_path_ = redis_processes::find_on_path("redis-server");
    cli_path_ = redis_processes::find_on_path("redis-cli");
    if (server_path_.empty() || cli_path_.empty()) {
      return fail(
          "redis-server or redis-cli not found on PATH (Debian's redis-server and redis-tools: "
          "scripts/install-deps.sh test)");
    }
    // A port found free may be taken by someone else before the node binds
    // it: then start again, on other ports.
    for (int attempt = 0; attempt < 3; ++attempt) {
      if (start_nodes()) return form_cluster() && wait_ok(std::chrono::seconds(20));
      stop_all();
    }
    return false;
  }

  [[nodiscard]] const std::string& error() const noexcept { return error_; }

  // Every node still running.
  [[nodiscard]] std::vector<RedisEndpoint> endpoints() const {
    std::vector<RedisEndpoint> out;
    for (const Node& n : nodes_) {
      if (n.pid > 0) out.push_back(endpoint(n.port));
    }
    return out;
  }

  // Their PIDs, in the same order (perf/cluster_sync_bench reads the nodes'
  // CPU time from /proc/PID/schedstat).
  [[nodiscard]] std::vector<pid_t> pids() const {
    std::vector<pid_t> out;
    for (const Node& n : nodes_) {
      if (n.pid > 0) out.push_back(n.pid);
    }
    return out;
  }

  // Slot -> the port of its primary, as the first running node that answers
  // says (empty when none answers). 0: no primary serves the slot.
  [[nodiscard]] std::vector<uint16_t> slot_map() const {
    for (const Node& n : nodes_) {
      if (n.pid <= 0) continue;
      std::vector<uint16_t> map;
      if (slots_of(n.port, map)) return map;
    }
    return {};
  }

  // The primary of `slot` now, as a running node sees it.
  [[nodiscard]] std::optional<RedisEndpoint> primary_of(uint16_t slot) const {
    const std::vector<uint16_t> map = slot_map();
    if (map.empty() || map[slot] == 0) return std::nullopt;
    return endpoint(map[slot]);
  }

  // The distinct primaries that serve slots now, by port.
  [[nodiscard]] std::vector<RedisEndpoint> primaries() const {
    std::vector<uint16_t> map = slot_map();
    std::sort(map.begin(), map.end());
    map.erase(std::unique(map.begin(), map.end()), map.end());
    std::vector<RedisEndpoint> out;
    for (uint16_t p : map) {
      if (p != 0) out.push_back(endpoint(p));
    }
    return out;
  }

  // Kills (SIGKILL, by PID) the primary of `slot`; the one killed, or
  // nullopt when there was none to kill. wait_ok() then waits for its
  // replica to take over.
  std::optional<RedisEndpoint> kill_primary_of(uint16_t slot) {
    const auto p = primary_of(slot);
    if (!p) return std::nullopt;
    for (Node& n : nodes_) {
      if (n.pid > 0 && n.port == p->port) {
        stop(n);
        return p;
      }
    }
    return std::nullopt;
  }

  // Waits (at most `timeout`) until every running node says
  // cluster_state:ok and all of them agree on one slot map, in which a
  // running primary serves every slot (right after a kill, the survivors
  // still say ok until the node timeout: this waits past that, for the
  // replica's promotion).
  [[nodiscard]] bool wait_ok(std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      if (settled()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return fail("the cluster did not reach cluster_state:ok with every slot on a running primary in time");
  }

  // One command to the node at `e`, on a connection of its own.
  [[nodiscard]] static RedisLink::Result query(const RedisEndpoint& e, std::vector<std::string_view> argv) {
    return redis_processes::query(e, std::move(argv));
  }

  [[nodiscard]] static RedisEndpoint endpoint(uint16_t port) { return RedisEndpoint{"127.0.0.1", port, {}}; }

 private:
  struct Node {
    pid_t pid = 0;
    uint16_t port = 0, bus_port = 0;
    std::string dir;
  };

  bool fail(std::string why) {
    error_ = std::move(why);
    return false;
  }

  [[nodiscard]] bool start_nodes() {
    const size_t count = static_cast<size_t>(primaries_ * (1 + replicas_));
    namespace p = redis_processes;
    const std::vector<uint16_t> ports = p::free_ports(2 * count);
    if (ports.size() != 2 * count) return fail("could not find free loopback ports");
    for (size_t i = 0; i < count; ++i) {
      Node& n = nodes_.emplace_back();
      n.dir = p::make_dir("sluice-rcluster");
      if (n.dir.empty()) return fail("mkdtemp failed");
      n.port = ports[2 * i];
      n.bus_port = ports[2 * i + 1];
      n.pid = p::spawn(server_path_, server_args(n), n.dir, n.dir + "/stdout.log");
      if (n.pid <= 0) return fail("could not start " + server_path_);
    }
    for (Node& n : nodes_) {
      if (!p::answers(n.pid, endpoint(n.port))) {
        return fail("redis-server on 127.0.0.1:" + std::to_string(n.port) + " did not come up" +
                    p::log_tail(n.dir + "/redis.log"));
      }
    }
    return true;
  }

  // Loopback only; both ports set (the bus port too, so that it is one
  // found free); no persistence. With replicas, a node timeout of 1 s and no
  // limit on a replica's data age, so that a failover takes a couple of
  // seconds, and a replica's first sync without the default 5 s wait for
  // more replicas; primaries alone (perf/cluster_sync_bench's) keep Redis's
  // defaults.
  [[nodiscard]] std::vector<std::string> server_args(const Node& n) const {
    std::vector<std::pair<const char*, std::string>> options = {
        {"--bind", "127.0.0.1"},
        {"--port", std::to_string(n.port)},
        {"--cluster-port", std::to_string(n.bus_port)},
        {"--cluster-enabled", "yes"},
        {"--cluster-config-file", "nodes.conf"},
        {"--save", ""},
        {"--appendonly", "no"},
        {"--dir", n.dir},
        {"--logfile", n.dir + "/redis.log"},
        {"--daemonize", "no"},
    };
    if (replicas_ > 0) {
      options.insert(options.end(), {
                                        {"--cluster-node-timeout", "1000"},
                                        {"--cluster-replica-validity-factor", "0"},
                                        {"--repl-diskless-sync", "yes"},
                                        {"--repl-diskless-sync-delay", "0"},
                                    });
    }
    std::vector<std::string> args;
    for (const auto& [name, value] : options) {
      args.emplace_back(name);
      args.push_back(value);
    }
    return args;
  }

  [[nodiscard]] bool form_cluster() {
    if (primaries_ == 1) {
      const auto r = query(endpoint(nodes_[0].port), {"CLUSTER", "ADDSLOTSRANGE", "0", "16383"});
      return r.error == RedisError::kNone || fail("CLUSTER ADDSLOTSRANGE: " + r.detail);
    }
    std::vector<std::string> args = {"--cluster", "create"};
    for (const Node& n : nodes_) args.push_back("127.0.0.1:" + std::to_string(n.port));
    args.insert(args.end(), {"--cluster-replicas", std::to_string(replicas_), "--cluster-yes"});
    const std::string log = nodes_[0].dir + "/cluster-create.log";
    cli_pid_ = redis_processes::spawn(cli_path_, args, nodes_[0].dir, log);
    if (cli_pid_ <= 0) return fail("could not start " + cli_path_);
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    int status = 0;
    while (::waitpid(cli_pid_, &status, WNOHANG) == 0) {
      if (Clock::now() >= deadline) {
        redis_processes::kill_and_reap(cli_pid_);
        return fail("redis-cli --cluster create did not finish in 20 s" + redis_processes::log_tail(log));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    cli_pid_ = 0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      return fail("redis-cli --cluster create failed" + redis_processes::log_tail(log));
    return true;
  }

  // CLUSTER SLOTS from the node on `port`, as slot -> primary port.
  [[nodiscard]] static bool slots_of(uint16_t port, std::vector<uint16_t>& map) {
    const auto r = query(endpoint(port), {"CLUSTER", "SLOTS"});
    if (r.error != RedisError::kNone || !r.reply.is_array()) return false;
    map.assign(16384, 0);
    for (size_t i = 0; i < r.reply.elements(); ++i) {
      const auto* range = r.reply.element(i);
      if (range == nullptr || range->elements < 3 || range->element[2]->elements < 2) return false;
      const long long first = reply_integer(range->element[0]);
      const long long last = reply_integer(range->element[1]);
      const auto primary = static_cast<uint16_t>(reply_integer(range->element[2]->element[1]));
      if (first < 0 || last > 16383 || first > last) return false;
      std::fill(map.begin() + first, map.begin() + last + 1, primary);
    }
    return true;
  }

  [[nodiscard]] bool settled() const {
    std::vector<uint16_t> agreed;
    for (const Node& n : nodes_) {
      if (n.pid <= 0) continue;
      const auto info = query(endpoint(n.port), {"CLUSTER", "INFO"});
      if (info.error != RedisError::kNone || info.reply.text().find("cluster_state:ok") == std::string_view::npos) {
        return false;
      }
      std::vector<uint16_t> map;
      if (!slots_of(n.port, map) || (!agreed.empty() && map != agreed)) return false;
      agreed = std::move(map);
    }
    for (uint16_t p : agreed) {
      if (!running(p)) return false;
    }
    return !agreed.empty();
  }

  [[nodiscard]] bool running(uint16_t port) const {
    return std::any_of(nodes_.begin(), nodes_.end(), [port](const Node& n) { return n.pid > 0 && n.port == port; });
  }

  static void stop(Node& n) { redis_processes::kill_and_reap(n.pid); }

  void stop_all() {
    redis_processes::kill_and_reap(cli_pid_);
    for (Node& n : nodes_) {
      stop(n);
      std::error_code ec;
      if (!n.dir.empty()) std::filesystem::remove_all(n.dir, ec);
    }
    nodes_.clear();
  }

  int primaries_, replicas_;
  std::string server_path_, cli_path_, error_;
  std::vector<Node> nodes_;
  pid_t cli_pid_ = 0;
};

}  // namespace sluice::control

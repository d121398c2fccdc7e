// A Redis Cluster of a test's own (Debian's redis-server and redis-cli), for
// the router tests (control/redis_router.h): N primaries with R replicas
// each, on 127.0.0.1 only, on TCP ports (and cluster bus ports, set with
// --cluster-port) that were free when it started, each node in a directory
// of its own, no persistence, a short node timeout so a failover takes a
// couple of seconds. A single primary (1, 0) gets every slot by hand
// (redis-cli --cluster create wants three primaries).
//
// Every process it starts is stopped by its PID (SIGKILL) in the destructor,
// which also runs when an ASSERT fails; the nodes are also made to die with
// the test process (PR_SET_PDEATHSIG), so that a test killed by a timeout
// or a crash leaves no redis-server behind either.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "control/redis_link.h"

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
    server_path_ = find_on_path("redis-server");
    cli_path_ = find_on_path("redis-cli");
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
    RedisLink::Options o;
    o.connect_timeout = std::chrono::milliseconds(500);
    o.command_timeout = std::chrono::milliseconds(2000);
    RedisLink link(e, o);
    return link.command(argv, RedisLink::Clock::now());
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

  [[nodiscard]] static std::string find_on_path(const std::string& name) {
    const char* path = std::getenv("PATH");
    std::string_view rest = path != nullptr ? path : "/usr/bin:/bin";
    while (!rest.empty()) {
      const size_t colon = rest.find(':');
      const std::string candidate = std::string(rest.substr(0, colon)) + "/" + name;
      if (::access(candidate.c_str(), X_OK) == 0) return candidate;
      if (colon == std::string_view::npos) break;
      rest.remove_prefix(colon + 1);
    }
    return {};
  }

  // `count` distinct loopback ports, free now: all bound (port 0) at once,
  // so the kernel cannot hand the same one out twice, then released.
  [[nodiscard]] static std::vector<uint16_t> free_ports(size_t count) {
    std::vector<int> fds;
    std::vector<uint16_t> ports;
    for (size_t i = 0; i < count; ++i) {
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      if (fd < 0) break;
      fds.push_back(fd);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      socklen_t len = sizeof a;
      if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
          ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
        break;
      }
      ports.push_back(ntohs(a.sin_port));
    }
    for (int fd : fds) ::close(fd);
    return ports;
  }

  // fork+exec rather than posix_spawn: the child must ask to be killed when
  // the test process dies (PR_SET_PDEATHSIG), before it execs. Only
  // async-signal-safe calls between the two.
  [[nodiscard]] static pid_t spawn(const std::string& program, std::vector<std::string> args, const std::string& cwd,
                                   const std::string& output) {
    std::vector<char*> argv;
    args.insert(args.begin(), program);
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid != 0) return pid < 0 ? 0 : pid;
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    const int in = ::open("/dev/null", O_RDONLY);
    const int out = ::open(output.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (in < 0 || out < 0 || ::chdir(cwd.c_str()) != 0) ::_exit(127);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(out, 2);
    ::execv(program.c_str(), argv.data());
    ::_exit(127);
  }

  [[nodiscard]] bool start_nodes() {
    const size_t count = static_cast<size_t>(primaries_ * (1 + replicas_));
    const std::vector<uint16_t> ports = free_ports(2 * count);
    if (ports.size() != 2 * count) return fail("could not find free loopback ports");
    for (size_t i = 0; i < count; ++i) {
      char dir[] = "/tmp/sluice-rcluster-XXXXXX";
      if (::mkdtemp(dir) == nullptr) return fail("mkdtemp failed");
      Node& n = nodes_.emplace_back();
      n.dir = dir;
      n.port = ports[2 * i];
      n.bus_port = ports[2 * i + 1];
      n.pid = spawn(server_path_, server_args(n), n.dir, n.dir + "/stdout.log");
      if (n.pid <= 0) return fail("could not start " + server_path_);
    }
    for (Node& n : nodes_) {
      if (!answers(n)) {
        return fail("redis-server on 127.0.0.1:" + std::to_string(n.port) + " did not come up (see " + n.dir +
                    "/redis.log)");
      }
    }
    return true;
  }

  // Loopback only; both ports set (the bus port too, so that it is one
  // found free); no persistence; a node timeout of 1 s and no limit on a
  // replica's data age, so that a failover takes a couple of seconds; a
  // replica's first sync without the default 5 s wait for more replicas.
  [[nodiscard]] static std::vector<std::string> server_args(const Node& n) {
    const std::pair<const char*, std::string> options[] = {
        {"--bind", "127.0.0.1"},
        {"--port", std::to_string(n.port)},
        {"--cluster-port", std::to_string(n.bus_port)},
        {"--cluster-enabled", "yes"},
        {"--cluster-config-file", "nodes.conf"},
        {"--cluster-node-timeout", "1000"},
        {"--cluster-replica-validity-factor", "0"},
        {"--save", ""},
        {"--appendonly", "no"},
        {"--repl-diskless-sync", "yes"},
        {"--repl-diskless-sync-delay", "0"},
        {"--dir", n.dir},
        {"--logfile", n.dir + "/redis.log"},
        {"--daemonize", "no"},
    };
    std::vector<std::string> args;
    for (const auto& [name, value] : options) {
      args.emplace_back(name);
      args.push_back(value);
    }
    return args;
  }

  // Waits (at most 5 s) for a node to answer PING; false at once if it exited.
  [[nodiscard]] bool answers(Node& n) {
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    while (Clock::now() < deadline) {
      int status = 0;
      if (::waitpid(n.pid, &status, WNOHANG) == n.pid) {
        n.pid = 0;  // reaped: the port was taken, or the options refused
        return false;
      }
      if (query(endpoint(n.port), {"PING"}).error == RedisError::kNone) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
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
    cli_pid_ = spawn(cli_path_, args, nodes_[0].dir, log);
    if (cli_pid_ <= 0) return fail("could not start " + cli_path_);
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    int status = 0;
    while (::waitpid(cli_pid_, &status, WNOHANG) == 0) {
      if (Clock::now() >= deadline) {
        stop_cli();
        return fail("redis-cli --cluster create did not finish in 20 s (see " + log + ")");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    cli_pid_ = 0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      return fail("redis-cli --cluster create failed (see " + log + ")");
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

  static void stop(Node& n) {
    if (n.pid <= 0) return;
    ::kill(n.pid, SIGKILL);
    int status = 0;
    ::waitpid(n.pid, &status, 0);
    n.pid = 0;
  }

  void stop_cli() {
    if (cli_pid_ <= 0) return;
    ::kill(cli_pid_, SIGKILL);
    int status = 0;
    ::waitpid(cli_pid_, &status, 0);
    cli_pid_ = 0;
  }

  void stop_all() {
    stop_cli();
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

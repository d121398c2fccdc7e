// Redis servers of a benchmark's own (Debian's redis-server and redis-cli),
// for perf/cluster_sync_bench: the logic of tests/support/redis_server.h and
// tests/support/redis_cluster.h, trimmed to what a benchmark needs, so that
// perf/ does not include from tests/.
//
//   BenchRedis          one server on a Unix socket in a fresh mkdtemp
//                       directory, no TCP port, no persistence
//   BenchRedisCluster   N primaries (3 by default), no replicas, on loopback
//                       TCP ports found free, no persistence
//
// Every process is started by fork+exec with PR_SET_PDEATHSIG(SIGKILL), so it
// dies with the benchmark even when the benchmark crashes or is killed, and
// stopped by its PID (SIGKILL, then waitpid) in the destructor or stop(); the
// directories are removed then.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "control/redis_link.h"

namespace sluice::perf {

using control::RedisEndpoint;
using control::RedisError;
using control::RedisLink;

namespace redis_bench_detail {

[[nodiscard]] inline std::string find_on_path(const std::string& name) {
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

// fork+exec: the child asks to be killed when its parent dies before it
// execs (only async-signal-safe calls in between). Its output goes to
// `output`. 0 when it could not be started.
[[nodiscard]] inline pid_t spawn(const std::string& program, std::vector<std::string> args, const std::string& cwd,
                                 const std::string& output) {
  args.insert(args.begin(), program);
  std::vector<char*> argv;
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

inline void kill_and_reap(pid_t& pid) {
  if (pid <= 0) return;
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  pid = 0;
}

// True once it has exited (and is reaped).
[[nodiscard]] inline bool exited(pid_t& pid) {
  int status = 0;
  if (pid > 0 && ::waitpid(pid, &status, WNOHANG) == pid) pid = 0;
  return pid <= 0;
}

// `count` distinct loopback ports, free now: all bound (port 0) at once, so
// the kernel cannot hand out one twice, then released.
[[nodiscard]] inline std::vector<uint16_t> free_ports(size_t count) {
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

// The last non-empty line of a log, to quote in an error (the directory it
// is in goes when the server is stopped).
[[nodiscard]] inline std::string log_tail(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last.empty() ? std::string() : ": " + last;
}

[[nodiscard]] inline std::string make_dir(const char* prefix) {
  std::string pattern = std::string("/tmp/") + prefix + "-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) return {};
  return pattern;
}

}  // namespace redis_bench_detail

// One command to the server at `e`, on a connection of its own.
[[nodiscard]] inline RedisLink::Result redis_query(const RedisEndpoint& e, std::vector<std::string_view> argv) {
  RedisLink::Options o;
  o.connect_timeout = std::chrono::milliseconds(500);
  o.command_timeout = std::chrono::milliseconds(2000);
  o.backoff_min = std::chrono::milliseconds(0);
  RedisLink link(e, o);
  return link.command(argv, RedisLink::Clock::now());
}

// One server on a Unix socket of its own directory.
class BenchRedis {
 public:
  BenchRedis() = default;
  ~BenchRedis() { stop(); }
  BenchRedis(const BenchRedis&) = delete;
  BenchRedis& operator=(const BenchRedis&) = delete;

  // Starts it and waits (at most 5 s) until it answers PING. On false,
  // error() says why.
  [[nodiscard]] bool start() {
    namespace d = redis_bench_detail;
    const std::string server = d::find_on_path("redis-server");
    if (server.empty()) return fail("redis-server not found on PATH (Debian's redis-server)");
    dir_ = d::make_dir("sluice-bench-redis");
    if (dir_.empty()) return fail("mkdtemp failed");
    socket_ = dir_ + "/redis.sock";
    pid_ = d::spawn(server,
                    {"--port", "0", "--unixsocket", socket_, "--save", "", "--appendonly", "no", "--dir", dir_,
                     "--logfile", dir_ + "/redis.log", "--daemonize", "no"},
                    dir_, dir_ + "/stdout.log");
    if (pid_ <= 0) return fail("could not start " + server);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < deadline) {
      if (d::exited(pid_)) return fail("redis-server exited at start" + d::log_tail(dir_ + "/redis.log"));
      if (redis_query(endpoint(), {"PING"}).error == RedisError::kNone) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return fail("redis-server did not answer within 5 s" + d::log_tail(dir_ + "/redis.log"));
  }

  void stop() {
    redis_bench_detail::kill_and_reap(pid_);
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
    dir_.clear();
  }

  [[nodiscard]] RedisEndpoint endpoint() const { return RedisEndpoint{{}, 0, socket_}; }
  [[nodiscard]] pid_t pid() const noexcept { return pid_; }
  [[nodiscard]] const std::string& error() const noexcept { return error_; }

 private:
  bool fail(std::string why) {
    error_ = std::move(why);
    stop();
    return false;
  }

  std::string dir_, socket_, error_;
  pid_t pid_ = 0;
};

// A Redis Cluster of primaries only (redis-cli --cluster create wants 3 or
// more), each node in a directory of its own, on 127.0.0.1.
class BenchRedisCluster {
 public:
  explicit BenchRedisCluster(int primaries = 3) : primaries_(primaries) {}
  ~BenchRedisCluster() { stop(); }
  BenchRedisCluster(const BenchRedisCluster&) = delete;
  BenchRedisCluster& operator=(const BenchRedisCluster&) = delete;

  // Starts the nodes, makes them a cluster and waits (at most 20 s) until
  // every node says cluster_state:ok. On false, error() says why.
  [[nodiscard]] bool start() {
    namespace d = redis_bench_detail;
    if (primaries_ < 3) return fail("redis-cli --cluster create wants at least 3 primaries");
    const std::string server = d::find_on_path("redis-server");
    const std::string cli = d::find_on_path("redis-cli");
    if (server.empty() || cli.empty()) {
      return fail("redis-server or redis-cli not found on PATH (Debian's redis-server and redis-tools)");
    }
    // A port found free may be taken by someone else before the node binds
    // it: then start again, on other ports.
    for (int attempt = 0; attempt < 3; ++attempt) {
      if (start_nodes(server)) return form(cli) && wait_ok(std::chrono::seconds(20));
      stop();
    }
    return false;
  }

  void stop() {
    redis_bench_detail::kill_and_reap(cli_pid_);
    for (Node& n : nodes_) {
      redis_bench_detail::kill_and_reap(n.pid);
      std::error_code ec;
      if (!n.dir.empty()) std::filesystem::remove_all(n.dir, ec);
    }
    nodes_.clear();
  }

  [[nodiscard]] std::vector<RedisEndpoint> endpoints() const {
    std::vector<RedisEndpoint> out;
    for (const Node& n : nodes_) out.push_back(endpoint(n.port));
    return out;
  }
  [[nodiscard]] std::vector<pid_t> pids() const {
    std::vector<pid_t> out;
    for (const Node& n : nodes_) out.push_back(n.pid);
    return out;
  }
  [[nodiscard]] const std::string& error() const noexcept { return error_; }

 private:
  struct Node {
    pid_t pid = 0;
    uint16_t port = 0, bus_port = 0;
    std::string dir;
  };

  [[nodiscard]] static RedisEndpoint endpoint(uint16_t port) { return RedisEndpoint{"127.0.0.1", port, {}}; }

  bool fail(std::string why) {
    error_ = std::move(why);
    return false;
  }

  [[nodiscard]] bool start_nodes(const std::string& server) {
    namespace d = redis_bench_detail;
    const size_t count = static_cast<size_t>(primaries_);
    const std::vector<uint16_t> ports = d::free_ports(2 * count);
    if (ports.size() != 2 * count) return fail("could not find free loopback ports");
    for (size_t i = 0; i < count; ++i) {
      Node& n = nodes_.emplace_back();
      n.dir = d::make_dir("sluice-bench-rcluster");
      if (n.dir.empty()) return fail("mkdtemp failed");
      n.port = ports[2 * i];
      n.bus_port = ports[2 * i + 1];
      n.pid = d::spawn(server,
                       {"--bind", "127.0.0.1", "--port", std::to_string(n.port), "--cluster-port",
                        std::to_string(n.bus_port), "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                        "--save", "", "--appendonly", "no", "--dir", n.dir, "--logfile", n.dir + "/redis.log",
                        "--daemonize", "no"},
                       n.dir, n.dir + "/stdout.log");
      if (n.pid <= 0) return fail("could not start " + server);
    }
    for (Node& n : nodes_) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      bool up = false;
      while (!up && std::chrono::steady_clock::now() < deadline) {
        if (d::exited(n.pid)) break;  // the port was taken, or the options refused
        up = redis_query(endpoint(n.port), {"PING"}).error == RedisError::kNone;
        if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      if (!up) {
        return fail("redis-server on 127.0.0.1:" + std::to_string(n.port) + " did not come up" +
                    d::log_tail(n.dir + "/redis.log"));
      }
    }
    return true;
  }

  [[nodiscard]] bool form(const std::string& cli) {
    namespace d = redis_bench_detail;
    std::vector<std::string> args = {"--cluster", "create"};
    for (const Node& n : nodes_) args.push_back("127.0.0.1:" + std::to_string(n.port));
    args.insert(args.end(), {"--cluster-replicas", "0", "--cluster-yes"});
    const std::string log = nodes_[0].dir + "/cluster-create.log";
    cli_pid_ = d::spawn(cli, args, nodes_[0].dir, log);
    if (cli_pid_ <= 0) return fail("could not start " + cli);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    int status = 0;
    while (::waitpid(cli_pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() >= deadline) {
        d::kill_and_reap(cli_pid_);
        return fail("redis-cli --cluster create did not finish in 20 s" + d::log_tail(log));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    cli_pid_ = 0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      return fail("redis-cli --cluster create failed" + d::log_tail(log));
    }
    return true;
  }

  [[nodiscard]] bool wait_ok(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      bool ok = true;
      for (const Node& n : nodes_) {
        const auto info = redis_query(endpoint(n.port), {"CLUSTER", "INFO"});
        ok = ok && info.error == RedisError::kNone &&
             info.reply.text().find("cluster_state:ok") != std::string_view::npos;
      }
      if (ok) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return fail("the cluster did not reach cluster_state:ok in time");
  }

  int primaries_;
  std::vector<Node> nodes_;
  pid_t cli_pid_ = 0;
  std::string error_;
};

}  // namespace sluice::perf

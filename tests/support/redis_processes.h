// The process handling under the Redis servers a program starts of its own
// (Debian's redis-server and redis-cli): redis_server.h (one server on a Unix
// socket) and redis_cluster.h (a Redis Cluster on 127.0.0.1) are built on it,
// and both the tests and perf/cluster_sync_bench use those.
//
// Every process is started by fork+exec with PR_SET_PDEATHSIG(SIGKILL), so it
// dies with the program even when the program crashes or is killed (a test's
// timeout), and is stopped by its PID (SIGKILL, then waitpid); nothing is
// found or killed by name. Listening ports are on loopback only.
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
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "control/cluster/redis_link.h"

namespace sluice::control::redis_processes {

// The first executable `name` on PATH; empty when there is none.
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

// fork+exec rather than posix_spawn: the child must ask to be killed when
// its parent dies (PR_SET_PDEATHSIG), before it execs. Only
// async-signal-safe calls between the two. It runs in `cwd`, stdin from
// /dev/null, stdout and stderr to `output`. 0 when it could not be started.
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

// SIGKILL by PID and reap; `pid` is 0 afterwards. Nothing when it is not
// running.
inline void kill_and_reap(pid_t& pid) {
  if (pid <= 0) return;
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  pid = 0;
}

// True once it has exited (and is reaped: `pid` is 0 then).
[[nodiscard]] inline bool exited(pid_t& pid) {
  int status = 0;
  if (pid > 0 && ::waitpid(pid, &status, WNOHANG) == pid) pid = 0;
  return pid <= 0;
}

// `count` distinct loopback ports, free now: all bound (port 0) at once, so
// the kernel cannot hand the same one out twice, then released.
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

// The last non-empty line of a log, as ": line", to quote in an error (the
// directory it is in goes when the server is stopped); empty when none.
[[nodiscard]] inline std::string log_tail(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last.empty() ? std::string() : ": " + last;
}

// A fresh directory /tmp/PREFIX-XXXXXX (mkdtemp); empty when it failed.
[[nodiscard]] inline std::string make_dir(const char* prefix) {
  std::string pattern = std::string("/tmp/") + prefix + "-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) return {};
  return pattern;
}

// One command to the server at `e`, on a connection of its own.
[[nodiscard]] inline RedisLink::Result query(const RedisEndpoint& e, std::vector<std::string_view> argv) {
  RedisLink::Options o;
  o.connect_timeout = std::chrono::milliseconds(500);
  o.command_timeout = std::chrono::milliseconds(2000);
  RedisLink link(e, o);
  return link.command(argv, RedisLink::Clock::now());
}

// Waits (at most 5 s) until the server `pid` started answers PING at `e`;
// false at once when it exited (reaped: `pid` is 0 then; the port was taken,
// or the options refused), false too when it did not answer in time (it is
// left running: its owner stops it).
[[nodiscard]] inline bool answers(pid_t& pid, const RedisEndpoint& e) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    if (exited(pid)) return false;
    // A server that wants credentials answers too (NOAUTH).
    const RedisError r = query(e, {"PING"}).error;
    if (r == RedisError::kNone || r == RedisError::kAuth) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

}  // namespace sluice::control::redis_processes

// A redis-server of a program's own (Debian's), on a Unix socket in a fresh
// directory, no persistence, no TCP port; started and stopped by its PID, and
// made to die with the program (redis_processes.h). For the cluster budget
// tests (control/cluster/redis_link.h and what builds on it) and
// perf/cluster_sync_bench.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "control/cluster/redis_link.h"
#include "redis_processes.h"

namespace sluice::control {

class RedisServer {
 public:
  // The directory (and so the socket's path) is made here and kept until
  // the destructor: a server stopped and started again is on the same socket.
  // `extra`: more of redis-server's options (e.g. --requirepass PASSWORD).
  explicit RedisServer(std::vector<std::string> extra = {})
      : dir_(redis_processes::make_dir("sluice-redis")), extra_(std::move(extra)) {
    if (!dir_.empty()) socket_ = dir_ + "/redis.sock";
  }
  ~RedisServer() {
    stop();
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  // Starts it (true at once when it runs) and waits (at most 5 s) until it
  // answers PING. On false, error() says why.
  [[nodiscard]] bool start() {
    namespace p = redis_processes;
    if (pid_ > 0) return true;
    if (dir_.empty()) return fail("mkdtemp failed");
    const std::string server = p::find_on_path("redis-server");
    if (server.empty()) return fail("redis-server not found on PATH (Debian's redis-server)");
    std::vector<std::string> args{"--port", "0", "--unixsocket", socket_, "--save", "", "--appendonly", "no",
                                  "--dir", dir_, "--logfile", dir_ + "/redis.log", "--daemonize", "no"};
    args.insert(args.end(), extra_.begin(), extra_.end());
    pid_ = p::spawn(server, args, dir_, dir_ + "/stdout.log");
    if (pid_ <= 0) return fail("could not start " + server);
    if (p::answers(pid_, endpoint())) return true;
    const bool exited = pid_ <= 0;
    stop();
    return fail((exited ? "redis-server exited at start" : "redis-server did not answer within 5 s") +
                p::log_tail(dir_ + "/redis.log"));
  }

  // Kills it (by PID); the directory stays, for start() again.
  void stop() {
    redis_processes::kill_and_reap(pid_);
    std::error_code ec;
    if (!socket_.empty()) std::filesystem::remove(socket_, ec);
  }

  [[nodiscard]] RedisEndpoint endpoint() const { return RedisEndpoint{{}, 0, socket_}; }
  // 0 when it is not running.
  [[nodiscard]] pid_t pid() const noexcept { return pid_; }
  [[nodiscard]] const std::string& error() const noexcept { return error_; }

 private:
  bool fail(std::string why) {
    error_ = std::move(why);
    return false;
  }

  std::string dir_, socket_, error_;
  std::vector<std::string> extra_;
  pid_t pid_ = 0;
};

}  // namespace sluice::control

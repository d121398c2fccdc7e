// A redis-server of a test's own (Debian's), on a Unix socket in a fresh
// directory, no persistence, no TCP port; started and stopped by its PID.
// For the cluster budget tests (control/redis_link.h and what builds on it).
#pragma once

#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "control/redis_link.h"

extern char** environ;

namespace sluice::control {

// A redis-server of the test's own: no persistence, no TCP port.
class RedisServer {
 public:
  RedisServer() {
    char dir[] = "/tmp/sluice-redis-XXXXXX";
    if (mkdtemp(dir) == nullptr) return;
    dir_ = dir;
    socket_ = dir_ + "/redis.sock";
  }
  ~RedisServer() {
    stop();
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  // Starts it and waits (at most 5 s) until its socket takes connections.
  [[nodiscard]] bool start() {
    if (dir_.empty()) return false;
    std::vector<std::string> args = {"redis-server", "--port",    "0",         "--unixsocket", socket_,
                                     "--save",       "",          "--appendonly", "no",        "--dir",
                                     dir_,           "--logfile", dir_ + "/redis.log"};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawnp(&pid_, "redis-server", nullptr, nullptr, argv.data(), environ) != 0) {
      pid_ = 0;
      return false;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < deadline) {
      if (accepts()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  void stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = 0;
    std::error_code ec;
    std::filesystem::remove(socket_, ec);
  }
  [[nodiscard]] RedisEndpoint endpoint() const { return RedisEndpoint{{}, 0, socket_}; }

 private:
  [[nodiscard]] bool accepts() const {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    socket_.copy(a.sun_path, sizeof a.sun_path - 1);
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    return ok;
  }

  std::string dir_, socket_;
  pid_t pid_ = 0;
};

}  // namespace sluice::control

// The control thread's socket: a Unix stream socket speaking line-delimited
// JSON (one request object per line, one response object per line; see
// protocol.h). Created 0660, owned by root and an optional group, and every
// peer is checked again with SO_PEERCRED. Runs in its own thread, never on a
// worker lcore; serving a request touches nothing a worker writes except by
// reading its counters.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "json.h"

namespace sluice::control {

class ControlServer {
 public:
  // Answers one request (an object) with one response object, as JSON text.
  using Handler = std::function<std::string(const JsonValue& request)>;

  ControlServer() = default;
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;
  ~ControlServer();

  // Creates the socket at `path` (and its directory, 0755, if missing),
  // group `group` (-1: keep the process's). Returns an empty string, or what
  // went wrong. A stale socket file (nobody listening) is replaced; a live
  // one is an error, so two sluiced never share a socket.
  [[nodiscard]] std::string open(const std::string& path, gid_t group);

  // Serves until `stop` is set (checked every 100 ms).
  void serve(const std::atomic<bool>& stop, const Handler& handler);

  [[nodiscard]] const std::string& path() const noexcept { return path_; }

 private:
  struct Client {
    int fd;
    std::string in;
  };
  void accept_client();
  bool serve_client(Client& c, const Handler& handler);  // false: close it

  std::string path_;
  int listen_fd_ = -1;
  gid_t group_ = static_cast<gid_t>(-1);
  std::vector<Client> clients_;
};

}  // namespace sluice::control

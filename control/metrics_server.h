// Prometheus text exposition (version 0.0.4) on a plain kernel TCP socket of
// the management side (`sluiced --metrics ADDR:PORT`): GET /metrics answers
// with what a callback renders; anything else gets 404. Its own thread, a
// connection at a time, short timeouts: a scraper cannot hold it up.
#pragma once

#include <atomic>
#include <functional>
#include <string>

namespace sluice::control {

class MetricsServer {
 public:
  using Render = std::function<std::string()>;

  MetricsServer() = default;
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;
  ~MetricsServer();

  // Listens on "ADDR:PORT" (IPv4, or [IPv6]:PORT). Empty string, or what went wrong.
  [[nodiscard]] std::string open(const std::string& address);
  // Serves until `stop` is set (checked every 100 ms).
  void serve(const std::atomic<bool>& stop, const Render& render);

 private:
  void answer(int fd, const Render& render);
  int listen_fd_ = -1;
};

}  // namespace sluice::control

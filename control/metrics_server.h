// Prometheus text exposition (version 0.0.4) on a plain kernel TCP socket of
// the management side (`sluiced --metrics ADDR:PORT`): GET /metrics answers
// with what a callback renders; anything else gets 404. Its own thread, a
// connection at a time, with deadlines for the whole request (2 s, 8 KiB)
// and the whole response (5 s): a client that trickles its bytes, or does
// not read, holds it up no longer than that.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>

namespace sluice::control {

class MetricsServer {
 public:
  using Render = std::function<std::string()>;
  static constexpr std::chrono::milliseconds kRequestDeadline{2000};
  static constexpr std::chrono::milliseconds kReplyDeadline{5000};
  static constexpr size_t kMaxRequestBytes = 8192;

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

// One request per connection (HTTP/1.0 style: the response is closed).
#include "metrics_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <charconv>
#include <cstring>

namespace sluice::control {

MetricsServer::~MetricsServer() {
  if (listen_fd_ >= 0) close(listen_fd_);
}

std::string MetricsServer::open(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    return "--metrics wants ADDR:PORT (e.g. 127.0.0.1:9464 or [::1]:9464), got '" + address + "'";
  }
  std::string host = address.substr(0, colon);
  const std::string port_text = address.substr(colon + 1);
  unsigned port = 0;
  const auto [p, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc{} || p != port_text.data() + port_text.size() || port == 0 || port > 65535) {
    return "--metrics: bad port '" + port_text + "'";
  }
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(static_cast<uint16_t>(port));
    if (inet_pton(AF_INET6, host.c_str(), &a->sin6_addr) != 1) return "--metrics: bad IPv6 address '" + host + "'";
    len = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_port = htons(static_cast<uint16_t>(port));
    if (inet_pton(AF_INET, host.c_str(), &a->sin_addr) != 1) return "--metrics: bad IPv4 address '" + host + "'";
    len = sizeof *a;
  }
  listen_fd_ = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listen_fd_ < 0) return std::string("--metrics: socket: ") + std::strerror(errno);
  const int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&ss), len) != 0 || listen(listen_fd_, 16) != 0) {
    return "--metrics: cannot listen on " + address + ": " + std::strerror(errno);
  }
  return {};
}

namespace {

using Clock = std::chrono::steady_clock;

// Waits until `fd` is ready for `events` or `deadline` passes: false then.
bool ready(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, static_cast<int>(left));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

}  // namespace

void MetricsServer::answer(int fd, const Render& render) {
  // Deadlines for the whole request and the whole response, not for each
  // read or write: a client trickling bytes is dropped when they pass.
  const Clock::time_point request_deadline = Clock::now() + kRequestDeadline;
  std::string request;
  char buf[2048];
  while (request.find("\r\n\r\n") == std::string::npos && request.size() < kMaxRequestBytes) {
    if (!ready(fd, POLLIN, request_deadline)) return;
    const ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0) return;
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return;
    }
    request.append(buf, static_cast<size_t>(n));
  }
  const bool metrics = request.rfind("GET /metrics ", 0) == 0 || request.rfind("GET /metrics?", 0) == 0;
  const std::string body = metrics ? render() : "not found: try /metrics\n";
  std::string response = metrics ? "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
                                 : "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\n";
  response += "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
  const Clock::time_point reply_deadline = Clock::now() + kReplyDeadline;
  size_t sent = 0;
  while (sent < response.size()) {
    if (!ready(fd, POLLOUT, reply_deadline)) return;
    const ssize_t n = send(fd, response.data() + sent, response.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return;
    }
    sent += static_cast<size_t>(n);
  }
}

void MetricsServer::serve(const std::atomic<bool>& stop, const Render& render) {
  while (!stop.load(std::memory_order_relaxed)) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) continue;
    answer(fd, render);
    close(fd);
  }
}

}  // namespace sluice::control

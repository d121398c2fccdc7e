// One connection from the control thread to a Redis server, for budgets
// that hold across several boxes (cluster mode): Debian's hiredis
// under RAII, a connect and a command timeout so a slow server never holds
// the control thread for long, and a back-off so that an unreachable server
// costs one connection attempt per back-off period, not one per sync.
//
// Never on the data path: the workers decide on their own tables and never
// wait for Redis. Blocking calls, one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "control/cluster/redis_tls.h"
#include "net/endpoint.h"

struct redisContext;
struct redisReply;

namespace sluice::control {

enum class RedisError : uint8_t {
  kNone,
  kUnreachable,     // no connection could be made (refused, no such socket, timeout)
  kBackingOff,      // the last attempt failed recently: no new one yet (see RedisLink::Options)
  kConnectionLost,  // the connection broke, or a reply did not come within the command timeout
  kServer,          // the server answered with an error (the detail holds its text)
  kProtocol,        // a reply of a shape the caller did not expect
  kAuth,            // the server refused our credentials, or wants some (WRONGPASS, NOAUTH): a setup error,
                    // not a passing failure
  kTls,             // the TLS handshake failed (a certificate that does not verify, a name that does not
                    // match, a client certificate wanted): a setup error too
};

// Errors no retry mends: sluiced does not start on them.
[[nodiscard]] constexpr bool is_setup_error(RedisError e) noexcept {
  return e == RedisError::kAuth || e == RedisError::kTls;
}

[[nodiscard]] std::string_view to_string(RedisError e) noexcept;

// Where a Redis server listens: HOST:PORT, [IPV6]:PORT, or unix:PATH.
using RedisEndpoint = net::Endpoint;
inline std::optional<RedisEndpoint> parse_redis_endpoint(std::string_view text, std::string& error) {
  return net::parse_endpoint(text, error);
}

// A reply, owned (freed with hiredis's freeReplyObject).
class RedisReply {
 public:
  RedisReply() = default;
  explicit RedisReply(redisReply* r) noexcept : r_(r) {}

  [[nodiscard]] explicit operator bool() const noexcept { return r_ != nullptr; }
  [[nodiscard]] bool is_error() const noexcept;
  [[nodiscard]] bool is_integer() const noexcept;
  [[nodiscard]] bool is_array() const noexcept;
  [[nodiscard]] bool is_nil() const noexcept;
  [[nodiscard]] long long integer() const noexcept;
  // The text of a string, status or error reply.
  [[nodiscard]] std::string_view text() const noexcept;
  [[nodiscard]] size_t elements() const noexcept;
  // Element i of an array reply, as a view (owned by this reply).
  [[nodiscard]] const redisReply* element(size_t i) const noexcept;

 private:
  struct Free {
    void operator()(redisReply* r) const noexcept;
  };
  std::unique_ptr<redisReply, Free> r_;
};

// Reads an element returned by RedisReply::element().
[[nodiscard]] bool reply_is_integer(const redisReply* r) noexcept;
[[nodiscard]] long long reply_integer(const redisReply* r) noexcept;

class RedisLink {
 public:
  using Clock = std::chrono::steady_clock;
  struct Options {
    std::chrono::milliseconds connect_timeout{250};
    std::chrono::milliseconds command_timeout{250};
    // After a failure, the next attempt waits this long, doubling up to the
    // maximum; a success starts again from the minimum.
    std::chrono::milliseconds backoff_min{100};
    std::chrono::milliseconds backoff_max{5000};
    // AUTH on every new connection, when a password is given: as the ACL
    // user `username`, or (empty) as Redis's `default` user (requirepass).
    std::string username;
    std::string password;
    // TLS (redis_tls.h), shared by every link; null: plain TCP or a Unix socket.
    std::shared_ptr<const RedisTlsContext> tls;
  };

  struct Result {
    RedisError error = RedisError::kNone;
    std::string detail;  // what went wrong, one line
    RedisReply reply;    // with kNone or kServer
  };

  RedisLink(RedisEndpoint endpoint, Options options);
  ~RedisLink();
  RedisLink(const RedisLink&) = delete;
  RedisLink& operator=(const RedisLink&) = delete;

  // Sends one command and waits for its reply, connecting first if there is
  // no connection (unless backing off at `now`; a new connection
  // authenticates first). A server error reply is kServer with its text,
  // kAuth where it is about credentials; a broken connection is closed, and
  // the next command connects again.
  [[nodiscard]] Result command(std::span<const std::string_view> argv, Clock::time_point now);
  // command() in two halves, so commands to several nodes (or several to
  // one) are on their way at once: begin() connects if need be and writes
  // the command (an error: nothing is pending); finish() reads the reply of
  // the oldest command begun and not finished. Each begun command is
  // finished, in order, before the link is used otherwise.
  [[nodiscard]] Result begin(std::span<const std::string_view> argv, Clock::time_point now);
  [[nodiscard]] Result finish(Clock::time_point now);

  [[nodiscard]] bool connected() const noexcept { return ctx_ != nullptr || tls_ != nullptr; }
  [[nodiscard]] const RedisEndpoint& endpoint() const noexcept { return endpoint_; }
  // Connection attempts made, and how many of them failed.
  [[nodiscard]] uint64_t connects() const noexcept { return connects_; }
  [[nodiscard]] uint64_t failed_connects() const noexcept { return failed_connects_; }

 private:
  [[nodiscard]] RedisError connect(Clock::time_point now, std::string& detail);
  [[nodiscard]] RedisError authenticate(Clock::time_point now, std::string& detail);
  // A command written whole to the open connection; false when it broke.
  [[nodiscard]] bool write(std::span<const std::string_view> argv);
  // The next reply on the open connection; null when it broke or timed out.
  [[nodiscard]] redisReply* read();
  // The connection broke: closed, said, backing off.
  [[nodiscard]] Result broke(Clock::time_point now);
  void drop(Clock::time_point now) noexcept;

  RedisEndpoint endpoint_;
  Options options_;
  redisContext* ctx_ = nullptr;               // plain TCP or a Unix socket: hiredis's own
  std::unique_ptr<TlsRedisConnection> tls_;   // or TLS: OpenSSL's, hiredis's protocol over it
  Clock::time_point retry_at_{};
  std::chrono::milliseconds backoff_{0};
  uint64_t connects_ = 0;
  uint64_t failed_connects_ = 0;
  size_t pending_ = 0;  // commands begun, not finished
};

}  // namespace sluice::control

// TLS for the links to Redis: Debian 12's hiredis (0.14) has no TLS, so a
// TLS connection is OpenSSL's (libssl: the handshake, the certificate
// checks, the records) with hiredis still speaking Redis's protocol over it
// (redisFormatCommandArgv writes a command, redisReader reads a reply). No
// TLS of our own: we open a socket, hand it to OpenSSL, and move bytes.
//
// RedisTlsContext holds what every connection shares (the CA, an optional
// client certificate, the name to check), loaded once at start, so a file
// that cannot be read is a start-up error. TlsRedisConnection is one
// connection, blocking with the link's timeouts, on the control thread only.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <span>

#include "net/endpoint.h"

struct ssl_ctx_st;
struct ssl_st;
struct redisReply;
struct redisReader;

namespace sluice::control {

struct RedisTlsFiles {
  std::string ca_file;      // the CA that signed the servers' certificates (PEM)
  std::string cert_file;    // a client certificate, where Redis asks for one (tls-auth-clients); empty: none
  std::string key_file;     // its key
  std::string server_name;  // the name every server's certificate must carry; empty: each endpoint's host
};

class RedisTlsContext {
 public:
  // nullptr, with `error` naming the file and OpenSSL's reason, when the CA
  // or the client certificate cannot be loaded.
  [[nodiscard]] static std::shared_ptr<const RedisTlsContext> make(const RedisTlsFiles& files, std::string& error);
  ~RedisTlsContext();
  RedisTlsContext(const RedisTlsContext&) = delete;
  RedisTlsContext& operator=(const RedisTlsContext&) = delete;

  [[nodiscard]] ssl_ctx_st* ctx() const noexcept { return ctx_; }
  [[nodiscard]] const std::string& server_name() const noexcept { return server_name_; }
  [[nodiscard]] bool client_certificate() const noexcept { return client_cert_; }

 private:
  RedisTlsContext() = default;
  ssl_ctx_st* ctx_ = nullptr;
  std::string server_name_;
  bool client_cert_ = false;
};

class TlsRedisConnection {
 public:
  enum class Failure : uint8_t {
    kNone,
    kConnect,  // no TCP connection (refused, unreachable, timeout)
    kTls,      // the handshake failed: a certificate that does not verify, a name that does not match, no
               // client certificate where one is wanted; a setup error, not a passing one
  };
  struct Opened {
    std::unique_ptr<TlsRedisConnection> connection;
    Failure failure = Failure::kNone;
    std::string error;  // one line: where, and why
  };
  [[nodiscard]] static Opened open(const net::Endpoint& endpoint, const RedisTlsContext& tls,
                                   std::chrono::milliseconds connect_timeout, std::chrono::milliseconds command_timeout);
  ~TlsRedisConnection();
  TlsRedisConnection(const TlsRedisConnection&) = delete;
  TlsRedisConnection& operator=(const TlsRedisConnection&) = delete;

  // Sends the command and reads its reply (hiredis's object, the caller
  // frees it); null when the connection broke or timed out (error() says).
  [[nodiscard]] redisReply* command(std::span<const std::string_view> argv);
  // command() in halves (pipelining): the command written whole (false
  // when the connection broke), and the next reply read.
  [[nodiscard]] bool write_command(std::span<const std::string_view> argv);
  [[nodiscard]] redisReply* read_reply();
  [[nodiscard]] const std::string& error() const noexcept { return error_; }
  // The server ended the session with a TLS alert after the handshake (TLS
  // 1.3 says "certificate required" only then): a setup error, as a failed
  // handshake is.
  [[nodiscard]] bool refused() const noexcept { return refused_; }

 private:
  TlsRedisConnection(int fd, ssl_st* ssl, redisReader* reader) noexcept : fd_(fd), ssl_(ssl), reader_(reader) {}
  int fd_;
  ssl_st* ssl_;
  redisReader* reader_;
  std::string error_;
  bool refused_ = false;
  bool certificate_asked_ = false;  // the server asked for a client certificate we do not have
};

}  // namespace sluice::control

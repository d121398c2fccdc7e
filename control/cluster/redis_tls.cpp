// See redis_tls.h.
#include "control/cluster/redis_tls.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace sluice::control {
namespace {

// OpenSSL's queued errors as one line (the queue emptied).
std::string openssl_errors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    out += (out.empty() ? "" : "; ") + std::string(buf);
  }
  return out.empty() ? "no detail from OpenSSL" : out;
}

constexpr const char* kCertificateWanted =
    "the server wants a client certificate (tls-auth-clients) and none is given (cluster tls cert_file, key_file)";

bool is_ip(const std::string& host) {
  in6_addr a{};
  return inet_pton(AF_INET, host.c_str(), &a) == 1 || inet_pton(AF_INET6, host.c_str(), &a) == 1;
}

timeval to_timeval(std::chrono::milliseconds ms) noexcept {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

// A TCP connection within `timeout`, then blocking with `io_timeout` on
// every read and write; -1 with `error`.
int connect_tcp(const net::Endpoint& e, std::chrono::milliseconds timeout, std::chrono::milliseconds io_timeout,
                std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(e.port);
  if (const int rc = getaddrinfo(e.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    error = gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
      error = std::strerror(errno);
      ::close(fd);
      fd = -1;
      continue;
    }
    pollfd p{fd, POLLOUT, 0};
    int so_error = 0;
    socklen_t len = sizeof so_error;
    const int ready = ::poll(&p, 1, static_cast<int>(timeout.count()));
    if (ready <= 0 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len) != 0 || so_error != 0) {
      error = ready == 0 ? "connection timed out" : std::strerror(so_error != 0 ? so_error : errno);
      ::close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) return -1;
  const int flags = ::fcntl(fd, F_GETFL);
  const timeval tv = to_timeval(io_timeout);
  const int one = 1;
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0 ||
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0 ||
      ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0 ||
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) {
    error = std::strerror(errno);
    ::close(fd);
    return -1;
  }
  return fd;
}

// Called when the server asks for a client certificate and none is set:
// noted (the connection's app data), and none sent. The server may take
// that (tls-auth-clients optional); where it does not, its refusal comes
// under TLS 1.3 only after the handshake, and may reach us as a reset
// rather than an alert: the note says then what it was.
int no_client_certificate(SSL* ssl, X509** /*cert*/, EVP_PKEY** /*key*/) {
  if (auto* asked = static_cast<bool*>(SSL_get_app_data(ssl))) *asked = true;
  return 0;
}

}  // namespace

std::shared_ptr<const RedisTlsContext> RedisTlsContext::make(const RedisTlsFiles& files, std::string& error) {
  std::shared_ptr<RedisTlsContext> t(new RedisTlsContext());
  t->ctx_ = SSL_CTX_new(TLS_client_method());
  if (t->ctx_ == nullptr) {
    error = "cannot make a TLS context: " + openssl_errors();
    return nullptr;
  }
  // TLS 1.2 at least (Redis 6+ speaks 1.2 and 1.3); the peer is always verified.
  SSL_CTX_set_min_proto_version(t->ctx_, TLS1_2_VERSION);
  SSL_CTX_set_verify(t->ctx_, SSL_VERIFY_PEER, nullptr);
  if (SSL_CTX_load_verify_locations(t->ctx_, files.ca_file.c_str(), nullptr) != 1) {
    error = "cluster tls ca_file " + files.ca_file + ": cannot be loaded (" + openssl_errors() + ")";
    return nullptr;
  }
  if (!files.cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(t->ctx_, files.cert_file.c_str()) != 1) {
      error = "cluster tls cert_file " + files.cert_file + ": cannot be loaded (" + openssl_errors() + ")";
      return nullptr;
    }
    if (SSL_CTX_use_PrivateKey_file(t->ctx_, files.key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(t->ctx_) != 1) {
      error = "cluster tls key_file " + files.key_file + ": cannot be loaded, or is not cert_file's key (" +
              openssl_errors() + ")";
      return nullptr;
    }
    t->client_cert_ = true;
  } else {
    SSL_CTX_set_client_cert_cb(t->ctx_, no_client_certificate);
  }
  t->server_name_ = files.server_name;
  return t;
}

RedisTlsContext::~RedisTlsContext() {
  if (ctx_ != nullptr) SSL_CTX_free(ctx_);
}

TlsRedisConnection::Opened TlsRedisConnection::open(const net::Endpoint& endpoint, const RedisTlsContext& tls,
                                                    std::chrono::milliseconds connect_timeout,
                                                    std::chrono::milliseconds command_timeout) {
  Opened out;
  const std::string where = endpoint.to_string() + ": ";
  if (!endpoint.unix_path.empty()) {
    out.failure = Failure::kTls;
    out.error = where + "TLS is for TCP endpoints, not Unix sockets";
    return out;
  }
  std::string error;
  const int fd = connect_tcp(endpoint, connect_timeout, command_timeout, error);
  if (fd < 0) {
    out.failure = Failure::kConnect;
    out.error = where + error;
    return out;
  }
  ERR_clear_error();  // this thread's queue: what follows is this connection's
  SSL* ssl = SSL_new(tls.ctx());
  const std::string& name = tls.server_name().empty() ? endpoint.host : tls.server_name();
  X509_VERIFY_PARAM* param = ssl != nullptr ? SSL_get0_param(ssl) : nullptr;
  const bool named = param != nullptr && (is_ip(name) ? X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str()) == 1
                                                      : X509_VERIFY_PARAM_set1_host(param, name.c_str(), 0) == 1);
  if (ssl == nullptr || !named || SSL_set_fd(ssl, fd) != 1 ||
      (!is_ip(name) && SSL_set_tlsext_host_name(ssl, name.c_str()) != 1)) {
    out.failure = Failure::kTls;
    out.error = where + "cannot set up TLS: " + openssl_errors();
    if (ssl != nullptr) SSL_free(ssl);
    ::close(fd);
    return out;
  }
  bool certificate_asked = false;
  SSL_set_app_data(ssl, &certificate_asked);
  const int rc = SSL_connect(ssl);
  const int saved = errno;
  const int ssl_error = rc == 1 ? SSL_ERROR_NONE : SSL_get_error(ssl, rc);
  const bool connected = rc == 1;
  SSL_set_app_data(ssl, nullptr);
  if (!connected && certificate_asked) {
    out.failure = Failure::kTls;
    out.error = where + "TLS handshake failed: " + kCertificateWanted;
    SSL_free(ssl);
    ::close(fd);
    return out;
  }
  if (!connected) {
    const long verified = SSL_get_verify_result(ssl);
    // A handshake that timed out or was cut (the socket's error, no TLS
    // alert) is a connection failure; one the peer refused, or whose
    // certificate did not verify, is a setup error.
    const bool io = verified == X509_V_OK && (ssl_error == SSL_ERROR_SYSCALL || ssl_error == SSL_ERROR_WANT_READ ||
                                              ssl_error == SSL_ERROR_WANT_WRITE);
    const std::string detail = verified != X509_V_OK
                                   ? std::string("the server's certificate: ") + X509_verify_cert_error_string(verified) +
                                         " (checked for " + name + " against the CA)"
                                   : openssl_errors();
    out.failure = io ? Failure::kConnect : Failure::kTls;
    out.error = where + "TLS handshake failed: " +
                (!io ? detail
                 : saved == EAGAIN || saved == EWOULDBLOCK
                     ? std::string("no TLS answer within the command timeout (a server without TLS on that port?)")
                 : saved != 0 ? std::string(std::strerror(saved))
                              : std::string("the connection was closed"));
    SSL_free(ssl);
    ::close(fd);
    return out;
  }
  redisReader* reader = redisReaderCreate();
  if (reader == nullptr) {
    out.failure = Failure::kConnect;
    out.error = where + "out of memory";
    SSL_free(ssl);
    ::close(fd);
    return out;
  }
  out.connection.reset(new TlsRedisConnection(fd, ssl, reader));
  out.connection->certificate_asked_ = certificate_asked;
  return out;
}

TlsRedisConnection::~TlsRedisConnection() {
  redisReaderFree(reader_);
  SSL_shutdown(ssl_);  // a close_notify, best effort: the socket closes anyway
  SSL_free(ssl_);
  ::close(fd_);
}

redisReply* TlsRedisConnection::command(std::span<const std::string_view> argv) {
  return write_command(argv) ? read_reply() : nullptr;
}

bool TlsRedisConnection::write_command(std::span<const std::string_view> argv) {
  std::vector<const char*> args;
  std::vector<size_t> lengths;
  for (std::string_view a : argv) {
    args.push_back(a.data());
    lengths.push_back(a.size());
  }
  char* cmd = nullptr;
  const int len = redisFormatCommandArgv(&cmd, static_cast<int>(args.size()), args.data(), lengths.data());
  if (len < 0 || cmd == nullptr) {
    error_ = "cannot format the command";
    return false;
  }
  ERR_clear_error();
  int written = 0;
  while (written < len) {
    const int n = SSL_write(ssl_, cmd + written, len - written);
    if (n <= 0) {
      redisFreeCommand(cmd);
      refused_ = certificate_asked_;
      error_ = refused_ ? std::string("the server ended the TLS session: ") + kCertificateWanted
                        : "the TLS connection broke while writing (" + openssl_errors() + ")";
      return false;
    }
    written += n;
  }
  redisFreeCommand(cmd);
  return true;
}

redisReply* TlsRedisConnection::read_reply() {
  for (;;) {
    void* reply = nullptr;
    if (redisReaderGetReply(reader_, &reply) != REDIS_OK) {
      error_ = "a reply that is not Redis's protocol";
      return nullptr;
    }
    if (reply != nullptr) return static_cast<redisReply*>(reply);
    char buf[16 * 1024];
    const int n = SSL_read(ssl_, buf, sizeof buf);
    if (n <= 0) {
      const int e = SSL_get_error(ssl_, n);
      refused_ = e == SSL_ERROR_SSL || certificate_asked_;
      error_ = certificate_asked_       ? std::string("the server ended the TLS session: ") + kCertificateWanted
               : e == SSL_ERROR_ZERO_RETURN ? "the server closed the TLS connection"
               : refused_                   ? "the server ended the TLS session (" + openssl_errors() + ")"
                                            : "no reply within the command timeout, or the connection broke";
      return nullptr;
    }
    if (redisReaderFeed(reader_, buf, static_cast<size_t>(n)) != REDIS_OK) {
      error_ = "a reply that is not Redis's protocol";
      return nullptr;
    }
  }
}

}  // namespace sluice::control

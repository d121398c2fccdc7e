// See redis_link.h.
#include "control/cluster/redis_link.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>

#include <algorithm>
#include <vector>

namespace sluice::control {
namespace {

timeval to_timeval(std::chrono::milliseconds ms) noexcept {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

// hiredis writes with write(2): a server that went away would raise SIGPIPE,
// whose default action ends the process. Blocked on this thread for the
// call, and one the call raised taken back before it is unblocked (sluiced
// ignores SIGPIPE anyway; this keeps the link safe in any program).
class SigpipeBlocked {
 public:
  SigpipeBlocked() noexcept {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
  }
  ~SigpipeBlocked() {
    sigset_t pending;
    sigpending(&pending);
    if (!was_pending_ && sigismember(&pending, SIGPIPE) == 1) {
      const timespec now{};
      (void)sigtimedwait(&pipe_, nullptr, &now);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeBlocked(const SigpipeBlocked&) = delete;
  SigpipeBlocked& operator=(const SigpipeBlocked&) = delete;

 private:
  sigset_t pipe_{}, old_{};
  bool was_pending_ = false;
};

// Redis answers a command it will not run for want of credentials with
// NOAUTH, and refused credentials with WRONGPASS (older servers: ERR invalid
// password). Either is a setup error: retrying cannot mend it.
bool about_credentials(std::string_view error) noexcept {
  return error.starts_with("NOAUTH") || error.starts_with("WRONGPASS") || error.starts_with("ERR invalid password") ||
         error.starts_with("ERR AUTH");
}

}  // namespace

std::string_view to_string(RedisError e) noexcept {
  switch (e) {
    case RedisError::kNone: return "none";
    case RedisError::kUnreachable: return "unreachable";
    case RedisError::kBackingOff: return "backing_off";
    case RedisError::kConnectionLost: return "connection_lost";
    case RedisError::kServer: return "server_error";
    case RedisError::kProtocol: return "protocol";
    case RedisError::kAuth: return "authentication";
    case RedisError::kTls: return "tls";
  }
  return "unknown";
}

void RedisReply::Free::operator()(redisReply* r) const noexcept { freeReplyObject(r); }
bool RedisReply::is_error() const noexcept { return r_ && r_->type == REDIS_REPLY_ERROR; }
bool RedisReply::is_integer() const noexcept { return r_ && r_->type == REDIS_REPLY_INTEGER; }
bool RedisReply::is_array() const noexcept { return r_ && r_->type == REDIS_REPLY_ARRAY; }
bool RedisReply::is_nil() const noexcept { return r_ && r_->type == REDIS_REPLY_NIL; }
long long RedisReply::integer() const noexcept { return r_ ? r_->integer : 0; }
std::string_view RedisReply::text() const noexcept {
  if (!r_ || r_->str == nullptr) return {};
  return {r_->str, r_->len};
}
size_t RedisReply::elements() const noexcept { return is_array() ? r_->elements : 0; }
const redisReply* RedisReply::element(size_t i) const noexcept {
  return i < elements() ? r_->element[i] : nullptr;
}
bool reply_is_integer(const redisReply* r) noexcept { return r != nullptr && r->type == REDIS_REPLY_INTEGER; }
long long reply_integer(const redisReply* r) noexcept { return r != nullptr ? r->integer : 0; }

RedisLink::RedisLink(RedisEndpoint endpoint, Options options)
    : endpoint_(std::move(endpoint)), options_(options) {}

RedisLink::~RedisLink() {
  if (ctx_ != nullptr) redisFree(ctx_);
}

void RedisLink::drop(Clock::time_point now) noexcept {
  pending_ = 0;  // their replies went with the connection
  if (ctx_ != nullptr) redisFree(ctx_);
  ctx_ = nullptr;
  tls_.reset();
  backoff_ = backoff_.count() == 0 ? options_.backoff_min : std::min(backoff_ * 2, options_.backoff_max);
  retry_at_ = now + backoff_;
}

RedisError RedisLink::connect(Clock::time_point now, std::string& detail) {
  if (now < retry_at_) {
    detail = "backing off after a failure, next attempt in " +
             std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(retry_at_ - now).count()) + " ms";
    return RedisError::kBackingOff;
  }
  ++connects_;
  if (options_.tls) {
    TlsRedisConnection::Opened opened =
        TlsRedisConnection::open(endpoint_, *options_.tls, options_.connect_timeout, options_.command_timeout);
    if (!opened.connection) {
      detail = std::move(opened.error);
      ++failed_connects_;
      drop(now);
      return opened.failure == TlsRedisConnection::Failure::kTls ? RedisError::kTls : RedisError::kUnreachable;
    }
    tls_ = std::move(opened.connection);
    return authenticate(now, detail);
  }
  const timeval tv = to_timeval(options_.connect_timeout);
  redisContext* c = endpoint_.unix_path.empty() ? redisConnectWithTimeout(endpoint_.host.c_str(), endpoint_.port, tv)
                                                : redisConnectUnixWithTimeout(endpoint_.unix_path.c_str(), tv);
  if (c == nullptr || c->err != 0) {
    detail = endpoint_.to_string() + ": " + (c != nullptr ? c->errstr : "out of memory");
    if (c != nullptr) redisFree(c);
    ++failed_connects_;
    drop(now);
    return RedisError::kUnreachable;
  }
  if (redisSetTimeout(c, to_timeval(options_.command_timeout)) != REDIS_OK) {
    detail = endpoint_.to_string() + ": cannot set the command timeout";
    redisFree(c);
    ++failed_connects_;
    drop(now);
    return RedisError::kUnreachable;
  }
  ctx_ = c;
  return authenticate(now, detail);
}

RedisError RedisLink::authenticate(Clock::time_point now, std::string& detail) {
  if (options_.password.empty()) return RedisError::kNone;
  std::vector<std::string_view> argv{"AUTH"};
  if (!options_.username.empty()) argv.push_back(options_.username);
  argv.push_back(options_.password);
  const RedisReply reply(write(argv) ? read() : nullptr);
  if (reply && !reply.is_error()) return RedisError::kNone;
  const bool lost = !reply;
  const bool tls_refused = lost && tls_ && tls_->refused();
  detail = endpoint_.to_string() + ": " +
           (tls_refused ? tls_->error()
            : lost      ? std::string("the connection broke during AUTH")
                        : "authentication refused (" + std::string(reply.text()) + ")");
  ++failed_connects_;
  drop(now);
  return tls_refused ? RedisError::kTls : lost ? RedisError::kConnectionLost : RedisError::kAuth;
}

bool RedisLink::write(std::span<const std::string_view> argv) {
  const SigpipeBlocked blocked;
  if (tls_) return tls_->write_command(argv);
  std::vector<const char*> args;
  std::vector<size_t> lengths;
  args.reserve(argv.size());
  lengths.reserve(argv.size());
  for (std::string_view a : argv) {
    args.push_back(a.data());
    lengths.push_back(a.size());
  }
  if (redisAppendCommandArgv(ctx_, static_cast<int>(args.size()), args.data(), lengths.data()) != REDIS_OK) return false;
  for (int done = 0; done == 0;) {
    if (redisBufferWrite(ctx_, &done) != REDIS_OK) return false;
  }
  return true;
}

redisReply* RedisLink::read() {
  const SigpipeBlocked blocked;
  if (tls_) return tls_->read_reply();
  void* reply = nullptr;
  if (redisGetReply(ctx_, &reply) != REDIS_OK) return nullptr;
  return static_cast<redisReply*>(reply);
}

RedisLink::Result RedisLink::broke(Clock::time_point now) {
  Result r;
  r.error = tls_ && tls_->refused() ? RedisError::kTls : RedisError::kConnectionLost;
  r.detail = endpoint_.to_string() + ": " + (tls_ ? tls_->error() : ctx_->err != 0 ? std::string(ctx_->errstr) : "no reply");
  drop(now);
  return r;
}

RedisLink::Result RedisLink::begin(std::span<const std::string_view> argv, Clock::time_point now) {
  Result r;
  if (!connected()) {
    r.error = connect(now, r.detail);
    if (r.error != RedisError::kNone) return r;
  }
  if (!write(argv)) return broke(now);
  ++pending_;
  return r;
}

RedisLink::Result RedisLink::finish(Clock::time_point now) {
  if (pending_ == 0 || !connected()) {
    Result r;
    r.error = RedisError::kConnectionLost;
    r.detail = endpoint_.to_string() + ": the connection broke before the reply";
    pending_ = 0;
    return r;
  }
  --pending_;
  redisReply* reply = read();
  if (reply == nullptr) return broke(now);
  Result r;
  backoff_ = std::chrono::milliseconds{0};  // it answered: a later failure starts the back-off afresh
  r.reply = RedisReply(reply);
  if (r.reply.is_error()) {
    // A server error's text is the caller's to read (MOVED, ASK); one about
    // credentials is a setup error, said with where.
    r.error = about_credentials(r.reply.text()) ? RedisError::kAuth : RedisError::kServer;
    r.detail = (r.error == RedisError::kAuth ? endpoint_.to_string() + ": " : std::string()) + std::string(r.reply.text());
  }
  return r;
}

RedisLink::Result RedisLink::command(std::span<const std::string_view> argv, Clock::time_point now) {
  Result r = begin(argv, now);
  if (r.error != RedisError::kNone) return r;
  return finish(now);
}

}  // namespace sluice::control

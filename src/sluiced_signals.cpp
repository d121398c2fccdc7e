// The signal handler and the one global it needs (see sluiced_signals.h).
#include "sluiced_signals.h"

namespace sluice::sluiced {
namespace {

static_assert(std::atomic<bool>::is_always_lock_free && std::atomic<int>::is_always_lock_free,
              "a signal handler may only touch lock-free atomics");
static_assert(std::atomic<SignalRequests*>::is_always_lock_free);

// A handler is handed nothing but the signal number, so where it records the
// request must be reachable from static storage: the one global of sluiced,
// set only while a SignalHandling is installed. It points at state the
// appliance owns rather than being that state, so the flags' lifetime and
// ownership stay explicit.
std::atomic<SignalRequests*> g_requests{nullptr};

void on_signal(int sig) {
  SignalRequests* r = g_requests.load(std::memory_order_acquire);
  if (r == nullptr) return;
  if (sig == SIGHUP) {
    r->reload.store(true, std::memory_order_relaxed);
    return;
  }
  r->signal.store(sig, std::memory_order_relaxed);
  r->stop.store(true, std::memory_order_relaxed);
}

}  // namespace

void SignalHandling::install(SignalRequests& requests) noexcept {
  if (installed_) return;
  g_requests.store(&requests, std::memory_order_release);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int_);
  sigaction(SIGTERM, &sa, &old_term_);
  sigaction(SIGHUP, &sa, &old_hup_);
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGPIPE, &ignore, &old_pipe_);
  installed_ = true;
}

SignalHandling::~SignalHandling() {
  if (!installed_) return;
  sigaction(SIGPIPE, &old_pipe_, nullptr);
  sigaction(SIGHUP, &old_hup_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
  sigaction(SIGINT, &old_int_, nullptr);
  g_requests.store(nullptr, std::memory_order_release);
}

}  // namespace sluice::sluiced

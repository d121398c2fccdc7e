// How SIGINT, SIGTERM and SIGHUP reach sluiced: the handler only records the
// request in lock-free atomics (all a handler may safely touch); the main
// loop, the workers and the control-plane threads poll them.
#pragma once

#include <signal.h>

#include <atomic>

namespace sluice::sluiced {

// What the signals asked for. Owned by the appliance; `stop` is also the flag
// every loop (workers, control threads) polls, so the shutdown paths that are
// not signals raise it too.
struct SignalRequests {
  std::atomic<bool> stop{false};    // SIGINT, SIGTERM
  std::atomic<bool> reload{false};  // SIGHUP: reload the policy file
  std::atomic<int> signal{0};       // the signal that asked to stop, 0 if none did
};

// SIGINT, SIGTERM and SIGHUP recorded in `requests`, SIGPIPE ignored (a
// control or metrics client that hangs up is that connection's error, not
// the appliance's), from install() until the object ends, when the previous
// dispositions come back.
class SignalHandling {
 public:
  SignalHandling() = default;
  SignalHandling(const SignalHandling&) = delete;
  SignalHandling& operator=(const SignalHandling&) = delete;
  ~SignalHandling();

  // At most once per object, and one object installed at a time: `requests`
  // must outlive this object.
  void install(SignalRequests& requests) noexcept;

 private:
  using Disposition = struct sigaction;
  bool installed_ = false;
  Disposition old_int_{}, old_term_{}, old_hup_{}, old_pipe_{};
};

}  // namespace sluice::sluiced

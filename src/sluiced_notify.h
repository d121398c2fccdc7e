// What sluiced tells the service manager (systemd's sd_notify protocol, for
// dist/systemd/sluiced@.service, Type=notify): READY=1 once it serves, a
// STATUS= line every few seconds, RELOADING=1 and READY=1 around a policy
// reload, STOPPING=1 when the stop begins, and WATCHDOG=1 only while every
// worker makes progress, so a stuck worker gets the appliance restarted.
// Started without NOTIFY_SOCKET (by hand, by the tests) it sends nothing.
//
// Also here, because it exists to test the watchdog: the test-only
// SLUICE_TEST_STALL_WORKER setting that makes one worker stop looping.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace sluice::sluiced {

// The first worker whose heartbeat (passes of its loop, one count per
// worker) has not moved from `before` to `now`; none when every one moved.
// Snapshots of different lengths: worker 0 (nothing is known to move).
[[nodiscard]] std::optional<unsigned> first_stalled_worker(std::span<const uint64_t> before,
                                                           std::span<const uint64_t> now) noexcept;

// When to feed the watchdog: once every half of its interval, and only when
// every worker has made progress since the last ping. A worker that stops
// looping stops the pings; one that recovers before the interval is out
// lets them resume. No system calls here, so the decisions are testable.
class WatchdogGate {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Verdict : uint8_t {
    kNotDue,    // half an interval has not passed since the last check
    kPing,      // every worker moved: send WATCHDOG=1
    kWithhold,  // a worker did not (stalled() says which): send nothing
  };

  // A zero interval: the watchdog is off, and nothing is ever due.
  explicit WatchdogGate(std::chrono::microseconds interval) noexcept;

  // Starts counting from these heartbeats (taken when the appliance serves).
  void arm(std::span<const uint64_t> heartbeats, Clock::time_point now);
  // Whether check() would do more than say kNotDue: the caller takes a
  // snapshot of the heartbeats only then.
  [[nodiscard]] bool due(Clock::time_point now) const noexcept;
  [[nodiscard]] Verdict check(std::span<const uint64_t> heartbeats, Clock::time_point now);
  // The worker that made the last check withhold the ping.
  [[nodiscard]] std::optional<unsigned> stalled() const noexcept { return stalled_; }

 private:
  Clock::duration period_;  // half the interval
  bool armed_ = false;
  Clock::time_point next_{};
  std::vector<uint64_t> at_last_ping_;
  std::optional<unsigned> stalled_;
};

// sd_notify on behalf of the appliance. The environment is read once, at
// construction. serving() and tick() belong to the main thread; reloading(),
// reloaded() and stopping() may come from any thread (the control thread
// reloads too), as they only send.
class ServiceNotifier {
 public:
  // What the notifier reads from the appliance once it serves.
  struct Sources {
    std::function<void(std::vector<uint64_t>&)> heartbeats;  // one per worker, written into the vector
    std::function<std::string()> status;                     // a one-line summary for STATUS=
  };

  ServiceNotifier();
  ServiceNotifier(const ServiceNotifier&) = delete;
  ServiceNotifier& operator=(const ServiceNotifier&) = delete;

  [[nodiscard]] bool enabled() const noexcept { return enabled_; }
  // WATCHDOG_USEC when WATCHDOG_PID names this process (sd_watchdog_enabled),
  // else zero.
  [[nodiscard]] std::chrono::microseconds watchdog_interval() const noexcept { return watchdog_; }

  // The appliance serves: READY=1 with its status, and the watchdog armed.
  void serving(Sources sources);
  // The main loop's pass (every 100 ms): the watchdog when due, the status
  // every kStatusPeriod.
  void tick(WatchdogGate::Clock::time_point now);

  void reloading() const;
  // After a reload, taken or refused: READY=1 with `status` (which says which).
  void reloaded(const std::string& status) const;
  void stopping(const std::string& status) const;

  static constexpr std::chrono::seconds kStatusPeriod{5};

 private:
  void feed_watchdog(WatchdogGate::Clock::time_point now);
  void send(const std::string& message) const;

  bool enabled_ = false;
  std::chrono::microseconds watchdog_{0};
  WatchdogGate gate_;
  Sources sources_;
  std::vector<uint64_t> beats_;  // sized once, by serving()
  WatchdogGate::Clock::time_point next_status_{};
  bool withholding_ = false;  // said once per stall, and once when it ends
};

// Test-only (tests/integration/systemd.sh): SLUICE_TEST_STALL_WORKER=INDEX:SECONDS
// makes worker INDEX stop looping SECONDS after it starts, as a stuck worker
// would (it keeps no frames moving and its heartbeat stops; the rest of the
// appliance goes on), so that the watchdog can be seen to stop. Off unless
// the variable is set; sluiced says so on stderr when it is.
inline constexpr const char* kWorkerStallVariable = "SLUICE_TEST_STALL_WORKER";

struct WorkerStall {
  unsigned worker = 0;
  unsigned seconds = 0;
};

struct WorkerStallSetting {
  std::optional<WorkerStall> stall;  // none: unset
  std::string error;                 // non-empty: a one-line reason it is refused
};

// `value` (null: unset) as INDEX:SECONDS, INDEX below `workers`, SECONDS
// from 1 to 86400.
[[nodiscard]] WorkerStallSetting parse_worker_stall(const char* value, unsigned workers);
// The same, read from the environment.
[[nodiscard]] WorkerStallSetting worker_stall_from_env(unsigned workers);

// Test-only (tests/integration, wire-restart-mid-change): with
// SLUICE_TEST_DIE_IN_CHANGE=N each worker kills the process (SIGKILL) in
// the middle of its Nth change of a flow for a client segment with payload:
// after the flow engine has changed the flow, before the segment is
// forwarded and the work mark cleared (dataplane/change_undo.h), the
// moment a kill -9 hits least often and costs most. Off unless set; sluiced
// says so on stderr when it is.
inline constexpr const char* kDieInChangeVariable = "SLUICE_TEST_DIE_IN_CHANGE";

struct DieInChangeSetting {
  uint32_t change = 0;  // 0: unset
  std::string error;    // non-empty: a one-line reason it is refused
};
// `value` (null: unset) as N, from 1 to 1000000.
[[nodiscard]] DieInChangeSetting parse_die_in_change(const char* value);
[[nodiscard]] DieInChangeSetting die_in_change_from_env();

}  // namespace sluice::sluiced

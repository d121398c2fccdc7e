// Talking to the service manager (see sluiced_notify.h).
#include "sluiced_notify.h"

#include "control/log.h"

#include <systemd/sd-daemon.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string_view>

namespace sluice::sluiced {
namespace {

// STATUS= is one line of the datagram: a newline would start another
// assignment.
std::string one_line(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

// sd_watchdog_enabled() checks WATCHDOG_PID against this process, so a
// child that inherited the variables does not feed its parent's watchdog.
std::chrono::microseconds watchdog_from_env() {
  uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) <= 0) return std::chrono::microseconds{0};
  return std::chrono::microseconds{usec};
}

uint64_t monotonic_usec() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000u + static_cast<uint64_t>(ts.tv_nsec) / 1000u;
}

// A whole decimal number in [0, max], nothing else.
bool parse_unsigned(std::string_view s, unsigned max, unsigned& out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size() && !s.empty() && out <= max;
}

}  // namespace

std::optional<unsigned> first_stalled_worker(std::span<const uint64_t> before, std::span<const uint64_t> now) noexcept {
  if (before.size() != now.size()) return 0u;
  for (size_t i = 0; i < now.size(); ++i) {
    if (now[i] == before[i]) return static_cast<unsigned>(i);
  }
  return std::nullopt;
}

WatchdogGate::WatchdogGate(std::chrono::microseconds interval) noexcept
    : period_(std::chrono::duration_cast<Clock::duration>(interval) / 2) {}

void WatchdogGate::arm(std::span<const uint64_t> heartbeats, Clock::time_point now) {
  if (period_ == Clock::duration::zero()) return;
  at_last_ping_.assign(heartbeats.begin(), heartbeats.end());
  next_ = now + period_;
  stalled_.reset();
  armed_ = true;
}

bool WatchdogGate::due(Clock::time_point now) const noexcept {
  return armed_ && now >= next_;
}

WatchdogGate::Verdict WatchdogGate::check(std::span<const uint64_t> heartbeats, Clock::time_point now) {
  if (!due(now)) return Verdict::kNotDue;
  next_ = now + period_;
  // The snapshot moves only on a ping: a worker is measured against the last
  // time every worker was known to move, however many checks withheld since.
  stalled_ = first_stalled_worker(at_last_ping_, heartbeats);
  if (stalled_) return Verdict::kWithhold;
  at_last_ping_.assign(heartbeats.begin(), heartbeats.end());
  return Verdict::kPing;
}

ServiceNotifier::ServiceNotifier()
    : enabled_(std::getenv("NOTIFY_SOCKET") != nullptr && *std::getenv("NOTIFY_SOCKET") != '\0'),
      watchdog_(enabled_ ? watchdog_from_env() : std::chrono::microseconds{0}),
      gate_(watchdog_) {}

void ServiceNotifier::serving(Sources sources) {
  if (!enabled_) return;
  sources_ = std::move(sources);
  sources_.heartbeats(beats_);
  const auto now = WatchdogGate::Clock::now();
  gate_.arm(beats_, now);
  next_status_ = now + kStatusPeriod;
  send("READY=1\nSTATUS=" + one_line(sources_.status()));
}

void ServiceNotifier::tick(WatchdogGate::Clock::time_point now) {
  if (!enabled_ || !sources_.status) return;
  if (gate_.due(now)) feed_watchdog(now);
  if (now >= next_status_) {
    next_status_ = now + kStatusPeriod;
    // While a worker is stalled the status says so instead (feed_watchdog).
    if (!withholding_) send("STATUS=" + one_line(sources_.status()));
  }
}

void ServiceNotifier::feed_watchdog(WatchdogGate::Clock::time_point now) {
  sources_.heartbeats(beats_);
  const WatchdogGate::Verdict v = gate_.check(beats_, now);
  if (v == WatchdogGate::Verdict::kPing) {
    send("WATCHDOG=1");
    if (withholding_) {
      control::log(control::LogLevel::kNotice, control::LogEvent::kWatchdog,
                   "every worker makes progress again; the watchdog is fed");
    }
    withholding_ = false;
    return;
  }
  if (v != WatchdogGate::Verdict::kWithhold || withholding_) return;
  withholding_ = true;
  const double ms = static_cast<double>(watchdog_.count()) / 2000.0;
  const std::string why = "worker " + std::to_string(*gate_.stalled()) + " made no progress in " +
                          std::to_string(static_cast<long>(ms)) + " ms; the watchdog is not fed";
  control::log(control::LogLevel::kWarning, control::LogEvent::kWatchdog, why);
  send("STATUS=" + why);
}

void ServiceNotifier::reloading() const {
  // MONOTONIC_USEC: systemd 253's Type=notify-reload wants it; older ones
  // ignore it.
  send("RELOADING=1\nMONOTONIC_USEC=" + std::to_string(monotonic_usec()));
}

void ServiceNotifier::reloaded(const std::string& status) const {
  send("READY=1\nSTATUS=" + one_line(status));
}

void ServiceNotifier::stopping(const std::string& status) const {
  send("STOPPING=1\nSTATUS=" + one_line(status));
}

void ServiceNotifier::send(const std::string& message) const {
  if (!enabled_) return;
  // A manager that went away is not the appliance's failure: nothing to do
  // but keep serving.
  (void)sd_notify(0, message.c_str());
}

WorkerStallSetting parse_worker_stall(const char* value, unsigned workers) {
  if (value == nullptr) return {};
  const std::string_view v(value);
  const size_t colon = v.find(':');
  WorkerStall stall;
  if (colon == std::string_view::npos || !parse_unsigned(v.substr(0, colon), ~0u, stall.worker) ||
      !parse_unsigned(v.substr(colon + 1), 86400, stall.seconds) || stall.seconds == 0) {
    return {std::nullopt,
            std::string(kWorkerStallVariable) + " wants WORKER:SECONDS (test-only), got '" + std::string(v) + "'"};
  }
  if (stall.worker >= workers) {
    return {std::nullopt, std::string(kWorkerStallVariable) + ": there is no worker " + std::to_string(stall.worker) +
                              " (--workers " + std::to_string(workers) + ")"};
  }
  return {stall, {}};
}

WorkerStallSetting worker_stall_from_env(unsigned workers) {
  return parse_worker_stall(std::getenv(kWorkerStallVariable), workers);
}

DieInChangeSetting parse_die_in_change(const char* value) {
  if (value == nullptr) return {};
  unsigned n = 0;
  if (!parse_unsigned(value, 1000000, n) || n == 0) {
    return {0, std::string(kDieInChangeVariable) + " wants a count from 1 to 1000000 (test-only), got '" + value + "'"};
  }
  return {n, {}};
}

DieInChangeSetting die_in_change_from_env() { return parse_die_in_change(std::getenv(kDieInChangeVariable)); }

}  // namespace sluice::sluiced

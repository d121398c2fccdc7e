// What sluiced tells systemd: the watchdog is fed only while every worker
// makes progress, and the notifications reach a NOTIFY_SOCKET the test owns.
#include "sluiced_notify.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "scratch_dir.h"

namespace sluice::sluiced {
namespace {

using Clock = WatchdogGate::Clock;
using std::chrono::microseconds;
using std::chrono::milliseconds;

TEST(FirstStalledWorker, NoneWhenEveryWorkerMoved) {
  const std::vector<uint64_t> before{5, 9, 0}, now{6, 100, 1};
  EXPECT_EQ(first_stalled_worker(before, now), std::nullopt);
}

TEST(FirstStalledWorker, NamesTheFirstThatDidNot) {
  const std::vector<uint64_t> before{5, 9, 7}, now{6, 9, 7};
  EXPECT_EQ(first_stalled_worker(before, now), 1u);
}

TEST(FirstStalledWorker, SnapshotsOfDifferentLengthsAreNoProof) {
  const std::vector<uint64_t> before{5}, now{6, 7};
  EXPECT_EQ(first_stalled_worker(before, now), 0u);
}

TEST(WatchdogGate, PingsEveryHalfIntervalWhileAllMove) {
  WatchdogGate gate(microseconds(1'000'000));
  const Clock::time_point t0{};
  gate.arm(std::vector<uint64_t>{1, 1}, t0);
  EXPECT_FALSE(gate.due(t0 + milliseconds(499)));
  EXPECT_EQ(gate.check(std::vector<uint64_t>{2, 2}, t0 + milliseconds(499)), WatchdogGate::Verdict::kNotDue);
  EXPECT_EQ(gate.check(std::vector<uint64_t>{2, 2}, t0 + milliseconds(500)), WatchdogGate::Verdict::kPing);
  EXPECT_EQ(gate.check(std::vector<uint64_t>{3, 3}, t0 + milliseconds(900)), WatchdogGate::Verdict::kNotDue);
  EXPECT_EQ(gate.check(std::vector<uint64_t>{3, 3}, t0 + milliseconds(1000)), WatchdogGate::Verdict::kPing);
}

TEST(WatchdogGate, AStuckWorkerWithholdsEveryPingUntilItMovesAgain) {
  WatchdogGate gate(microseconds(1'000'000));
  const Clock::time_point t0{};
  gate.arm(std::vector<uint64_t>{1, 1}, t0);
  ASSERT_EQ(gate.check(std::vector<uint64_t>{2, 2}, t0 + milliseconds(500)), WatchdogGate::Verdict::kPing);
  // Worker 1 stops at 2; worker 0 goes on.
  EXPECT_EQ(gate.check(std::vector<uint64_t>{50, 2}, t0 + milliseconds(1000)), WatchdogGate::Verdict::kWithhold);
  EXPECT_EQ(gate.stalled(), 1u);
  EXPECT_EQ(gate.check(std::vector<uint64_t>{90, 2}, t0 + milliseconds(1500)), WatchdogGate::Verdict::kWithhold);
  EXPECT_EQ(gate.check(std::vector<uint64_t>{99, 2}, t0 + milliseconds(2000)), WatchdogGate::Verdict::kWithhold);
  // Measured against the last ping, not the last check: one step is progress.
  EXPECT_EQ(gate.check(std::vector<uint64_t>{120, 3}, t0 + milliseconds(2500)), WatchdogGate::Verdict::kPing);
  EXPECT_EQ(gate.stalled(), std::nullopt);
}

TEST(WatchdogGate, OffWithoutAnInterval) {
  WatchdogGate gate(microseconds(0));
  const Clock::time_point t0{};
  gate.arm(std::vector<uint64_t>{1}, t0);
  EXPECT_FALSE(gate.due(t0 + std::chrono::hours(1)));
  EXPECT_EQ(gate.check(std::vector<uint64_t>{2}, t0 + std::chrono::hours(1)), WatchdogGate::Verdict::kNotDue);
}

TEST(WatchdogGate, NothingIsDueBeforeItIsArmed) {
  WatchdogGate gate(microseconds(1'000'000));
  EXPECT_FALSE(gate.due(Clock::now() + std::chrono::hours(1)));
}

// A NOTIFY_SOCKET of the test's own, and the watchdog variables for this
// process, set for one test and unset after it.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& dir, const char* watchdog_usec) : path_(dir + "/notify.sock") {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    path_.copy(addr.sun_path, sizeof addr.sun_path - 1);
    if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) ADD_FAILURE() << "bind " << path_;
    setenv("NOTIFY_SOCKET", path_.c_str(), 1);
    if (watchdog_usec != nullptr) {
      setenv("WATCHDOG_USEC", watchdog_usec, 1);
      setenv("WATCHDOG_PID", std::to_string(getpid()).c_str(), 1);
    }
  }
  ~NotifySocket() {
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
    if (fd_ >= 0) close(fd_);
  }
  NotifySocket(const NotifySocket&) = delete;
  NotifySocket& operator=(const NotifySocket&) = delete;

  // Every datagram sent so far, in order.
  [[nodiscard]] std::vector<std::string> received() const {
    std::vector<std::string> out;
    char buf[4096];
    for (ssize_t n; (n = recv(fd_, buf, sizeof buf, 0)) > 0;) out.emplace_back(buf, static_cast<size_t>(n));
    return out;
  }

 private:
  std::string path_;
  int fd_ = -1;
};

TEST(ServiceNotifier, SendsNothingWithoutNotifySocket) {
  unsetenv("NOTIFY_SOCKET");
  ServiceNotifier n;
  EXPECT_FALSE(n.enabled());
  EXPECT_EQ(n.watchdog_interval(), microseconds(0));
}

TEST(ServiceNotifier, NoWatchdogWhenWatchdogPidNamesAnotherProcess) {
  test::ScratchDir dir("sluice-notify");
  NotifySocket sock(dir.path(), "1000000");
  setenv("WATCHDOG_PID", "1", 1);
  ServiceNotifier n;
  EXPECT_TRUE(n.enabled());
  EXPECT_EQ(n.watchdog_interval(), microseconds(0));
}

TEST(ServiceNotifier, ReadyWatchdogWhileWorkersMoveAndNoneOnceOneStops) {
  test::ScratchDir dir("sluice-notify");
  NotifySocket sock(dir.path(), "200000");
  ServiceNotifier n;
  ASSERT_EQ(n.watchdog_interval(), microseconds(200'000));
  std::vector<uint64_t> beats{1, 1};
  n.serving({.heartbeats = [&beats](std::vector<uint64_t>& out) { out = beats; },
             .status = [] { return std::string("policy 'p'\nwith a newline"); }});
  EXPECT_EQ(sock.received(), std::vector<std::string>{"READY=1\nSTATUS=policy 'p' with a newline"});

  const Clock::time_point t0 = Clock::now();
  beats = {2, 2};
  n.tick(t0 + milliseconds(110));
  n.tick(t0 + milliseconds(120));  // not due again yet
  EXPECT_EQ(sock.received(), std::vector<std::string>{"WATCHDOG=1"});

  beats = {3, 2};  // worker 1 stuck
  n.tick(t0 + milliseconds(230));
  n.tick(t0 + milliseconds(340));
  const std::vector<std::string> stalled = sock.received();
  ASSERT_EQ(stalled.size(), 1u);
  EXPECT_EQ(stalled[0].rfind("STATUS=worker 1 made no progress", 0), 0u) << stalled[0];

  beats = {4, 3};
  n.tick(t0 + milliseconds(450));
  EXPECT_EQ(sock.received(), std::vector<std::string>{"WATCHDOG=1"});
}

TEST(ServiceNotifier, ReloadAndStop) {
  test::ScratchDir dir("sluice-notify");
  NotifySocket sock(dir.path(), nullptr);
  ServiceNotifier n;
  n.reloading();
  n.reloaded("policy 'q'");
  n.stopping("stopping on SIGTERM");
  const std::vector<std::string> got = sock.received();
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].rfind("RELOADING=1\nMONOTONIC_USEC=", 0), 0u) << got[0];
  EXPECT_EQ(got[1], "READY=1\nSTATUS=policy 'q'");
  EXPECT_EQ(got[2], "STOPPING=1\nSTATUS=stopping on SIGTERM");
}

TEST(WorkerStall, UnsetIsOff) {
  const WorkerStallSetting s = parse_worker_stall(nullptr, 2);
  EXPECT_EQ(s.stall.has_value(), false);
  EXPECT_EQ(s.error, "");
}

TEST(WorkerStall, WorkerAndSeconds) {
  const WorkerStallSetting s = parse_worker_stall("1:3", 2);
  ASSERT_EQ(s.error, "");
  ASSERT_TRUE(s.stall);
  EXPECT_EQ(s.stall->worker, 1u);
  EXPECT_EQ(s.stall->seconds, 3u);
}

TEST(WorkerStall, EveryMistakeIsNamed) {
  for (const char* bad : {"", "1", "1:", ":3", "a:3", "1:3s", "1:0", "1:86401", "-1:3", "1:3:4"}) {
    EXPECT_EQ(parse_worker_stall(bad, 2).error,
              std::string("SLUICE_TEST_STALL_WORKER wants WORKER:SECONDS (test-only), got '") + bad + "'")
        << bad;
  }
  EXPECT_EQ(parse_worker_stall("2:3", 2).error, "SLUICE_TEST_STALL_WORKER: there is no worker 2 (--workers 2)");
}

TEST(DieInChange, UnsetIsOffACountIsTakenAMistakeIsNamed) {
  EXPECT_EQ(parse_die_in_change(nullptr).change, 0u);
  EXPECT_EQ(parse_die_in_change(nullptr).error, "");
  EXPECT_EQ(parse_die_in_change("2").change, 2u);
  EXPECT_EQ(parse_die_in_change("2").error, "");
  for (const char* bad : {"", "0", "x", "2s", "-1", "1000001"}) {
    EXPECT_EQ(parse_die_in_change(bad).error,
              std::string("SLUICE_TEST_DIE_IN_CHANGE wants a count from 1 to 1000000 (test-only), got '") + bad + "'")
        << bad;
  }
}

}  // namespace
}  // namespace sluice::sluiced

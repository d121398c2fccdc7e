// The control socket and the metrics endpoint under peers that misbehave:
// a silent peer, one that never reads its replies, an idle one
// and a crowd from one user are each dropped or refused by their deadline
// or cap, and meanwhile another peer's request is answered at once.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "control/control_server.h"
#include "control/metrics_server.h"
#include "control/protocol.h"
#include "scratch_dir.h"

namespace sluice::control {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A server on a socket of its own, serving from its own thread until the
// test ends.
class Served {
 public:
  explicit Served(ControlLimits limits, gid_t group = static_cast<gid_t>(-1)) : server_(limits) {
    path_ = dir_.path() + "/control.sock";
    EXPECT_EQ(server_.open(path_, group), "");
    thread_ = std::thread([this] {
      server_.serve(stop_, [](const Json& request, const PassedFile& file) -> std::string {
        if (file.passed) {
          return file.error.empty() ? R"({"ok":true,"file":")" + file.bytes + R"("})"
                                    : R"({"ok":false,"error":")" + file.error + R"("})";
        }
        if (const Json* cmd = member(request, "cmd"); cmd != nullptr && *cmd == "big") {
          return R"({"ok":true,"pad":")" + std::string(256 * 1024, 'x') + R"("})";
        }
        return R"({"ok":true})";
      });
    });
  }
  ~Served() {
    stop_ = true;
    thread_.join();
  }
  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] const std::string& dir() const { return dir_.path(); }

 private:
  test::ScratchDir dir_{"sluice-control"};
  std::string path_;
  ControlServer server_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

int connect_to(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, path.c_str(), path.size());
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << std::strerror(errno);
  return fd;
}

// What the peer gets within `wait`: a line, "" on EOF or reset, "(nothing)"
// if nothing came.
std::string read_line(int fd, std::chrono::milliseconds wait) {
  std::string got;
  const Clock::time_point deadline = Clock::now() + wait;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || poll(&p, 1, static_cast<int>(left)) <= 0) return got.empty() ? "(nothing)" : got;
    char c;
    const ssize_t n = recv(fd, &c, 1, 0);
    if (n <= 0) return got;
    if (c == '\n') return got;
    got += c;
  }
}

void send_text(int fd, std::string_view text) {
  ASSERT_EQ(send(fd, text.data(), text.size(), MSG_NOSIGNAL), static_cast<ssize_t>(text.size()));
}

// Asks and times the answer. (Bounds below are loose, for sanitizer builds
// on a busy machine; a server held up by a peer would take seconds.)
std::chrono::milliseconds status_latency(const std::string& path) {
  const int fd = connect_to(path);
  const Clock::time_point t0 = Clock::now();
  send_text(fd, "{\"cmd\":\"status\"}\n");
  EXPECT_EQ(read_line(fd, 2s), R"({"ok":true})");
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
  close(fd);
  return took;
}

ControlLimits short_limits() {
  ControlLimits l;
  l.request_deadline = 500ms;
  l.reply_deadline = 500ms;
  l.idle_timeout = 1000ms;
  return l;
}

TEST(ControlServer, APeerThatStopsMidRequestIsDroppedAndDelaysNobody) {
  Served s(short_limits());
  const int silent = connect_to(s.path());
  send_text(silent, "{\"cmd\":");
  EXPECT_LT(status_latency(s.path()), 400ms);
  EXPECT_EQ(read_line(silent, 3s), "") << "closed by the request deadline";
  close(silent);
}

TEST(ControlServer, APeerThatNeverReadsItsRepliesIsDroppedAndDelaysNobody) {
  Served s(short_limits());
  const int greedy = connect_to(s.path());
  const int small = 4096;
  setsockopt(greedy, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  std::string requests;
  for (int i = 0; i < 64; ++i) requests += "{\"cmd\":\"big\"}\n";
  send_text(greedy, requests);
  std::this_thread::sleep_for(50ms);
  EXPECT_LT(status_latency(s.path()), 400ms);
  // Dropped by the reply deadline: what it reads now ends, short of all 64.
  std::this_thread::sleep_for(1000ms);
  size_t total = 0;
  char buf[65536];
  for (;;) {
    pollfd p{greedy, POLLIN, 0};
    if (poll(&p, 1, 2000) <= 0) break;
    const ssize_t n = recv(greedy, buf, sizeof buf, 0);
    if (n <= 0) break;
    total += static_cast<size_t>(n);
  }
  EXPECT_LT(total, size_t{64} * 256 * 1024) << "the connection ended before its replies were all sent";
  close(greedy);
}

TEST(ControlServer, AnIdleConnectionIsClosed) {
  Served s(short_limits());
  const int idle = connect_to(s.path());
  send_text(idle, "{\"cmd\":\"status\"}\n");
  EXPECT_EQ(read_line(idle, 1s), R"({"ok":true})");
  const Clock::time_point t0 = Clock::now();
  EXPECT_EQ(read_line(idle, 4s), "");
  EXPECT_GE(Clock::now() - t0, 900ms);
  close(idle);
}

TEST(ControlServer, OneUserHoldsOnlyItsShareOfConnections) {
  ControlLimits l = short_limits();
  l.idle_timeout = 10s;
  l.per_uid = 3;
  Served s(l);
  int held[3];
  for (int& fd : held) {
    fd = connect_to(s.path());
    send_text(fd, "{\"cmd\":\"status\"}\n");
    EXPECT_EQ(read_line(fd, 1s), R"({"ok":true})");
  }
  const int fourth = connect_to(s.path());
  const std::string refused = read_line(fourth, 1s);
  EXPECT_NE(refused.find("\"forbidden\""), std::string::npos) << refused;
  EXPECT_NE(refused.find("too many control connections from uid " + std::to_string(getuid())), std::string::npos)
      << refused;
  close(fourth);
  close(held[0]);
  std::this_thread::sleep_for(500ms);
  EXPECT_LT(status_latency(s.path()), 400ms) << "a connection given back is a connection to be had";
  for (int i = 1; i < 3; ++i) close(held[i]);
}

// What a user with these ids gets from the socket: a forked child takes
// them (supplementary groups first) and asks for status. 0: answered; 1:
// refused by the server; 2: could not connect; 3: anything else.
int ask_as(const std::string& path, uid_t uid, gid_t gid, std::vector<gid_t> groups) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (setgroups(groups.size(), groups.data()) != 0 || setgid(gid) != 0 || setuid(uid) != 0) _exit(3);
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, path.c_str(), path.size());
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) _exit(2);
    // A refusal comes unasked, and the connection closes after it: read
    // first, so as not to write into a closed connection.
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 300) == 0) {
      const char req[] = "{\"cmd\":\"status\"}\n";
      if (send(fd, req, sizeof req - 1, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof req - 1)) _exit(3);
    }
    char buf[512];
    const ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
    if (n <= 0) _exit(3);
    buf[n] = 0;
    if (std::strstr(buf, "\"ok\":true") != nullptr) _exit(0);
    _exit(std::strstr(buf, "forbidden") != nullptr ? 1 : 3);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 3;
}

// --control-group's members, by their primary group or a supplementary one
// (SO_PEERGROUPS), are admitted; others are refused by the server itself,
// even where the socket file's mode would let them connect.
TEST(ControlServer, TheGroupsMembersPrimaryOrSupplementaryAreAdmitted) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to take other users' ids";
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "forks while the server thread runs, which ThreadSanitizer does not follow";
#endif
  constexpr uid_t kNobody = 65534;
  constexpr gid_t kGroup = 4242, kOther = 4343;
  Served s(short_limits(), kGroup);
  ASSERT_EQ(chmod(s.dir().c_str(), 0755), 0);
  EXPECT_EQ(ask_as(s.path(), kNobody, kNobody, {kOther, kGroup}), 0) << "a supplementary member";
  EXPECT_EQ(ask_as(s.path(), kNobody, kGroup, {}), 0) << "a primary member";
  EXPECT_EQ(ask_as(s.path(), kNobody, kNobody, {kOther}), 2) << "a non-member: the socket's mode stops it";
  ASSERT_EQ(chmod(s.path().c_str(), 0666), 0);
  EXPECT_EQ(ask_as(s.path(), kNobody, kNobody, {kOther}), 1) << "past the mode, the server refuses it";
}

TEST(ControlServer, RequestsAreAnsweredInOrderOnOneConnection) {
  Served s(short_limits());
  const int fd = connect_to(s.path());
  send_text(fd, "{\"cmd\":\"status\"}\nnot json\n{\"cmd\":\"status\"}\n");
  EXPECT_EQ(read_line(fd, 1s), R"({"ok":true})");
  EXPECT_NE(read_line(fd, 1s).find("bad_request"), std::string::npos);
  EXPECT_EQ(read_line(fd, 1s), R"({"ok":true})");
  close(fd);
}

// What reaches the handler is one object, its version the integer 1 (or
// unsaid), no key twice: anything else is answered by the server itself.
TEST(ControlServer, OnlyAStrictRequestOfThisVersionReachesTheHandler) {
  Served s(short_limits());
  const int fd = connect_to(s.path());
  const auto answer = [&](std::string_view line) {
    send_text(fd, std::string(line) + "\n");
    return read_line(fd, 1s);
  };
  EXPECT_EQ(answer(R"({"v":1,"cmd":"status"})"), R"({"ok":true})");
  EXPECT_NE(answer(R"({"v":1.0,"cmd":"status"})").find(R"("code":"unsupported_version")"), std::string::npos);
  EXPECT_NE(answer(R"({"v":"1","cmd":"status"})").find(R"("code":"unsupported_version")"), std::string::npos);
  EXPECT_NE(answer(R"({"v":2,"cmd":"status"})").find(R"("code":"unsupported_version")"), std::string::npos);
  const std::string dup = answer(R"({"v":1,"cmd":"status","cmd":"big"})");
  EXPECT_NE(dup.find(R"("code":"bad_request")"), std::string::npos) << dup;
  EXPECT_NE(dup.find(R"(duplicate key \"cmd\" (at byte 27))"), std::string::npos) << dup;
  EXPECT_NE(answer("[1,2]").find("a request is a JSON object"), std::string::npos);
  EXPECT_NE(answer(R"({"v":01})").find(R"("code":"bad_request")"), std::string::npos);
  close(fd);
}

// A request line is at most kMaxRequestBytes, its newline not counted: one
// byte past is refused, and the connection closed.
TEST(ControlServer, ARequestPastTheSizeLimitIsRefused) {
  Served s(short_limits());
  const auto padded = [](size_t bytes) {
    const std::string head = R"({"cmd":"status","pad":")", tail = R"("})";
    return head + std::string(bytes - head.size() - tail.size(), 'x') + tail;
  };
  int fd = connect_to(s.path());
  send_text(fd, padded(kMaxRequestBytes) + "\n");
  EXPECT_EQ(read_line(fd, 2s), R"({"ok":true})");
  close(fd);
  fd = connect_to(s.path());
  send_text(fd, padded(kMaxRequestBytes + 1) + "\n");
  EXPECT_NE(read_line(fd, 2s).find(R"("code":"request_too_large")"), std::string::npos);
  EXPECT_EQ(read_line(fd, 2s), "") << "then closed";
  close(fd);
}

// A loopback port nobody listens on (the kernel's pick, let go again).
int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  close(fd);
  return ntohs(a.sin_port);
}

// Sends `text` with descriptors attached (SCM_RIGHTS).
void send_with_fds(int fd, std::string_view text, const std::vector<int>& fds) {
  iovec iov{const_cast<char*>(text.data()), text.size()};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()));
  m.msg_control = control.data();
  m.msg_controllen = control.size();
  cmsghdr* h = CMSG_FIRSTHDR(&m);
  h->cmsg_level = SOL_SOCKET;
  h->cmsg_type = SCM_RIGHTS;
  h->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
  std::memcpy(CMSG_DATA(h), fds.data(), sizeof(int) * fds.size());
  ASSERT_EQ(sendmsg(fd, &m, MSG_NOSIGNAL), static_cast<ssize_t>(text.size()));
}

// A file is passed, not named: the server reads what the
// descriptor reads, only from a regular file, and a request that claims a
// descriptor it did not send is told so.
TEST(ControlServer, APassedFileIsReadFromItsDescriptor) {
  Served s(short_limits());
  const std::string path = s.dir() + "/passed.txt";
  {
    const int w = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ASSERT_EQ(::write(w, "hello", 5), 5);
    close(w);
  }
  const int file = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  const int fd = connect_to(s.path());
  send_with_fds(fd, "{\"cmd\":\"x\",\"fd\":true}\n", {file});
  close(file);
  EXPECT_EQ(read_line(fd, 1s), R"({"ok":true,"file":"hello"})");
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  send_with_fds(fd, "{\"cmd\":\"x\",\"fd\":true}\n", {pipe_fds[0]});
  EXPECT_EQ(read_line(fd, 1s), R"({"ok":false,"error":"the passed file is not a regular file"})");
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  send_text(fd, "{\"cmd\":\"x\",\"fd\":true}\n");
  EXPECT_NE(read_line(fd, 1s).find("none did"), std::string::npos);
  close(fd);
}

TEST(ControlServer, APeerThatSendsMoreDescriptorsThanItsRequestsTakeIsDropped) {
  Served s(short_limits());
  const int fd = connect_to(s.path());
  std::vector<int> many;
  for (size_t i = 0; i < ControlServer::kMaxQueuedFiles + 1; ++i) many.push_back(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  send_with_fds(fd, "{\"cmd\":", many);
  for (const int f : many) close(f);
  EXPECT_EQ(read_line(fd, 2s), "");
  close(fd);
}

TEST(MetricsServer, AClientTricklingItsRequestIsDroppedByTheDeadline) {
  const int port = free_port();
  MetricsServer server;
  ASSERT_EQ(server.open("127.0.0.1:" + std::to_string(port)), "");
  std::atomic<bool> stop{false};
  std::thread t([&] { server.serve(stop, [] { return std::string("sluice_up 1\n"); }); });
  auto dial = [&] {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    return fd;
  };
  const int slow = dial();
  const Clock::time_point t0 = Clock::now();
  bool cut = false;
  for (int i = 0; i < 40 && !cut; ++i) {  // a byte every 100 ms: 4 s if nothing cuts it
    cut = send(slow, "G", 1, MSG_NOSIGNAL) != 1;
    std::this_thread::sleep_for(100ms);
    pollfd p{slow, POLLIN, 0};
    if (poll(&p, 1, 0) > 0) {
      char c;
      cut = recv(slow, &c, 1, MSG_DONTWAIT) <= 0;
    }
  }
  EXPECT_TRUE(cut);
  EXPECT_LT(Clock::now() - t0, MetricsServer::kRequestDeadline + 500ms);
  close(slow);
  const int scraper = dial();
  send_text(scraper, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string response;
  char buf[4096];
  ssize_t n;
  while ((n = recv(scraper, buf, sizeof buf, 0)) > 0) response.append(buf, static_cast<size_t>(n));
  EXPECT_NE(response.find("sluice_up 1"), std::string::npos);
  close(scraper);
  stop = true;
  t.join();
}

}  // namespace
}  // namespace sluice::control

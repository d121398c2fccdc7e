// sluicectl: the operator's command line for a running sluiced, over its
// control socket (control/protocol.h). Human-readable output by default,
// --json for scripts. Exit codes: 0 done, 1 refused by the daemon, 2 usage
// error, 3 cannot reach the daemon; each failure is one line that says what
// to do.
//
// The commands and the command line are sluicectl_commands.* (one table:
// parser, help and man page), the printing sluicectl_print.*; here are the
// socket, `top`'s live view and main.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include "control/json.h"
#include "control/protocol.h"
#include "sluicectl_commands.h"
#include "sluicectl_print.h"

namespace {

using sluice::control::Json;
using sluice::control::member;
namespace arg = sluice::control::arg;
namespace reply = sluice::control::reply;
using namespace sluice::sluicectl;  // NOLINT: this program's own parts

enum Exit { kOk = 0, kRefused = 1, kUsage = 2, kUnreachable = 3 };

constexpr const char* kDefaultSocket = "/run/sluice/control.sock";

int usage_error(const std::string& msg) {
  std::fprintf(stderr, "sluicectl: %s (see sluicectl --help)\n", msg.c_str());
  return kUsage;
}

int unreachable(const std::string& msg) {
  std::fprintf(stderr, "sluicectl: %s\n", msg.c_str());
  return kUnreachable;
}

// ------------------------------------------------------------ the socket

// Sends `line` on `fd`, the descriptor `pass_fd` with it (SCM_RIGHTS) unless
// it is -1. False if the connection would not take it all.
bool send_request(int fd, const std::string& line, int pass_fd) {
  size_t sent = 0;
  while (sent < line.size()) {
    iovec iov{const_cast<char*>(line.data() + sent), line.size() - sent};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    if (pass_fd >= 0 && sent == 0) {
      m.msg_control = control;
      m.msg_controllen = sizeof control;
      cmsghdr* h = CMSG_FIRSTHDR(&m);
      h->cmsg_level = SOL_SOCKET;
      h->cmsg_type = SCM_RIGHTS;
      h->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(h), &pass_fd, sizeof pass_fd);
    }
    const ssize_t n = sendmsg(fd, &m, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

// One request, one response line; the exit code on failure. `pass_fd`: a
// file to pass with the request (-1: none).
int call(const std::string& path, const std::string& request, std::string& response, int pass_fd = -1) {
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path) return unreachable("socket path too long: " + path);
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return unreachable(std::string("socket: ") + std::strerror(errno));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const int e = errno;
    close(fd);
    if (e == ENOENT || e == ECONNREFUSED) {
      return unreachable("sluiced is not running (nothing listens on " + path + "); start it, or pass --socket");
    }
    if (e == EACCES || e == EPERM) {
      return unreachable("permission denied on " + path + ": run as root or as a member of sluiced's --control-group");
    }
    return unreachable("cannot connect to " + path + ": " + std::strerror(e));
  }
  // Long enough for a reload or a credentials file of a million lines.
  timeval tv{30, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  const std::string line = request + "\n";
  if (!send_request(fd, line, pass_fd)) {
    close(fd);
    return unreachable("sluiced closed the control connection (" + path + ")");
  }
  char buf[65536];
  response.clear();
  for (;;) {
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    response.append(buf, static_cast<size_t>(n));
    if (response.find('\n') != std::string::npos) break;
  }
  close(fd);
  const size_t nl = response.find('\n');
  if (nl == std::string::npos) return unreachable("no answer from sluiced on " + path + " within 30 s");
  response.resize(nl);
  return kOk;
}

// ------------------------------------------------------------- commands

// The file a command passes, opened for reading as the caller; -1 and the
// reason if it cannot be.
int open_passed(const std::string& path, std::string& error) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    error = "cannot read " + path + ": " + std::strerror(errno);
    return -1;
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    error = "cannot read " + path + ": not a regular file";
    close(fd);
    return -1;
  }
  return fd;
}

// ------------------------------------------------------------------- top

volatile std::sig_atomic_t g_interrupted = 0;

struct Frame {
  std::map<std::string, uint64_t> counters;
  std::map<std::string, std::array<uint64_t, 3>> rules;  // admitted, refused, answered
  std::chrono::steady_clock::time_point at;
};

Frame frame_of(const Json& r) {
  Frame f;
  f.at = std::chrono::steady_clock::now();
  if (const Json* c = member(r, "counters"); c && c->is_object()) {
    for (const auto& counter : c->items()) f.counters[counter.key()] = count_in(counter.value());
  }
  for (const Json& x : elements_of(r, "rules")) {
    f.rules[field(x, "name")] = {count_of(x, "admitted"), count_of(x, "refused"), count_of(x, "answered")};
  }
  return f;
}

// Per second from `before` to `now` (negative when the daemon restarted
// between them and its counters began again).
double per_second(uint64_t now, uint64_t before, double secs) {
  const double moved = now >= before ? static_cast<double>(now - before) : -static_cast<double>(before - now);
  return moved / secs;
}

void draw_top(const Json& r, const Frame& now, const Frame* before, bool tty) {
  if (tty) std::printf("\x1b[H\x1b[2J");
  const double secs = before ? std::chrono::duration<double>(now.at - before->at).count() : 0;
  auto rate = [&](const std::string& name) {
    if (before == nullptr || secs <= 0) return 0.0;
    const auto a = now.counters.find(name), b = before->counters.find(name);
    return a == now.counters.end() || b == before->counters.end() ? 0.0 : per_second(a->second, b->second, secs);
  };
  auto total = [&](const std::string& name) {
    const auto it = now.counters.find(name);
    return it == now.counters.end() ? uint64_t{0} : it->second;
  };
  char stamp[32];
  const time_t t = std::time(nullptr);
  tm utc{};
  gmtime_r(&t, &utc);
  std::strftime(stamp, sizeof stamp, "%H:%M:%SZ", &utc);
  std::printf("sluicectl top  %s  (per second over the last %.1f s)\n\n", stamp, secs);
  std::printf("%-12s %12s %12s %12s %12s %12s %12s\n", "", "requests", "admitted", "refused", "exempt", "answered",
              "forwarded");
  std::printf("%-12s %12.0f %12.0f %12.0f %12.0f %12.0f %12.0f\n", "rate", rate("requests"), rate("admitted"),
              rate("refused"), rate("exempt"), rate("answered"), rate("forwarded"));
  std::printf("%-12s %12" PRIu64 " %12" PRIu64 " %12" PRIu64 " %12" PRIu64 " %12" PRIu64 " %12" PRIu64 "\n", "total",
              total("requests"), total("admitted"), total("refused"), total("exempt"), total("answered"),
              total("forwarded"));
  if (!now.rules.empty()) {
    std::printf("\n%-24s %14s %14s %14s\n", "rule", "admitted/s", "refused/s", "answered/s");
    for (const auto& [name, v] : now.rules) {
      std::array<double, 3> d{};
      if (before != nullptr && secs > 0) {
        if (const auto it = before->rules.find(name); it != before->rules.end()) {
          for (int i = 0; i < 3; ++i) d[i] = per_second(v[i], it->second[i], secs);
        }
      }
      std::printf("%-24s %14.0f %14.0f %14.0f\n", name.c_str(), d[0], d[1], d[2]);
    }
  }
  print_busiest(r);
  std::fflush(stdout);
}

int top(const std::string& socket_path, const Args& a, bool json) {
  // The command line checked both (sluicectl_commands.cpp).
  const auto flag = a.flags.find("interval");
  const double interval = flag == a.flags.end() ? 1 : std::strtod(flag->second.c_str(), nullptr);
  const auto given = a.flags.find("count");
  // 0: until Ctrl-C.
  const uint64_t count = given == a.flags.end() ? 0 : std::strtoull(given->second.c_str(), nullptr, 10);
  std::signal(SIGINT, [](int) { g_interrupted = 1; });
  const bool tty = isatty(STDOUT_FILENO) != 0 && !json;
  Json req = Json::object();
  req[arg::kVersion] = sluice::control::kProtocolVersion;
  req[arg::kCommand] = sluice::control::command::kStats;
  const std::string request = sluice::control::dump_json(req);
  std::optional<Frame> before;
  for (uint64_t i = 0; count == 0 || i < count; ++i) {
    std::string response, error;
    if (const int rc = call(socket_path, request, response); rc != kOk) return rc;
    const auto parsed = sluice::control::parse_json(response, error);
    if (!parsed || !parsed->is_object()) return unreachable("sluiced answered something that is not JSON");
    const Frame f = frame_of(*parsed);
    if (json) {
      std::printf("%s\n", response.c_str());
      std::fflush(stdout);
    } else {
      draw_top(*parsed, f, before ? &*before : nullptr, tty);
    }
    before = f;
    if (count != 0 && i + 1 == count) break;
    // Sleep in slices: Ctrl-C ends the view within 100 ms.
    for (double left = interval; left > 0 && !g_interrupted; left -= 0.1) {
      std::this_thread::sleep_for(std::chrono::duration<double>(std::min(left, 0.1)));
    }
    if (g_interrupted) break;
  }
  return kOk;
}


// The daemon said no: its reasons on stderr (each error line, then the
// refusal), and with --json its answer as is on stdout.
int refused(const Json& answer, const std::string& response, bool json) {
  const Json* e = member(answer, reply::kError);
  if (!json) {
    for (const Json& line : elements_of(answer, reply::kErrors)) std::fprintf(stderr, "%s\n", text_of(&line).c_str());
  }
  std::fprintf(stderr, "sluicectl: sluiced refused: %s (%s)\n",
               e ? field(*e, reply::kMessage).c_str() : "no reason given",
               e ? field(*e, reply::kCode).c_str() : "?");
  if (json) std::printf("%s\n", response.c_str());
  return kRefused;
}

// A request member that is not UTF-8 text, or "". JSON carries UTF-8 only:
// such an argument would reach sluiced with U+FFFD in place of its bad
// bytes and name another run, key or credential. A passed file's name only
// names it in messages, so it goes as it is, repaired.
std::string non_utf8_member(const Json& request) {
  for (const auto& m : request.items()) {
    if (m.key() == arg::kFile || !m.value().is_string()) continue;
    if (!sluice::control::is_utf8(m.value().get_ref<const std::string&>())) return m.key();
  }
  return {};
}

bool answered_ok(const Json& answer) {
  const Json* ok = member(answer, reply::kOk);
  return ok != nullptr && ok->is_boolean() && ok->get<bool>();
}

// One request, one answer, printed.
int run_command(const std::string& socket_path, const Command& command, const Args& args, bool json) {
  Json w = Json::object();
  w[arg::kVersion] = sluice::control::kProtocolVersion;
  w[arg::kCommand] = command.cmd;
  if (const std::string err = command.build(args, w); !err.empty()) return usage_error(err);
  if (const std::string bad = non_utf8_member(w); !bad.empty()) {
    return usage_error("the " + bad + " given is not UTF-8 text, which is all the control protocol carries");
  }
  // A command that reads a file takes it as its first argument.
  int pass_fd = -1;
  if (command.passes_file && !args.positional.empty()) {
    std::string error;
    pass_fd = open_passed(args.positional[0], error);
    if (pass_fd < 0) return usage_error(error);
  }
  std::string response;
  const int rc = call(socket_path, sluice::control::dump_json(w), response, pass_fd);
  if (pass_fd >= 0) close(pass_fd);
  if (rc != kOk) return rc;
  std::string error;
  const auto parsed = sluice::control::parse_json(response, error);
  if (!parsed || !parsed->is_object()) return unreachable("sluiced answered something that is not JSON: " + error);
  if (!answered_ok(*parsed)) return refused(*parsed, response, json);
  if (json) {
    std::printf("%s\n", response.c_str());
  } else {
    command.print(*parsed);
  }
  return kOk;
}

}  // namespace

int main(int argc, char** argv) {
  const char* env_socket = std::getenv("SLUICE_CONTROL_SOCKET");
  const CommandLine line = read_command_line(argc, argv, env_socket != nullptr ? env_socket : kDefaultSocket);
  switch (line.mode) {
    case CommandLine::Mode::kHelp:
      std::fputs(line.text.c_str(), stdout);
      return kOk;
    case CommandLine::Mode::kVersion:
      std::printf("sluicectl %s (control protocol %d)\n", SLUICE_VERSION, sluice::control::kProtocolVersion);
      return kOk;
    case CommandLine::Mode::kManual:
      std::fputs(manual_text().c_str(), stdout);
      return kOk;
    case CommandLine::Mode::kUsageError:
      return usage_error(line.text);
    case CommandLine::Mode::kRun:
      break;
  }
  if (line.command->print == nullptr) return top(line.socket_path, line.args, line.json);
  return run_command(line.socket_path, *line.command, line.args, line.json);
}

// sluicectl: the operator's command line for a running sluiced, over its
// control socket (control/protocol.h). Human-readable output by default,
// --json for scripts. Exit codes: 0 done, 1 refused by the daemon, 2 usage
// error, 3 cannot reach the daemon; each failure is one line that says what
// to do.
#include <limits.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "control/json.h"
#include "control/protocol.h"

namespace {

using sluice::control::JsonValue;

enum Exit { kOk = 0, kRefused = 1, kUsage = 2, kUnreachable = 3 };

constexpr const char* kDefaultSocket = "/run/sluice/control.sock";

const char* kUsageText = R"(sluicectl: operate a running sluiced over its control socket.

Usage: sluicectl [--socket PATH] [--json] COMMAND
  status              what runs: version, uptime, policy and its digest, ports, workers, flows
  stats               the workers' counters, added up (requests admitted, refused, ...)
  policy show         the active policy: name, file, digest, buckets, rules
  policy check FILE   validate FILE with the running daemon's loader; errors as file:line:column
  policy reload [FILE]
                      load FILE (default: the running policy's file) and publish it to the
                      workers; returns once every worker uses it. A broken file changes nothing.

Options:
  --socket PATH   the control socket (default $SLUICE_CONTROL_SOCKET, else /run/sluice/control.sock)
  --json          print the daemon's JSON answer as is
  -h, --help      this text; COMMAND --help for one command
  --version

Exit codes: 0 done, 1 refused by sluiced, 2 usage error, 3 cannot reach sluiced.
Runs, credentials, usage reports and top arrive with the rest of the control plane.
)";

int usage_error(const std::string& msg) {
  std::fprintf(stderr, "sluicectl: %s (see sluicectl --help)\n", msg.c_str());
  return kUsage;
}

int unreachable(const std::string& msg) {
  std::fprintf(stderr, "sluicectl: %s\n", msg.c_str());
  return kUnreachable;
}

// One request, one response line; the exit code on failure.
int call(const std::string& path, const std::string& request, std::string& response) {
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
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  const std::string line = request + "\n";
  if (send(fd, line.data(), line.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(line.size())) {
    close(fd);
    return unreachable("sluiced closed the control connection (" + path + ")");
  }
  char buf[65536];
  for (;;) {
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    response.append(buf, static_cast<size_t>(n));
    if (response.find('\n') != std::string::npos) break;
  }
  close(fd);
  const size_t nl = response.find('\n');
  if (nl == std::string::npos) return unreachable("no answer from sluiced on " + path + " within 10 s");
  response.resize(nl);
  return kOk;
}

// The daemon reads policy files itself: give it a path that does not depend
// on this shell's directory. False (errno set) if there is no such file.
bool absolute(const std::string& path, std::string& out) {
  char resolved[PATH_MAX];
  if (realpath(path.c_str(), resolved) == nullptr) return false;
  out = resolved;
  return true;
}

std::string num(const JsonValue* v) {
  if (v == nullptr) return "-";
  if (const auto d = v->number()) {
    char b[32];
    std::snprintf(b, sizeof b, "%.0f", *d);
    return b;
  }
  if (const std::string* s = v->string()) return *s;
  if (const bool* b = std::get_if<bool>(&v->v)) return *b ? "yes" : "no";
  return "-";
}

void print_status(const JsonValue& r) {
  std::printf("sluiced %s, up %s s\n", num(r.get("version")).c_str(), num(r.get("uptime_s")).c_str());
  if (const JsonValue* p = r.get("policy")) {
    std::printf("policy    %s (%s), digest %s, service ports %s\n", num(p->get("name")).c_str(),
                num(p->get("file")).c_str(), num(p->get("digest")).c_str(), num(p->get("service_ports")).c_str());
  }
  std::printf("workers   %s, flows tracked %s\n", num(r.get("workers")).c_str(), num(r.get("flows")).c_str());
  if (const JsonValue* ports = r.get("ports"); ports && ports->array()) {
    for (const JsonValue& p : *ports->array()) {
      std::printf("%-9s %s, mac %s, link %s\n", num(p.get("side")).c_str(), num(p.get("name")).c_str(),
                  num(p.get("mac")).c_str(), num(p.get("link_up")) == "yes" ? "up" : "down");
    }
  }
}

void print_stats(const JsonValue& r) {
  const JsonValue* counters = r.get("counters");
  const JsonValue* help = r.get("help");
  if (counters == nullptr || counters->object() == nullptr) return;
  std::printf("%-22s %14s  %s\n", "counter", "total", "what it counts");
  // The daemon's order is lost in a JSON object; print the non-zero ones first.
  std::vector<std::pair<std::string, double>> rows;
  for (const auto& [name, v] : *counters->object()) rows.emplace_back(name, v.number().value_or(0));
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return (a.second != 0) > (b.second != 0); });
  for (const auto& [name, value] : rows) {
    const JsonValue* h = help ? help->get(name) : nullptr;
    std::printf("%-22s %14.0f  %s\n", name.c_str(), value, h && h->string() ? h->string()->c_str() : "");
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string socket_path = std::getenv("SLUICE_CONTROL_SOCKET") ? std::getenv("SLUICE_CONTROL_SOCKET") : kDefaultSocket;
  bool json = false;
  std::vector<std::string> words;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "-h" || a == "--help") {
      if (words.empty()) {
        std::fputs(kUsageText, stdout);
        return kOk;
      }
      words.emplace_back("--help");
    } else if (a == "--version") {
      std::printf("sluicectl %s (control protocol %d)\n", SLUICE_VERSION, sluice::control::kProtocolVersion);
      return kOk;
    } else if (a == "--json") {
      json = true;
    } else if (a == "--socket" || a.rfind("--socket=", 0) == 0) {
      if (a == "--socket") {
        if (i + 1 >= argc) return usage_error("--socket needs a path");
        socket_path = argv[++i];
      } else {
        socket_path = std::string(a.substr(9));
      }
      if (socket_path.empty()) return usage_error("--socket needs a path");
    } else if (a.size() > 1 && a[0] == '-') {
      return usage_error("unknown option '" + std::string(a) + "'");
    } else {
      words.emplace_back(a);
    }
  }
  if (words.empty()) return usage_error("which command? (status, stats, policy)");
  std::string cmd = words[0];
  std::string file;
  const bool help = std::find(words.begin(), words.end(), "--help") != words.end();
  if (cmd == "status" || cmd == "stats") {
    if (help) {
      std::printf(cmd == "status" ? "sluicectl status [--json]: version, uptime, policy and digest, ports, workers, flows\n"
                                  : "sluicectl stats [--json]: every counter of the workers, added up, with what it counts\n");
      return kOk;
    }
    if (words.size() > 1) return usage_error("'" + cmd + "' takes no arguments, got '" + words[1] + "'");
  } else if (cmd == "policy") {
    if (help || words.size() < 2) {
      if (!help) return usage_error("policy what? (show, check FILE, reload [FILE])");
      std::printf("sluicectl policy show [--json]: the active policy: name, file, digest, buckets, rules\n"
                  "sluicectl policy check FILE [--json]: validate FILE as the running sluiced would load it;\n"
                  "  exit 0 if it is usable, 1 with its errors (file:line:column) if not\n"
                  "sluicectl policy reload [FILE] [--json]: publish FILE (default: the running policy's file);\n"
                  "  returns once every worker uses it; a broken file changes nothing (exit 1, its errors)\n");
      return kOk;
    }
    if (words[1] == "show") {
      if (words.size() > 2) return usage_error("'policy show' takes no arguments");
      cmd = "policy.show";
    } else if (words[1] == "reload") {
      if (words.size() > 3) return usage_error("'policy reload' takes at most one FILE");
      if (words.size() == 3 && !absolute(words[2], file)) {
        return usage_error("cannot read " + words[2] + ": " + std::strerror(errno));
      }
      cmd = "policy.reload";
    } else if (words[1] == "check") {
      if (words.size() != 3) return usage_error("'policy check' takes one FILE");
      if (!absolute(words[2], file)) return usage_error("cannot read " + words[2] + ": " + std::strerror(errno));
      cmd = "policy.check";
    } else {
      return usage_error("unknown policy command '" + words[1] + "' (show, check FILE, reload [FILE])");
    }
  } else {
    return usage_error("unknown command '" + cmd + "'");
  }

  sluice::control::JsonWriter w;
  w.begin_object().key("v").value(sluice::control::kProtocolVersion).key("cmd").value(cmd);
  if (!file.empty()) w.key("file").value(file);
  w.end_object();
  std::string response;
  if (const int rc = call(socket_path, w.str(), response); rc != kOk) return rc;
  std::string error;
  const auto parsed = sluice::control::parse_json(response, error);
  if (!parsed || parsed->object() == nullptr) return unreachable("sluiced answered something that is not JSON: " + error);
  const JsonValue* ok = parsed->get("ok");
  if (ok == nullptr || !std::holds_alternative<bool>(ok->v) || !std::get<bool>(ok->v)) {
    const JsonValue* e = parsed->get("error");
    if (const JsonValue* errors = parsed->get("errors"); errors && errors->array() && !json) {
      for (const JsonValue& line : *errors->array()) std::fprintf(stderr, "%s\n", num(&line).c_str());
    }
    std::fprintf(stderr, "sluicectl: sluiced refused: %s (%s)\n", e ? num(e->get("message")).c_str() : "no reason given",
                 e ? num(e->get("code")).c_str() : "?");
    if (json) std::printf("%s\n", response.c_str());
    return kRefused;
  }
  if (json) {
    std::printf("%s\n", response.c_str());
  } else if (cmd == "status") {
    print_status(*parsed);
  } else if (cmd == "stats") {
    print_stats(*parsed);
  } else if (cmd == "policy.show") {
    std::printf("policy    %s\nfile      %s\ndigest    %s\nports     %s\n", num(parsed->get("name")).c_str(),
                num(parsed->get("file")).c_str(), num(parsed->get("digest")).c_str(),
                num(parsed->get("service_ports")).c_str());
    for (const char* list : {"buckets", "rules"}) {
      std::string joined;
      if (const JsonValue* l = parsed->get(list); l && l->array()) {
        for (const JsonValue& x : *l->array()) joined += (joined.empty() ? "" : ", ") + num(&x);
      }
      std::printf("%-9s %s\n", list, joined.c_str());
    }
  } else if (cmd == "policy.reload") {
    std::printf("reloaded: policy '%s' from %s, digest %s, generation %s; every worker uses it\n",
                num(parsed->get("name")).c_str(), num(parsed->get("file")).c_str(), num(parsed->get("digest")).c_str(),
                num(parsed->get("generation")).c_str());
  } else {
    std::printf("%s: ok: policy '%s', digest %s, %s rules, %s buckets\n", num(parsed->get("file")).c_str(),
                num(parsed->get("name")).c_str(), num(parsed->get("digest")).c_str(), num(parsed->get("rules")).c_str(),
                num(parsed->get("buckets")).c_str());
  }
  return kOk;
}

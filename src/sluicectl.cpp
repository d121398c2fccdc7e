// sluicectl: the operator's command line for a running sluiced, over its
// control socket (control/protocol.h). Human-readable output by default,
// --json for scripts. Exit codes: 0 done, 1 refused by the daemon, 2 usage
// error, 3 cannot reach the daemon; each failure is one line that says what
// to do.
//
// Every command is one row of kCommands: its words, its arguments, its help,
// how it builds the request and how it prints the answer.
#include <fcntl.h>
#include <limits.h>
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
#include <iostream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "control/json.h"
#include "control/protocol.h"

namespace {

using sluice::control::JsonValue;
using sluice::control::JsonWriter;

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

// --------------------------------------------------------------- printing

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

double number(const JsonValue* v) { return v ? v->number().value_or(0) : 0; }

std::string when(const JsonValue* unix_seconds) {
  const auto t = static_cast<time_t>(number(unix_seconds));
  char b[32];
  tm utc{};
  gmtime_r(&t, &utc);
  std::strftime(b, sizeof b, "%Y-%m-%d %H:%M:%SZ", &utc);
  return b;
}

void print_status(const JsonValue& r) {
  std::printf("sluiced %s, up %s s\n", num(r.get("version")).c_str(), num(r.get("uptime_s")).c_str());
  if (const JsonValue* p = r.get("policy")) {
    std::printf("policy    %s (%s), digest %s, service ports %s\n", num(p->get("name")).c_str(),
                num(p->get("file")).c_str(), num(p->get("digest")).c_str(), num(p->get("service_ports")).c_str());
  }
  std::printf("workers   %s, flows tracked %s\n", num(r.get("workers")).c_str(), num(r.get("flows")).c_str());
  std::printf("runs      %s live, credentials %s, state in %s\n", num(r.get("runs")).c_str(),
              num(r.get("credentials")).c_str(), num(r.get("state_dir")).c_str());
  if (const JsonValue* c = r.get("cluster"); c && c->object()) {
    std::string redis;
    if (const JsonValue* list = c->get("redis"); list && list->array()) {
      for (const JsonValue& e : *list->array()) redis += (redis.empty() ? "" : ", ") + num(&e);
    }
    std::printf("cluster   %s as %s, Redis %s\n", num(c->get("state")).c_str(), num(c->get("box")).c_str(),
                redis.c_str());
  }
  if (const JsonValue* ports = r.get("ports"); ports && ports->array()) {
    for (const JsonValue& p : *ports->array()) {
      std::printf("%-9s %s, mac %s, link %s\n", num(p.get("side")).c_str(), num(p.get("name")).c_str(),
                  num(p.get("mac")).c_str(), num(p.get("link_up")) == "yes" ? "up" : "down");
    }
  }
}

void print_tables(const JsonValue& r) {
  if (const JsonValue* t = r.get("tables"); t && t->object()) {
    std::printf("\n%-18s %12s %12s %12s %12s\n", "table", "live", "capacity", "overflows", "reclaimed");
    for (const auto& [name, v] : *t->object()) {
      std::printf("%-18s %12s %12s %12s %12s\n", name.c_str(), num(v.get("live")).c_str(),
                  num(v.get("capacity")).c_str(), num(v.get("overflows")).c_str(), num(v.get("reclaimed")).c_str());
    }
  }
  if (const JsonValue* ports = r.get("ports"); ports && ports->array()) {
    std::printf("\n%-8s %-18s %12s %12s %10s %10s %10s\n", "port", "name", "rx packets", "tx packets", "rx missed",
                "rx errors", "tx errors");
    for (const JsonValue& p : *ports->array()) {
      std::printf("%-8s %-18s %12s %12s %10s %10s %10s\n", num(p.get("side")).c_str(), num(p.get("name")).c_str(),
                  num(p.get("rx_packets")).c_str(), num(p.get("tx_packets")).c_str(), num(p.get("rx_missed")).c_str(),
                  num(p.get("rx_errors")).c_str(), num(p.get("tx_errors")).c_str());
    }
  }
}

// Issue 17: the cluster sync, when the policy shares budgets.
void print_cluster(const JsonValue& r) {
  const JsonValue* c = r.get("cluster");
  if (c == nullptr || c->object() == nullptr) return;
  std::printf("\ncluster   %s (fallback %s, sync every %s ms)", num(c->get("state")).c_str(),
              num(c->get("fallback")).c_str(), num(c->get("sync_interval_ms")).c_str());
  const std::string error = num(c->get("last_error"));
  std::printf("%s%s\n", error.empty() ? "" : ": ", error.c_str());
  std::printf("  syncs %s (failed %s), keys sent %s, published %s, watched %s, last sync %s us (max %s)\n",
              num(c->get("syncs")).c_str(), num(c->get("sync_failures")).c_str(), num(c->get("keys_sent")).c_str(),
              num(c->get("keys_published")).c_str(), num(c->get("keys_watched")).c_str(),
              num(c->get("last_sync_us")).c_str(), num(c->get("max_sync_us")).c_str());
  std::printf("  fallbacks %s, keys the fallback took %s, admissions the spend log lost %s\n",
              num(c->get("fallbacks")).c_str(), num(c->get("fallback_keys")).c_str(),
              num(c->get("spend_lost_records")).c_str());
}

void print_rules(const JsonValue& r) {
  const JsonValue* rules = r.get("rules");
  if (rules == nullptr || rules->array() == nullptr || rules->array()->empty()) return;
  std::printf("\n%-24s %12s %12s %12s\n", "rule", "admitted", "refused", "answered");
  for (const JsonValue& x : *rules->array()) {
    std::printf("%-24s %12s %12s %12s\n", num(x.get("name")).c_str(), num(x.get("admitted")).c_str(),
                num(x.get("refused")).c_str(), num(x.get("answered")).c_str());
  }
}

void print_busiest(const JsonValue& r) {
  const JsonValue* keys = r.get("busiest");
  if (keys == nullptr || keys->array() == nullptr || keys->array()->empty()) return;
  std::printf("\n%-24s %-42s %12s\n", "busiest keys: rule", "key", "requests~");
  for (const JsonValue& k : *keys->array()) {
    std::printf("%-24s %-42s %12s\n", num(k.get("rule")).c_str(), num(k.get("key")).c_str(), num(k.get("count")).c_str());
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
  print_rules(r);
  print_busiest(r);
  print_tables(r);
  print_cluster(r);
}

void print_policy(const JsonValue& r) {
  std::printf("policy    %s\nfile      %s\ndigest    %s\nports     %s\n", num(r.get("name")).c_str(),
              num(r.get("file")).c_str(), num(r.get("digest")).c_str(), num(r.get("service_ports")).c_str());
  for (const char* list : {"buckets", "rules"}) {
    std::string joined;
    if (const JsonValue* l = r.get(list); l && l->array()) {
      for (const JsonValue& x : *l->array()) joined += (joined.empty() ? "" : ", ") + num(&x);
    }
    std::printf("%-9s %s\n", list, joined.c_str());
  }
}

void print_runs(const JsonValue& r) {
  const JsonValue* runs = r.get("runs");
  if (runs == nullptr || runs->array() == nullptr || runs->array()->empty()) {
    std::printf("no live runs (room for %s)\n", num(r.get("capacity")).c_str());
    return;
  }
  std::printf("%-40s %10s  %s\n", "run", "budget/min", "started (UTC)");
  for (const JsonValue& x : *runs->array()) {
    const std::string budget = number(x.get("budget")) == 0 ? "policy" : num(x.get("budget"));
    std::printf("%-40s %10s  %s\n", num(x.get("token")).c_str(), budget.c_str(), when(x.get("started_unix")).c_str());
  }
  std::printf("%zu live (room for %s)\n", runs->array()->size(), num(r.get("capacity")).c_str());
}

void print_message(const JsonValue& r) { std::printf("%s\n", num(r.get("message")).c_str()); }

void print_credentials(const JsonValue& r) {
  std::printf("%s credentials loaded (room for %s)\n", num(r.get("credentials")).c_str(), num(r.get("capacity")).c_str());
  if (const JsonValue* users = r.get("users"); users && users->object() && !users->object()->empty()) {
    std::printf("%-40s %12s\n", "user", "credentials");
    for (const auto& [user, n] : *users->object()) std::printf("%-40s %12s\n", user.c_str(), num(&n).c_str());
  }
}

void print_bucket(const JsonValue& r) {
  std::printf("bucket    %s\nkey       %s%s\n", num(r.get("bucket")).c_str(), num(r.get("key")).c_str(),
              num(r.get("tracked")) == "yes" ? "" : " (no state: full)");
  if (r.get("window") != nullptr) {
    std::printf("requests  %s of %s this minute\n", num(r.get("requests")).c_str(), num(r.get("requests_limit")).c_str());
    std::printf("tokens    %s of %s this minute\n", num(r.get("tokens")).c_str(), num(r.get("tokens_limit")).c_str());
  } else {
    std::printf("limit     %s per minute, burst %s\n", num(r.get("limit")).c_str(), num(r.get("burst")).c_str());
  }
  std::printf("remaining %s\nreset     %s s\n", num(r.get("remaining")).c_str(), num(r.get("reset_s")).c_str());
  if (num(r.get("refusing")) == "yes") {
    std::printf("refusing  yes%s\n",
                r.get("retry_after_s") ? (", retry after " + num(r.get("retry_after_s")) + " s").c_str() : "");
  }
}

void print_usage_report(const JsonValue& r) {
  std::printf("%s: %s tokens charged; %s of %s this minute%s (resets in %s s)\n", num(r.get("deployment")).c_str(),
              num(r.get("tokens")).c_str(), num(r.get("minute_tokens")).c_str(), num(r.get("tokens_limit")).c_str(),
              num(r.get("over")) == "yes" ? ", over: its next request is refused" : "", num(r.get("reset_s")).c_str());
}

// ---------------------------------------------------------------- commands

struct Args {
  std::vector<std::string> positional;       // after the command words
  std::map<std::string, std::string> flags;  // --budget N, --bucket NAME, ...
};

// Fills `w` (the request object is open, "v" and "cmd" written); returns a
// usage error or "".
using Build = std::string (*)(const Args&, JsonWriter&);
using Print = void (*)(const JsonValue&);

struct Command {
  std::vector<std::string_view> words;  // e.g. {"run", "start"}
  std::string_view cmd;                 // the protocol's command
  std::string_view synopsis;            // arguments, as help shows them
  std::string_view help;
  size_t min_args, max_args;
  std::vector<std::string_view> flags;  // options that take a value
  Build build;
  Print print;
  bool passes_file = false;  // its first argument is a file, passed to sluiced (file_arg)
};

std::string no_args(const Args&, JsonWriter&) { return {}; }

// A file the command reads: sluicectl opens it (run_command) with its
// caller's rights and passes the descriptor; sluiced opens no path a client
// names. The request carries its name for messages.
std::string file_arg(const std::string& path, JsonWriter& w) {
  w.key("file").value(path).key("fd").value(true);
  return {};
}

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

std::optional<uint64_t> whole(const std::string& s, uint64_t max) {
  if (s.empty() || s.size() > 19 || s.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  const uint64_t n = std::stoull(s);
  if (n > max) return std::nullopt;
  return n;
}

const Command kCommands[] = {
    {{"status"}, "status", "", "version, uptime, policy and its digest, ports, workers, flows, runs", 0, 0, {},
     no_args, print_status},
    {{"stats"}, "stats", "",
     "every counter of the workers added up, per rule, the tables' occupancy and the ports' packet counts", 0, 0, {},
     no_args, print_stats},
    {{"top"}, "stats", "[--interval S] [--count N]",
     "a live view, refreshed every S seconds (default 1): request rates, refusals per rule, the busiest keys;\n"
     "  Ctrl-C ends it, or --count N after N refreshes",
     0, 0, {"interval", "count"}, no_args, nullptr},
    {{"policy", "show"}, "policy.show", "", "the active policy: name, file, digest, buckets, rules", 0, 0, {}, no_args,
     print_policy},
    {{"policy", "check"}, "policy.check", "FILE",
     "validate FILE as the running sluiced would load it; exit 0 if usable, 1 with its errors (file:line:column)", 1,
     1, {}, [](const Args& a, JsonWriter& w) { return file_arg(a.positional[0], w); },
     [](const JsonValue& r) {
       std::printf("%s: ok: policy '%s', digest %s, %s rules, %s buckets\n", num(r.get("file")).c_str(),
                   num(r.get("name")).c_str(), num(r.get("digest")).c_str(), num(r.get("rules")).c_str(),
                   num(r.get("buckets")).c_str());
     },
     true},
    {{"policy", "reload"}, "policy.reload", "[FILE]",
     "publish FILE (default: sluiced's --config file, as SIGHUP does); returns once every worker uses it;\n"
     "  a broken file changes nothing (exit 1, its errors). Buckets of unchanged rules keep their state",
     0, 1, {}, [](const Args& a, JsonWriter& w) { return a.positional.empty() ? std::string() : file_arg(a.positional[0], w); },
     [](const JsonValue& r) {
       std::printf("reloaded: policy '%s' from %s, digest %s, generation %s; every worker uses it\n",
                   num(r.get("name")).c_str(), num(r.get("file")).c_str(), num(r.get("digest")).c_str(),
                   num(r.get("generation")).c_str());
     },
     true},
    {{"runs"}, "runs", "", "the live runs: token, budget, when they started", 0, 0, {}, no_args, print_runs},
    {{"run", "start"}, "run.start", "TOKEN [--budget N]",
     "make a run live (TB01): requests on /vrx/TOKEN/... are paced per run, at N per minute if given, else at the\n"
     "  policy's run budget; journalled, so a restart keeps it. Returns once every worker sees it",
     1, 1, {"budget"},
     [](const Args& a, JsonWriter& w) {
       w.key("token").value(a.positional[0]);
       if (const auto it = a.flags.find("budget"); it != a.flags.end()) {
         const std::optional<uint64_t> n = whole(it->second, 1'000'000'000);
         if (!n || *n == 0) return "--budget wants requests per minute (1 to 1000000000), got '" + it->second + "'";
         w.key("budget").value(*n);
       }
       return std::string();
     },
     print_message},
    {{"run", "end"}, "run.end", "TOKEN",
     "end a run (TB13): once this returns, no request on it is paced at the run rate", 1, 1, {},
     [](const Args& a, JsonWriter& w) {
       w.key("token").value(a.positional[0]);
       return std::string();
     },
     print_message},
    {{"credentials", "load"}, "credentials.load", "FILE",
     "replace the credential-to-user map (RF04) with FILE's: lines of 'HASH USER', hashes from\n"
     "  'sluicectl credential hash'; a file with errors changes nothing (exit 1, file:line:column)",
     1, 1, {}, [](const Args& a, JsonWriter& w) { return file_arg(a.positional[0], w); }, print_message, true},
    {{"credentials", "show"}, "credentials.show", "", "how many credentials are loaded, per user", 0, 0, {}, no_args,
     print_credentials},
    {{"credential", "add"}, "credential.add", "HASH USER", "map one credential hash to USER (RF04)", 2, 2, {},
     [](const Args& a, JsonWriter& w) {
       w.key("hash").value(a.positional[0]).key("user").value(a.positional[1]);
       return std::string();
     },
     print_message},
    {{"credential", "remove"}, "credential.remove", "HASH",
     "forget one credential hash: its requests then get the policy's unknown-credential answer (RF10)", 1, 1, {},
     [](const Args& a, JsonWriter& w) {
       w.key("hash").value(a.positional[0]);
       return std::string();
     },
     print_message},
    {{"credential", "hash"}, "credential.hash", "",
     "read one credential (the Authorization value, e.g. 'Bearer abc') on stdin and print its hash, computed\n"
     "  by sluiced with its secret (TB05: the scheme's case and surrounding spaces do not matter)",
     0, 0, {},
     [](const Args&, JsonWriter& w) {
       std::string credential((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
       while (!credential.empty() && (credential.back() == '\n' || credential.back() == '\r')) credential.pop_back();
       if (credential.empty()) return std::string("credential hash reads the credential on stdin; it was empty");
       w.key("credential").value(credential);
       return std::string();
     },
     [](const JsonValue& r) { std::printf("%s\n", num(r.get("hash")).c_str()); }},
    {{"usage", "report"}, "usage.report", "DEPLOYMENT TOKENS [--bucket NAME]",
     "charge TOKENS used by a finished request to DEPLOYMENT's current minute (DQ05); once the minute's\n"
     "  total reaches the quota its next request is refused (DQ07)",
     2, 2, {"bucket"},
     [](const Args& a, JsonWriter& w) {
       const std::optional<uint64_t> n = whole(a.positional[1], uint64_t{1} << 32);
       if (!n) return "TOKENS wants a whole number (0 to 4294967296), got '" + a.positional[1] + "'";
       w.key("deployment").value(a.positional[0]).key("tokens").value(*n);
       if (const auto it = a.flags.find("bucket"); it != a.flags.end()) w.key("bucket").value(it->second);
       return std::string();
     },
     print_usage_report},
    {{"bucket", "show"}, "bucket.show", "BUCKET KEY",
     "remaining and reset of one key's bucket, without charging it. KEY as the bucket's rules key it:\n"
     "  a client address, a run token or deployment name, a user name, or a credential hash",
     2, 2, {},
     [](const Args& a, JsonWriter& w) {
       w.key("bucket").value(a.positional[0]).key("key").value(a.positional[1]);
       return std::string();
     },
     print_bucket},
};

std::string words_of(const Command& c) {
  std::string s;
  for (std::string_view w : c.words) s += (s.empty() ? "" : " ") + std::string(w);
  return s;
}

void print_help() {
  std::printf("sluicectl: operate a running sluiced over its control socket.\n\n"
              "Usage: sluicectl [--socket PATH] [--json] COMMAND [ARGS]\n\n");
  for (const Command& c : kCommands) {
    const std::string line = words_of(c) + (c.synopsis.empty() ? "" : " " + std::string(c.synopsis));
    std::printf("  %s\n      %.*s\n", line.c_str(), static_cast<int>(c.help.size()), c.help.data());
  }
  std::printf("\nOptions:\n"
              "  --socket PATH   the control socket (default $SLUICE_CONTROL_SOCKET, else %s)\n"
              "  --json          print the daemon's JSON answer as is\n"
              "  -h, --help      this text; COMMAND --help for one command\n"
              "  --version\n\n"
              "Exit codes: 0 done, 1 refused by sluiced, 2 usage error, 3 cannot reach sluiced.\n",
              kDefaultSocket);
}

// ------------------------------------------------------------------- top

volatile std::sig_atomic_t g_interrupted = 0;

struct Frame {
  std::map<std::string, double> counters;
  std::map<std::string, std::array<double, 3>> rules;  // admitted, refused, answered
  std::chrono::steady_clock::time_point at;
};

Frame frame_of(const JsonValue& r) {
  Frame f;
  f.at = std::chrono::steady_clock::now();
  if (const JsonValue* c = r.get("counters"); c && c->object()) {
    for (const auto& [k, v] : *c->object()) f.counters[k] = v.number().value_or(0);
  }
  if (const JsonValue* rules = r.get("rules"); rules && rules->array()) {
    for (const JsonValue& x : *rules->array()) {
      f.rules[num(x.get("name"))] = {number(x.get("admitted")), number(x.get("refused")), number(x.get("answered"))};
    }
  }
  return f;
}

void draw_top(const JsonValue& r, const Frame& now, const Frame* before, bool tty) {
  if (tty) std::printf("\x1b[H\x1b[2J");
  const double secs = before ? std::chrono::duration<double>(now.at - before->at).count() : 0;
  auto rate = [&](const std::string& name) {
    if (before == nullptr || secs <= 0) return 0.0;
    const auto a = now.counters.find(name), b = before->counters.find(name);
    return a == now.counters.end() || b == before->counters.end() ? 0.0 : (a->second - b->second) / secs;
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
  std::printf("%-12s %12.0f %12.0f %12.0f %12.0f %12.0f %12.0f\n", "total", now.counters.count("requests") ? now.counters.at("requests") : 0,
              now.counters.count("admitted") ? now.counters.at("admitted") : 0,
              now.counters.count("refused") ? now.counters.at("refused") : 0,
              now.counters.count("exempt") ? now.counters.at("exempt") : 0,
              now.counters.count("answered") ? now.counters.at("answered") : 0,
              now.counters.count("forwarded") ? now.counters.at("forwarded") : 0);
  if (!now.rules.empty()) {
    std::printf("\n%-24s %14s %14s %14s\n", "rule", "admitted/s", "refused/s", "answered/s");
    for (const auto& [name, v] : now.rules) {
      std::array<double, 3> d{};
      if (before != nullptr && secs > 0) {
        if (const auto it = before->rules.find(name); it != before->rules.end()) {
          for (int i = 0; i < 3; ++i) d[i] = (v[i] - it->second[i]) / secs;
        }
      }
      std::printf("%-24s %14.0f %14.0f %14.0f\n", name.c_str(), d[0], d[1], d[2]);
    }
  }
  print_busiest(r);
  std::fflush(stdout);
}

int top(const std::string& socket_path, const Args& a, bool json) {
  double interval = 1;
  uint64_t count = 0;  // 0: until interrupted
  if (const auto it = a.flags.find("interval"); it != a.flags.end()) {
    char* end = nullptr;
    interval = std::strtod(it->second.c_str(), &end);
    if (end == it->second.c_str() || *end != '\0' || interval < 0.1 || interval > 3600) {
      return usage_error("--interval wants seconds (0.1 to 3600), got '" + it->second + "'");
    }
  }
  if (const auto it = a.flags.find("count"); it != a.flags.end()) {
    const std::optional<uint64_t> n = whole(it->second, 1'000'000);
    if (!n || *n == 0) return usage_error("--count wants refreshes (1 to 1000000), got '" + it->second + "'");
    count = *n;
  }
  std::signal(SIGINT, [](int) { g_interrupted = 1; });
  const bool tty = isatty(STDOUT_FILENO) != 0 && !json;
  JsonWriter req;
  req.begin_object().key("v").value(sluice::control::kProtocolVersion).key("cmd").value("stats").end_object();
  std::optional<Frame> before;
  for (uint64_t i = 0; count == 0 || i < count; ++i) {
    std::string response, error;
    if (const int rc = call(socket_path, req.str(), response); rc != kOk) return rc;
    const auto parsed = sluice::control::parse_json(response, error);
    if (!parsed || parsed->object() == nullptr) return unreachable("sluiced answered something that is not JSON");
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

// ------------------------------------------------------------ command line

// What the command line says: the global options, the command's words and
// the options after them (checked against the command once it is known).
struct CommandLine {
  std::string socket_path;
  bool json = false, help = false;
  std::vector<std::string> words;
  std::vector<std::pair<std::string, std::string>> flags;  // in the order given
};

// "--NAME VALUE" or "--NAME=VALUE" at argv[i]; `i` moves past a separate
// VALUE. An exit code when it is a usage error.
std::optional<int> read_long_option(int argc, char** argv, int& i, CommandLine& line) {
  const std::string_view a = argv[i];
  std::string name(a.substr(2)), value;
  const size_t eq = name.find('=');
  if (eq != std::string::npos) {
    value = name.substr(eq + 1);
    name.resize(eq);
  } else if (name == "socket" || name == "budget" || name == "bucket" || name == "interval" || name == "count") {
    if (i + 1 >= argc) return usage_error("--" + name + " needs a value");
    value = argv[++i];
  } else {
    return usage_error("unknown option '" + std::string(a) + "'");
  }
  if (name == "socket") {
    if (value.empty()) return usage_error("--socket needs a path");
    line.socket_path = value;
  } else {
    line.flags.emplace_back(name, value);
  }
  return std::nullopt;
}

// An exit code when sluicectl is done before any command runs: --version,
// or a usage error (reported in the order the arguments come).
std::optional<int> read_command_line(int argc, char** argv, CommandLine& line) {
  line.socket_path = std::getenv("SLUICE_CONTROL_SOCKET") ? std::getenv("SLUICE_CONTROL_SOCKET") : kDefaultSocket;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "-h" || a == "--help") {
      line.help = true;
    } else if (a == "--version") {
      std::printf("sluicectl %s (control protocol %d)\n", SLUICE_VERSION, sluice::control::kProtocolVersion);
      return kOk;
    } else if (a == "--json") {
      line.json = true;
    } else if (a.size() > 2 && a.substr(0, 2) == "--") {
      if (const std::optional<int> done = read_long_option(argc, argv, i, line)) return done;
    } else if (a.size() > 1 && a[0] == '-') {
      return usage_error("unknown option '" + std::string(a) + "'");
    } else {
      line.words.emplace_back(a);
    }
  }
  return std::nullopt;
}

// The command whose words the line starts with (the longest match), or null.
const Command* find_command(const std::vector<std::string>& words) {
  const Command* command = nullptr;
  for (const Command& c : kCommands) {
    if (c.words.size() > words.size()) continue;
    if (!std::equal(c.words.begin(), c.words.end(), words.begin())) continue;
    if (command == nullptr || c.words.size() > command->words.size()) command = &c;
  }
  return command;
}

// Words that name no command. When the first one names a group ("run"),
// the group's commands: their help with --help, else a usage error that
// lists them.
int no_such_command(const std::vector<std::string>& words, bool help) {
  std::string subs;
  for (const Command& c : kCommands) {
    if (c.words.size() > 1 && c.words[0] == words[0]) subs += (subs.empty() ? "" : ", ") + std::string(c.words[1]);
  }
  if (subs.empty()) return usage_error("unknown command '" + words[0] + "'");
  if (help) {
    for (const Command& c : kCommands) {
      if (c.words[0] != words[0]) continue;
      std::printf("sluicectl %s%s%.*s\n  %.*s\n", words_of(c).c_str(), c.synopsis.empty() ? "" : " ",
                  static_cast<int>(c.synopsis.size()), c.synopsis.data(), static_cast<int>(c.help.size()),
                  c.help.data());
    }
    return kOk;
  }
  return usage_error(words.size() == 1 ? words[0] + " what? (" + subs + ")"
                                       : "unknown " + words[0] + " command '" + words[1] + "' (" + subs + ")");
}

void print_command_help(const Command& command) {
  std::printf("sluicectl %s%s%.*s [--json]\n  %.*s\n", words_of(command).c_str(), command.synopsis.empty() ? "" : " ",
              static_cast<int>(command.synopsis.size()), command.synopsis.data(),
              static_cast<int>(command.help.size()), command.help.data());
}

// The words after the command's and the options given, checked against
// what the command takes. An exit code when it is a usage error.
std::optional<int> bind_args(const Command& command, const CommandLine& line, Args& args) {
  const std::string name = words_of(command);
  args.positional.assign(line.words.begin() + static_cast<std::ptrdiff_t>(command.words.size()), line.words.end());
  if (args.positional.size() < command.min_args || args.positional.size() > command.max_args) {
    const std::string syn(command.synopsis);
    return usage_error("'" + name + "' takes " + (syn.empty() ? "no arguments" : syn) +
                       (args.positional.size() > command.max_args && !args.positional.empty()
                            ? ", got '" + args.positional.back() + "'"
                            : ""));
  }
  for (const auto& [flag, value] : line.flags) {
    if (std::find(command.flags.begin(), command.flags.end(), flag) == command.flags.end()) {
      return usage_error("'" + name + "' has no option --" + flag);
    }
    args.flags[flag] = value;
  }
  return std::nullopt;
}

// The daemon said no: its reasons on stderr (each error line, then the
// refusal), and with --json its answer as is on stdout.
int refused(const JsonValue& answer, const std::string& response, bool json) {
  const JsonValue* e = answer.get("error");
  if (const JsonValue* errors = answer.get("errors"); errors && errors->array() && !json) {
    for (const JsonValue& line : *errors->array()) std::fprintf(stderr, "%s\n", num(&line).c_str());
  }
  std::fprintf(stderr, "sluicectl: sluiced refused: %s (%s)\n", e ? num(e->get("message")).c_str() : "no reason given",
               e ? num(e->get("code")).c_str() : "?");
  if (json) std::printf("%s\n", response.c_str());
  return kRefused;
}

// One request, one answer, printed.
int run_command(const std::string& socket_path, const Command& command, const Args& args, bool json) {
  JsonWriter w;
  w.begin_object().key("v").value(sluice::control::kProtocolVersion).key("cmd").value(command.cmd);
  if (const std::string err = command.build(args, w); !err.empty()) return usage_error(err);
  w.end_object();
  // A command that reads a file takes it as its first argument.
  int pass_fd = -1;
  if (command.passes_file && !args.positional.empty()) {
    std::string error;
    pass_fd = open_passed(args.positional[0], error);
    if (pass_fd < 0) return usage_error(error);
  }
  std::string response;
  const int rc = call(socket_path, w.str(), response, pass_fd);
  if (pass_fd >= 0) close(pass_fd);
  if (rc != kOk) return rc;
  std::string error;
  const auto parsed = sluice::control::parse_json(response, error);
  if (!parsed || parsed->object() == nullptr) return unreachable("sluiced answered something that is not JSON: " + error);
  const JsonValue* ok = parsed->get("ok");
  if (ok == nullptr || !std::holds_alternative<bool>(ok->v) || !std::get<bool>(ok->v)) {
    return refused(*parsed, response, json);
  }
  if (json) {
    std::printf("%s\n", response.c_str());
  } else {
    command.print(*parsed);
  }
  return kOk;
}

}  // namespace

int main(int argc, char** argv) {
  CommandLine line;
  if (const std::optional<int> done = read_command_line(argc, argv, line)) return *done;
  if (line.words.empty()) {
    if (line.help) {
      print_help();
      return kOk;
    }
    return usage_error("which command? (status, stats, top, runs, run, credentials, credential, usage, bucket, policy)");
  }
  const Command* command = find_command(line.words);
  if (command == nullptr) return no_such_command(line.words, line.help);
  if (line.help) {
    print_command_help(*command);
    return kOk;
  }
  Args args;
  if (const std::optional<int> bad = bind_args(*command, line, args)) return *bad;
  if (command->print == nullptr) return top(line.socket_path, args, line.json);
  return run_command(line.socket_path, *command, args, line.json);
}

// See sluice_replay_options.h. The table CLI11 parses is the one --help and
// the man page's OPTIONS are written from (cli_text.h).
#include "sluice_replay_options.h"

#include <CLI/CLI.hpp>

#include <charconv>
#include <cstdlib>

#include "cli_program.h"
#include "cli_text.h"
#include "replay/access_log.h"
#include "policy/policy_loader.h"
#include "replay/log_format.h"

namespace sluice::replay_cli {

namespace {

constexpr const char* kDescription = R"(What would this policy have done to that traffic? sluice-replay decides recorded
requests offline with the appliance's own limiter, at the times they were
recorded, and reports who would have been admitted and refused, when, and by
which rule.
  sluice-replay --policy FILE [options] INPUT...
      INPUT: a pcap or pcapng capture (HTTP/1.1 over TCP, both directions:
      each flow to a service port is reassembled as the appliance would),
      or an access log (nginx's log_format, by default combined, or JSON
      lines), plain or compressed (gzip, xz, zstd), a file or a pipe. Every
      input's requests are decided together, in time order; the captures
      are read as one packet stream, so one split by direction or into
      ring-buffer files gives each connection whole. Inputs are streamed:
      memory follows what is live, not their length.)";

constexpr const char* kExitCodes = R"(Exit codes:
  0 replayed   1 a report could not be written   2 bad command line
  3 a policy file is missing or invalid   4 an input cannot be read at all
  5 the state directory, runs or credentials file cannot be used
  6 --strict, and records were skipped)";

struct Given {
  std::string format, service_ports, since, until, reorder_window;
  std::vector<std::string> json_fields;
  cli_program::Common common;  // --version, --manual-markdown
};

CLI::Validator key_value() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        const size_t eq = s.find('=');
        return eq == 0 || eq == std::string::npos || eq + 1 == s.size() ? "wants KEY=VARIABLE, got '" + s + "'" : "";
      },
      "");
}

CLI::Validator format_name() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        return s == "auto" || s == "pcap" || s == "nginx" || s == "json" ? ""
                                                                         : "wants auto, pcap, nginx or json, got '" + s + "'";
      },
      "");
}

CLI::Validator nginx_format() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        const replay::FormatCheck c = replay::check_nginx_format(s);
        return c.error.empty() ? "" : "is not usable: " + c.error;
      },
      "");
}

// A whole number from `low` to `high`, and says so.
template <typename T>
CLI::Validator whole_number(T low, T high) {
  return cli_program::whole_number(low, high, "wants " + std::to_string(low) + " to " + std::to_string(high));
}

// A moment as a log or a person writes it: ISO 8601 with its offset
// (2026-12-01T10:00:00Z, +01:00), or seconds since 1970 ($msec).
std::optional<time::Nanos> moment(const std::string& s) {
  if (auto t = replay::parse_time_iso8601(s)) return t;
  return replay::parse_seconds(s);
}

CLI::Validator a_moment() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        return moment(s) ? "" : "wants a time such as 2026-12-01T10:00:00Z (with its offset) or seconds since 1970, got '" +
                                    s + "'";
      },
      "");
}

CLI::Validator a_window() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        time::Nanos d = 0;
        return policy::parse_duration(s, d) && d <= 3600 * time::kNanosPerSecond
                   ? ""
                   : "wants a duration such as 60s, 500ms or 10m (at most 1h), got '" + s + "'";
      },
      "");
}

CLI::Validator port_list() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        return cli_program::parse_port_list(s) ? "" : "wants ports 1 to 65535 separated by commas, got '" + s + "'";
      },
      "");
}

void describe_inputs(CLI::App& app, Options& o, Given& g) {
  const char* group = "What to replay";
  app.add_option("--policy", o.policy, "the policy to decide with (required)")->type_name("FILE")->group(group);
  app.add_option("--compare", o.compare,
                 "a second policy, decided on the same traffic with tables of its own: who one refuses and the "
                 "other does not")
      ->type_name("FILE")->group(group);
  app.add_option("inputs", o.inputs, "captures or access logs")->type_name("INPUT")->group(group);
  app.add_option("--format", g.format,
                 "auto (captures by their magic number, JSON lines by a first '{', else nginx), pcap (pcap or "
                 "pcapng), nginx or json (default auto)")
      ->type_name("FORMAT")->check(format_name())->group(group);
  app.add_option("--log-format", o.log_format,
                 "the nginx log_format the logs were written with, in nginx's own syntax (default: combined). "
                 "$remote_addr, a time ($msec, $time_iso8601 or $time_local) and the request ($request, or "
                 "$request_method and $request_uri) are needed; $http_NAME gives a request field, "
                 "$request_time the arrival, $upstream_http_NAME the usage field (DQ05)")
      ->type_name("FORMAT")->check(nginx_format())->group(group);
  app.add_option("--json-field", g.json_fields,
                 "JSON lines: the key KEY holds nginx's variable VARIABLE (keys named after variables need none), "
                 "e.g. ts=msec client=remote_addr; repeatable")
      ->type_name("KEY=VARIABLE")->check(key_value())->group(group);
  app.add_option("--since", g.since, "replay only records from this time on (ISO 8601 with an offset, or epoch seconds)")
      ->type_name("TIME")->check(a_moment())->group(group);
  app.add_option("--until", g.until, "replay only records before this time (the same forms)")
      ->type_name("TIME")->check(a_moment())->group(group);
  app.add_option("--reorder-window", g.reorder_window,
                 "logs that log $request_time (and JSON lines) are written as requests end, so their records, "
                 "timed at their start, come out of order by up to the longest request: each waits this long for "
                 "earlier ones (default 60s; memory grows with it). A record later than that is decided at its own "
                 "time, after the later ones, and counted in a warning. Other logs wait 2s (workers' writes)")
      ->type_name("DURATION")->check(a_window())->group(group);
  app.add_option("--service-ports", g.service_ports,
                 "captures: TCP ports whose flows are parsed, e.g. 80,8080 (default: the policy's)")
      ->type_name("LIST")->check(port_list())->group(group);
}

void describe_state(CLI::App& app, Options& o) {
  const char* group = "What the box knew";
  app.add_option("--state-dir", o.state_dir,
                 "a box's state directory, read and never written: its live runs, its credential map and the "
                 "secret its credential hashes are keyed with")
      ->type_name("DIR")->group(group);
  app.add_option("--runs", o.runs_file, "live runs, a TOKEN [BUDGET] per line (added to the state directory's)")
      ->type_name("FILE")->group(group);
  app.add_option("--credentials", o.credentials_file,
                 "the credential map, HASH USER per line as sluicectl credentials load takes it (needs --state-dir "
                 "for the secret)")
      ->type_name("FILE")->group(group);
  app.add_option("--label-dir", o.label_dir,
                 "without --state-dir: where the label secret credential digests are keyed with is kept "
                 "(label.secret, made on first use, 0600), so two reports name a credential alike "
                 "(default $XDG_STATE_HOME/sluice-replay, else ~/.local/state/sluice-replay)")
      ->type_name("DIR")->group(group);
}

// $XDG_STATE_HOME/sluice-replay, else ~/.local/state/sluice-replay; "" with neither.
std::string default_label_dir() {
  if (const char* x = std::getenv("XDG_STATE_HOME"); x != nullptr && x[0] == '/') return std::string(x) + "/sluice-replay";
  if (const char* h = std::getenv("HOME"); h != nullptr && h[0] == '/') return std::string(h) + "/.local/state/sluice-replay";
  return {};
}

void describe_output(CLI::App& app, Options& o) {
  const char* group = "Reports";
  app.add_flag("--json", o.json, "the report as one line of JSON on stdout, in place of the summary")->group(group);
  app.add_option("--html", o.html, "also write the report as one self-contained HTML page, with plots")
      ->type_name("FILE")->group(group);
  app.add_option("--top", o.top, "refused keys and differences listed, the busiest first (default 20)")
      ->type_name("N")->check(whole_number<size_t>(1, 10000))->group(group);
  app.add_flag("--strict", o.strict, "exit 6 if any record was skipped (a broken line or packet)")->group(group);
  app.add_flag("-q,--quiet", o.quiet, "no problems on stderr (they stay in the reports)")->group(group);
}

void describe_capacity(CLI::App& app, Options& o) {
  const char* group = "Capacity";
  app.add_option("--threads", o.threads, "threads for reading, parsing and deciding (default: one per core)")
      ->type_name("N")->check(whole_number<unsigned>(1, 1024))->group(group);
  app.add_option("--buckets", o.buckets, "bucket table slots per policy, as sluiced's --buckets (default 1048576)")
      ->type_name("N")->check(whole_number<size_t>(1024, size_t{1} << 30))->group(group);
}

void describe(CLI::App& app, Options& o, Given& g) {
  cli_program::describe_common(app, kDescription, kExitCodes, g.common);
  describe_inputs(app, o, g);
  describe_state(app, o);
  describe_output(app, o);
  describe_capacity(app, o);
}

void interpret(const CLI::App& app, const Given& g, Options& o) {
  if (app.count("--format") > 0) {
    o.format = g.format == "pcap"    ? InputFormat::kCapture
               : g.format == "nginx" ? InputFormat::kNginx
               : g.format == "json"  ? InputFormat::kJson
                                     : InputFormat::kAuto;
  }
  for (const std::string& kv : g.json_fields) {
    const size_t eq = kv.find('=');
    o.json_fields.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  if (app.count("--service-ports") > 0) o.service_ports = cli_program::parse_port_list(g.service_ports);
  if (app.count("--since") > 0) o.since = moment(g.since);
  if (app.count("--until") > 0) o.until = moment(g.until);
  if (app.count("--label-dir") == 0) o.label_dir = default_label_dir();
  if (app.count("--reorder-window") > 0) (void)policy::parse_duration(g.reorder_window, o.reorder_window);
}

std::string check_combination(const Options& o) {
  if (o.policy.empty()) return "--policy FILE is required";
  if (o.inputs.empty()) return "name at least one INPUT (a capture or an access log)";
  if (!o.credentials_file.empty() && o.state_dir.empty()) {
    return "--credentials needs --state-dir: its hashes are keyed with that box's secret";
  }
  if (o.since && o.until && *o.until <= *o.since) return "--until must be later than --since";
  return {};
}

}  // namespace

ParseResult parse_options(int argc, const char* const* argv) {
  ParseResult r;
  Options& o = r.options;
  CLI::App app;
  Given g;
  describe(app, o, g);
  if (cli_program::ended(cli_program::parse(app, argc, argv, g.common), o.mode, r.error)) return r;
  interpret(app, g, o);
  r.error = check_combination(o);
  return r;
}

std::string usage_text() { return cli_program::Table<Options, Given>(describe).app.help(); }

std::string manual_text() {
  return cli_program::manual_markdown(cli_program::Table<Options, Given>(describe).app, kExitCodes);
}

}  // namespace sluice::replay_cli

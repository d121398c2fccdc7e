// See sluiced_commands.h. One function per command; each checks its
// arguments first and answers a bad one with a coded error, so nothing is
// half done.
#include "sluiced_commands.h"

#include <rte_eal.h>
#include <rte_ethdev.h>

#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <cstdio>
#include <ctime>
#include <set>

#include "control/credential_file.h"
#include "control/key_label_text.h"
#include "control/log.h"
#include "control/protocol.h"
#include "limiter/charge.h"
#include "limiter/compiled_policy.h"
#include "net/ip_address.h"

namespace sluice::sluiced {

namespace {

using control::ErrorCode;
using control::Json;
using Reply = std::optional<std::string>;

Reply refuse(ErrorCode code, const std::string& message) { return control::error_response(code, message); }

uint64_t load(const std::atomic<uint64_t>& v) { return v.load(std::memory_order_relaxed); }

uint64_t flows_tracked(const Daemon& d) {
  uint64_t flows = 0;
  for (unsigned i = 0; i < d.workers; ++i) flows += load(d.counters[i].flows_active);
  return flows;
}

uint64_t flows_unbound(const Daemon& d) {
  uint64_t flows = 0;
  for (unsigned i = 0; i < d.workers; ++i) flows += load(d.counters[i].flows_unbound);
  return flows;
}

// A bucket table's occupancy; `region` is its index for the reclaimer.
Json table_of(const Daemon& d, const limiter::BucketTable& t, size_t region) {
  Json o = Json::object();
  o["capacity"] = t.capacity();
  o["live"] = t.live_as_of_reclaim();
  o["overflows"] = t.overflows();
  if (d.reclaimer != nullptr) o["reclaimed"] = d.reclaimer->freed(region);
  return o;
}

Json tables_of(const Daemon& d) {
  Json t = Json::object();
  t["buckets"] = table_of(d, d.limiter->buckets, 0);
  t["credential_slots"] = table_of(d, d.limiter->credential_records, 1);
  t["runs"] = {{"live", d.runs->size()}, {"capacity", d.runs->capacity()}};
  const control::CredentialRegistry::Summary c = d.credentials->summary();
  t["credentials"] = {{"live", c.credentials}, {"users", c.users}, {"capacity", c.capacity}};
  t["flows"] = {{"live", flows_tracked(d)}, {"unbound", flows_unbound(d)}};
  return t;
}

// Issue 17: runs and credentials replicated between the boxes.
Json replication_of(const control::ClusterReplica& r) {
  const control::ReplicaCounters& rc = r.counters();
  Json o = Json::object();
  o["published"] = load(rc.published);
  o["applied"] = load(rc.applied);
  o["refused"] = load(rc.refused);
  o["dropped"] = load(rc.dropped);
  o["queued"] = load(rc.queued);
  o["catch_ups"] = load(rc.catch_ups);
  o["credentials"] =
      load(rc.credentials_off) != 0 ? "off: this box's credential secret is not the cluster's" : "replicated";
  return o;
}

// Issue 17: the cluster sync (the policy has a cluster section).
Json cluster_of(const control::ClusterService& cluster) {
  const control::ClusterCounters& c = cluster.counters();
  const policy::ClusterSpec& spec = cluster.spec();
  Json o = Json::object();
  o["state"] = load(c.in_fallback) != 0 ? "fallback" : "synced";
  o["fallback"] = spec.fallback == policy::ClusterSpec::Fallback::kLocalShare ? "local-share" : "local-full";
  o["last_error"] = cluster.last_error();
  o["sync_interval_ms"] = spec.sync_interval / 1'000'000;
  o["syncs"] = load(c.syncs);
  o["sync_failures"] = load(c.sync_failures);
  o["fallbacks"] = load(c.fallbacks);
  o["fallback_keys"] = load(c.fallback_keys);
  o["keys_sent"] = load(c.keys_sent);
  o["keys_published"] = load(c.keys_published);
  o["keys_watched"] = load(c.keys_watched);
  o["last_sync_us"] = load(c.last_sync_us);
  o["max_sync_us"] = load(c.max_sync_us);
  o["last_sync_keys"] = load(c.last_sync_keys);
  o["spend_lost_records"] = cluster.lost_records();
  if (const control::ClusterReplica* r = cluster.replica()) o["replication"] = replication_of(*r);
  return o;
}

Json port_stats_of(const Daemon& d, int side) {
  Json o = {{"side", side == 0 ? "client" : "origin"}, {"name", d.ports[side].name}};
  rte_eth_stats s{};
  if (rte_eth_stats_get(d.ports[side].id, &s) != 0) return o;
  o["rx_packets"] = s.ipackets;
  o["tx_packets"] = s.opackets;
  o["rx_bytes"] = s.ibytes;
  o["tx_bytes"] = s.obytes;
  o["rx_missed"] = s.imissed;
  o["rx_errors"] = s.ierrors;
  o["tx_errors"] = s.oerrors;
  o["rx_no_mbuf"] = s.rx_nombuf;
  return o;
}

Json status_policy_of(const Daemon& d, const dataplane::PolicySnapshot& cur) {
  Json o = Json::object();
  o["name"] = cur.policy.source.name;
  o["file"] = d.publisher->file();
  o["generation"] = cur.generation;
  o["digest"] = digest_hex(cur.policy.digest);
  o["service_ports"] = port_list(cur.service_ports);
  o["snapshots_held"] = d.publisher->held();
  return o;
}

Reply cmd_status(const Daemon& d, const Json&, Json& w) {
  const std::shared_ptr<const dataplane::PolicySnapshot> cur = d.publisher->current();
  const auto up = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - d.started);
  w["version"] = SLUICE_VERSION;
  w["uptime_s"] = static_cast<uint64_t>(up.count());
  w["policy"] = status_policy_of(d, *cur);
  w["workers"] = d.workers;
  w["flows"] = flows_tracked(d);
  w["runs"] = d.runs->size();
  w["credentials"] = d.credentials->summary().credentials;
  w["state_dir"] = d.state_dir;
  if (d.bucket_snapshots != nullptr) {
    // The last bucket snapshot written (0: none yet): what a crash now would
    // start from.
    w["bucket_snapshot"] = {{"taken_at_ns", d.bucket_snapshots->written_at()},
                            {"slots", d.bucket_snapshots->slots_written()}};
  }
  if (d.cluster != nullptr) {
    // Issue 17: where the box meets the others, and whether it does now.
    const bool fallback = load(d.cluster->counters().in_fallback) != 0;
    w["cluster"] = {{"state", fallback ? "fallback" : "synced"}, {"box", d.cluster->box()},
                    {"redis", d.cluster->spec().redis}};
  }
  w["telemetry_socket"] = std::string(rte_eal_get_runtime_dir()) + "/dpdk_telemetry.v2";
  w["ports"] = Json::array();
  for (int i = 0; i < 2; ++i) {
    w["ports"].push_back({{"side", i == 0 ? "client" : "origin"}, {"name", d.ports[i].name}, {"mac", d.ports[i].mac},
                          {"link_up", d.ports[i].link_up}});
  }
  return std::nullopt;
}

}  // namespace

// See sluiced_commands.h.
std::string label_text(const Daemon& d, const limiter::KeyLabel& l) {
  return control::key_label_text(l, [&d](uint64_t id) -> std::string {
    for (const auto& [user, count] : d.credentials->users()) {
      if (control::CredentialRegistry::user_id(user) == id) return user;
    }
    return "";
  });
}

namespace {

// Per rule of the current policy, added up over the workers.
Json rules_of(const Daemon& d) {
  const std::shared_ptr<const dataplane::PolicySnapshot> snapshot = d.publisher->current();
  Json rules = Json::array();
  for (const limiter::CompiledRule& r : snapshot->policy.rules) {
    const RuleTotals t = rule_totals(d, r);
    rules.push_back({{"name", r.name}, {"admitted", t.admitted}, {"refused", t.refused}, {"answered", t.answered}});
  }
  return rules;
}

// The busiest keys of all workers (their space-saving tables merged): an
// estimate that never undercounts, refusals counted each, admissions one in 16.
Json busiest_of(const Daemon& d, size_t top) {
  struct Merged {
    uint16_t rule;
    limiter::KeyLabel label;
    uint64_t count;
  };
  std::vector<Merged> all;
  for (unsigned i = 0; i < d.workers; ++i) {
    for (const dataplane::BusyKeys::Entry& e : d.counters[i].busy.snapshot()) {
      auto it = std::find_if(all.begin(), all.end(), [&](const Merged& m) {
        return m.rule == e.rule && m.label.key_hash == e.label.key_hash;
      });
      if (it == all.end()) all.push_back({e.rule, e.label, e.count});
      else it->count += e.count;
    }
  }
  std::sort(all.begin(), all.end(), [](const Merged& a, const Merged& b) { return a.count > b.count; });
  const std::shared_ptr<const dataplane::PolicySnapshot> snapshot = d.publisher->current();
  const limiter::CompiledPolicy& p = snapshot->policy;
  Json busiest = Json::array();
  for (size_t i = 0; i < all.size() && i < top; ++i) {
    const auto named = std::find_if(p.rules.begin(), p.rules.end(),
                                    [&](const limiter::CompiledRule& r) { return r.counter_slot == all[i].rule; });
    const std::string rule = named != p.rules.end() ? named->name : "#" + std::to_string(all[i].rule);
    busiest.push_back({{"rule", rule}, {"key", label_text(d, all[i].label)}, {"count", all[i].count}});
  }
  return busiest;
}

// Every worker counter added up over the workers, in the workers' order.
Json counter_totals_of(const Daemon& d) {
  Json totals = Json::object();
#define SLUICE_SUM_COUNTER(name, help)                                        \
  {                                                                           \
    uint64_t total = 0;                                                       \
    for (unsigned i = 0; i < d.workers; ++i) total += d.counters[i].name.get(); \
    totals[#name] = total;                                                    \
  }
  SLUICE_WORKER_COUNTERS(SLUICE_SUM_COUNTER)
#undef SLUICE_SUM_COUNTER
  return totals;
}

Json counter_help() {
  Json help = Json::object();
#define SLUICE_HELP_COUNTER(name, text) help[#name] = text;
  SLUICE_WORKER_COUNTERS(SLUICE_HELP_COUNTER)
#undef SLUICE_HELP_COUNTER
  return help;
}

Json worker_counters_of(const dataplane::WorkerCounters& c) {
  Json o = Json::object();
  o["flows_active"] = load(c.flows_active);
  o["flows_unbound"] = load(c.flows_unbound);
#define SLUICE_WORKER_COUNTER(name, help) o[#name] = c.name.get();
  SLUICE_WORKER_COUNTERS(SLUICE_WORKER_COUNTER)
#undef SLUICE_WORKER_COUNTER
  return o;
}

Reply cmd_stats(const Daemon& d, const Json&, Json& w) {
  w["counters"] = counter_totals_of(d);
  w["help"] = counter_help();
  w["workers"] = Json::array();
  for (unsigned i = 0; i < d.workers; ++i) w["workers"].push_back(worker_counters_of(d.counters[i]));
  w["rules"] = rules_of(d);
  w["busiest"] = busiest_of(d, 10);
  w["tables"] = tables_of(d);
  if (d.cluster != nullptr) w["cluster"] = cluster_of(*d.cluster);
  w["ports"] = {port_stats_of(d, 0), port_stats_of(d, 1)};
  return std::nullopt;
}

Reply cmd_policy_show(const Daemon& d, const Json&, Json& w) {
  const std::shared_ptr<const dataplane::PolicySnapshot> cur_held = d.publisher->current();
  const dataplane::PolicySnapshot& cur = *cur_held;
  w["name"] = cur.policy.source.name;
  w["file"] = d.publisher->file();
  w["digest"] = digest_hex(cur.policy.digest);
  w["generation"] = cur.generation;
  w["service_ports"] = port_list(cur.service_ports);
  w["buckets"] = Json::array();
  for (const auto& b : cur.policy.buckets) w["buckets"].push_back(b.name);
  w["rules"] = Json::array();
  for (const auto& r : cur.policy.rules) w["rules"].push_back(r.name);
  return std::nullopt;
}

// The file a client passed for a command that reads one (passed_file.h):
// its name for messages (bounded: it is the client's word), or the refusal.
// A request that names a file without passing it is refused: sluiced opens
// no path a client names.
// A passed policy's bytes: a real one is a few KiB, and the control thread
// parses it while every other client waits, so a larger one is refused
// unparsed (a credentials file may be larger: it is parsed line by line).
constexpr size_t kMaxPassedPolicyBytes = size_t{1} << 20;

// The file a client passed for a command that reads one (passed_file.h):
// its name for messages (the client's word: bounded, and printable, since
// it reaches sluiced's log), or the refusal. A request that names a file
// without passing it is refused: sluiced opens no path a client names.
Reply passed_file_name(const Json& request, const control::PassedFile& file, std::string_view cmd,
                       std::string& name, size_t max_bytes = control::kMaxPassedFileBytes) {
  std::string error;
  const std::optional<std::string> named = control::string_arg(request, control::arg::kFile, error);
  if (!error.empty()) return refuse(ErrorCode::kBadRequest, "\"file\" is the passed file's name");
  if (!file.passed) {
    return refuse(ErrorCode::kBadRequest, std::string(cmd) +
                                              " needs the file passed with the request (\"fd\": true and the "
                                              "descriptor); sluiced opens no file a client names");
  }
  name = named && !named->empty() ? named->substr(0, 256) : std::string("(passed file)");
  for (char& c : name) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  if (!file.error.empty()) return refuse(ErrorCode::kInvalidArgument, name + ": " + file.error);
  if (file.bytes.size() > max_bytes) {
    return refuse(ErrorCode::kInvalidArgument,
                  name + ": larger than " + std::to_string(max_bytes >> 20) + " MiB; not read");
  }
  return std::nullopt;
}

Reply cmd_policy_check(const Daemon& d, const Json& request, const control::PassedFile& file, Json& w) {
  std::string name;
  if (Reply r = passed_file_name(request, file, control::command::kPolicyCheck, name, kMaxPassedPolicyBytes)) return r;
  // The running daemon's own loader and compiler: what passes here is what
  // a reload accepts.
  const LoadedPolicy checked = d.check_policy(file.bytes, name);
  if (!checked.snapshot) return control::invalid_policy_response(name + " is not a usable policy", checked.errors);
  w["file"] = name;
  w["name"] = checked.snapshot->policy.source.name;
  w["digest"] = digest_hex(checked.snapshot->policy.digest);
  w["rules"] = checked.snapshot->policy.rules.size();
  w["buckets"] = checked.snapshot->policy.buckets.size();
  return std::nullopt;
}

Reply cmd_policy_reload(const Daemon& d, const Json& request, const control::PassedFile& file, Json& w) {
  std::string name;
  std::vector<std::string> refused;
  if (file.passed || control::member(request, control::arg::kFile) != nullptr) {
    if (Reply r = passed_file_name(request, file, "policy.reload with a file", name, kMaxPassedPolicyBytes)) {
      return r;
    }
    refused = d.reload_policy(file.bytes, name);
  } else {
    refused = d.reload_config(name);
  }
  if (!refused.empty()) {
    return control::invalid_policy_response(name + " was not loaded; the running policy is unchanged", refused);
  }
  const std::shared_ptr<const dataplane::PolicySnapshot> now_active_held = d.publisher->current();
  const dataplane::PolicySnapshot& now_active = *now_active_held;
  const std::string digest = digest_hex(now_active.policy.digest);
  const std::string generation = std::to_string(now_active.generation);
  control::log(control::LogLevel::kNotice, control::LogEvent::kPolicy,
               "policy '" + now_active.policy.source.name + "' from " + name + " (digest " + digest + ", generation " +
                   generation + ") published",
               {{"SLUICE_POLICY", now_active.policy.source.name}, {"SLUICE_GENERATION", generation}});
  w["name"] = now_active.policy.source.name;
  w["file"] = name;
  w["digest"] = digest;
  w["generation"] = now_active.generation;
  return std::nullopt;
}

// ------------------------------------------------------------------ runs

Reply run_refusal(const control::RunRegistry::Result& r) {
  using O = control::RunRegistry::Outcome;
  switch (r.outcome) {
    case O::kInvalidToken: return refuse(ErrorCode::kInvalidArgument, r.message);
    case O::kNotLive: return refuse(ErrorCode::kNotFound, r.message);
    case O::kFull: return refuse(ErrorCode::kFull, r.message);
    case O::kJournalFailed: return refuse(ErrorCode::kStateUnwritable, r.message);
    default: return std::nullopt;
  }
}

Json run_of(const control::LiveRun& run) {
  return {{"token", run.token}, {"budget", run.budget}, {"started_unix", static_cast<int64_t>(run.started_unix)}};
}

Reply cmd_runs(const Daemon& d, const Json&, Json& w) {
  w["capacity"] = d.runs->capacity();
  w["runs"] = Json::array();
  for (const control::LiveRun& run : d.runs->list()) w["runs"].push_back(run_of(run));
  return std::nullopt;
}

Reply cmd_run_start(const Daemon& d, const Json& request, Json& w) {
  std::string error;
  const std::optional<std::string> token = control::string_arg(request, control::arg::kToken, error);
  const std::optional<uint64_t> budget = control::uint_arg(request, control::arg::kBudget, 1'000'000'000, error);
  if (!error.empty()) return refuse(ErrorCode::kBadRequest, error);
  if (!token) return refuse(ErrorCode::kBadRequest, "run.start needs \"token\"");
  const control::RunRegistry::Result r = d.runs->start(*token, static_cast<uint32_t>(budget.value_or(0)),
                                                       static_cast<int64_t>(std::time(nullptr)));
  if (!r.ok()) return run_refusal(r);
  using O = control::RunRegistry::Outcome;
  if (d.replicate && r.outcome != O::kAlreadyLive) {
    d.replicate({control::ReplicaChange::Table::kRuns, control::ReplicaChange::Op::kSet, *token,
                 std::to_string(budget.value_or(0)), {}});
  }
  w["token"] = *token;
  w["budget"] = budget.value_or(0);
  w["outcome"] = r.outcome == O::kStarted ? "started" : r.outcome == O::kBudgetChanged ? "budget_changed" : "already_live";
  w["message"] = r.message;
  return std::nullopt;
}

Reply cmd_run_end(const Daemon& d, const Json& request, Json& w) {
  std::string error;
  const std::optional<std::string> token = control::string_arg(request, control::arg::kToken, error);
  if (!error.empty()) return refuse(ErrorCode::kBadRequest, error);
  if (!token) return refuse(ErrorCode::kBadRequest, "run.end needs \"token\"");
  const control::RunRegistry::Result r = d.runs->end(*token);
  if (!r.ok()) return run_refusal(r);
  if (d.replicate) d.replicate({control::ReplicaChange::Table::kRuns, control::ReplicaChange::Op::kDelete, *token, {}, {}});
  w["token"] = *token;
  w["message"] = r.message;
  return std::nullopt;
}

// ----------------------------------------------------------- credentials

Reply credential_refusal(const control::CredentialRegistry::Result& r) {
  using F = control::CredentialRegistry::Failure;
  switch (r.failure) {
    case F::kInvalidFile: return control::invalid_file_response(ErrorCode::kInvalidCredentials, r.message, r.errors);
    case F::kUnsaved: return refuse(ErrorCode::kStateUnwritable, r.message);
    case F::kNotFound: return refuse(ErrorCode::kNotFound, r.message);
    case F::kFull:
    case F::kNone: break;
  }
  return refuse(ErrorCode::kFull, r.message);
}

void write_credential_result(Json& w, const control::CredentialRegistry::Result& r) {
  w["message"] = r.message;
  w["added"] = r.added;
  w["removed"] = r.removed;
  w["changed"] = r.changed;
}

Reply cmd_credentials_load(const Daemon& d, const Json& request, const control::PassedFile& file, Json& w) {
  std::string name;
  if (Reply r = passed_file_name(request, file, control::command::kCredentialsLoad, name)) return r;
  const control::CredentialRegistry::Result r = d.credentials->load_text(file.bytes, name);
  if (!r.ok) return credential_refusal(r);
  if (d.replicate) {
    control::ReplicaChange c{control::ReplicaChange::Table::kCredentials, control::ReplicaChange::Op::kReplace, {}, {}, {}};
    for (const control::CredentialEntry& e : d.credentials->entries()) c.all.emplace_back(control::digest_hex(e.hash), e.user);
    d.replicate(std::move(c));
  }
  write_credential_result(w, r);
  return std::nullopt;
}

Reply cmd_credentials_show(const Daemon& d, const Json&, Json& w) {
  const control::CredentialRegistry::Summary s = d.credentials->summary();
  w["credentials"] = s.credentials;
  w["capacity"] = s.capacity;
  w["users"] = Json::object();
  for (const auto& [user, count] : d.credentials->users()) w["users"][user] = count;
  return std::nullopt;
}

std::optional<limiter::Digest> hash_arg(const Json& request, std::string& error) {
  const std::optional<std::string> text = control::string_arg(request, control::arg::kHash, error);
  if (!error.empty()) return std::nullopt;
  if (!text) {
    error = "needs \"hash\" (32 hex digits from sluicectl credential hash)";
    return std::nullopt;
  }
  const std::optional<limiter::Digest> h = control::parse_digest_hex(*text);
  if (!h) error = "'" + *text + "' is not a credential hash (32 hex digits from sluicectl credential hash)";
  return h;
}

Reply cmd_credential_add(const Daemon& d, const Json& request, Json& w) {
  std::string error;
  const std::optional<limiter::Digest> hash = hash_arg(request, error);
  if (!hash) return refuse(ErrorCode::kInvalidArgument, "credential.add " + error);
  const std::optional<std::string> user = control::string_arg(request, control::arg::kUser, error);
  if (!user || !error.empty()) return refuse(ErrorCode::kBadRequest, "credential.add needs \"user\": a user name");
  if (!control::valid_user_name(*user)) {
    return refuse(ErrorCode::kInvalidArgument,
                  "'" + *user + "' is not a user name (1 to 64 characters of A-Z a-z 0-9 . _ @ + : -)");
  }
  const control::CredentialRegistry::Result r = d.credentials->add(*hash, *user);
  if (!r.ok) return credential_refusal(r);
  if (d.replicate) {
    d.replicate({control::ReplicaChange::Table::kCredentials, control::ReplicaChange::Op::kSet,
                 control::digest_hex(*hash), *user, {}});
  }
  write_credential_result(w, r);
  return std::nullopt;
}

Reply cmd_credential_remove(const Daemon& d, const Json& request, Json& w) {
  std::string error;
  const std::optional<limiter::Digest> hash = hash_arg(request, error);
  if (!hash) return refuse(ErrorCode::kInvalidArgument, "credential.remove " + error);
  const control::CredentialRegistry::Result r = d.credentials->remove(*hash);
  if (!r.ok) return credential_refusal(r);
  if (d.replicate) {
    d.replicate({control::ReplicaChange::Table::kCredentials, control::ReplicaChange::Op::kDelete,
                 control::digest_hex(*hash), {}, {}});
  }
  write_credential_result(w, r);
  return std::nullopt;
}

Reply cmd_credential_hash(const Daemon& d, const Json& request, Json& w) {
  std::string error;
  const std::optional<std::string> credential = control::string_arg(request, control::arg::kCredential, error);
  if (!credential || !error.empty()) return refuse(ErrorCode::kBadRequest, "credential.hash needs \"credential\"");
  const std::optional<limiter::Digest> h = d.credentials->hash(*credential);
  if (!h) return refuse(ErrorCode::kInvalidArgument, "an empty credential has no hash");
  w["hash"] = control::digest_hex(*h);
  return std::nullopt;
}

// ------------------------------------------------------- buckets, usage

// The rules of the current policy that charge `bucket`, and the kind of key
// they agree on (nullopt if they key it differently).
std::optional<policy::KeySpec::Kind> key_kind_of(const limiter::CompiledPolicy& p, const limiter::CompiledBucket& b) {
  std::optional<policy::KeySpec::Kind> kind;
  for (const limiter::CompiledRule& r : p.rules) {
    if (&p.buckets[r.bucket] != &b) continue;
    if (kind && *kind != r.key_kind) return std::nullopt;
    kind = r.key_kind;
  }
  return kind;
}

bool text_keyed(policy::KeySpec::Kind k) {
  return k == policy::KeySpec::Kind::kPathParam || k == policy::KeySpec::Kind::kHeader ||
         k == policy::KeySpec::Kind::kHost;
}

// The bucket key `text` names in `bucket` (as the rules that charge it key
// their requests); "" or the reason it names none.
std::string key_of(const Daemon& d, const limiter::CompiledPolicy& p, const limiter::CompiledBucket& b,
                   const std::string& text, limiter::BucketKey& out) {
  using K = policy::KeySpec::Kind;
  const std::optional<K> kind = key_kind_of(p, b);
  if (!kind) return "bucket " + b.name + " is charged by rules with different keys; which one is ambiguous";
  const limiter::KeyHasher& h = d.limiter->bucket_hasher;
  const auto key = [&](std::span<const uint8_t> material) { return limiter::material_key(*d.limiter, b, material); };
  auto bytes = [](const void* data, size_t n) { return std::span<const uint8_t>(static_cast<const uint8_t*>(data), n); };
  switch (*kind) {
    case K::kClientIp: {
      std::optional<net::IpAddress> ip = net::parse_ip(text);
      if (!ip) return "'" + text + "' is not an IP address (bucket " + b.name + " is keyed by client address)";
      if (!ip->is_v4()) ip = ip->prefix(p.client_ip.spec.ipv6_prefix);
      out = key(bytes(ip->bytes.data(), ip->bytes.size()));
      return {};
    }
    case K::kCredential: {
      const std::optional<limiter::Digest> digest = control::parse_digest_hex(text);
      if (!digest) return "bucket " + b.name + " is keyed by credential: give its hash (sluicectl credential hash)";
      // A cluster bucket's keys are made from the credential itself (the
      // same on every box), which its hash does not give back.
      if (b.cluster_salt != 0) return "bucket " + b.name + " is shared by the cluster and keyed by credential: its keys cannot be found from a hash";
      out = h.key(b.index, *digest);
      return {};
    }
    case K::kUser: {
      const uint64_t id = control::CredentialRegistry::user_id(text);
      out = key(bytes(&id, sizeof id));
      return {};
    }
    case K::kHost: {
      std::string lower = text;
      for (char& c : lower) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c | 0x20) : c;
      out = key(bytes(lower.data(), lower.size()));
      return {};
    }
    case K::kPathParam:
    case K::kHeader:
      out = key(bytes(text.data(), text.size()));
      return {};
    case K::kDestination:
      return "bucket " + b.name + " is keyed by destination; not shown by name";
  }
  return "unknown key kind";
}

// A calendar bucket's minute for one key, as bucket.show answers it.
void write_window_state(const limiter::CompiledBucket& b, const std::string& key, const limiter::BucketSlot* slot,
                        time::Nanos now, Json& w) {
  limiter::WindowLimit limit = b.window;
  if (const auto it = b.quotas.find(key); it != b.quotas.end()) limit = it->second;
  const uint64_t minute = limiter::minute_of(now);
  const uint64_t words[2] = {slot ? slot->load(0) : 0, slot ? slot->load(1) : 0};
  const bool frozen = words[0] == limiter::BucketTable::kFrozen;
  const uint32_t requests = frozen ? 0 : limiter::count_in(words[0], minute);
  const uint32_t tokens = frozen ? 0 : limiter::count_in(words[1], minute);
  const bool over = (limit.requests_per_minute != 0 && requests >= limit.requests_per_minute) ||
                    (limit.tokens_per_minute != 0 && tokens >= limit.tokens_per_minute);
  w["window"] = "minute";
  w["requests"] = requests;
  w["requests_limit"] = limit.requests_per_minute;
  w["tokens"] = tokens;
  w["tokens_limit"] = limit.tokens_per_minute;
  w["remaining"] = limit.requests_per_minute > requests && !over ? limit.requests_per_minute - requests : 0u;
  w["reset_s"] = limiter::seconds_to_next_minute(now);
  w["refusing"] = over;
}

// A GCRA bucket's state for one key, as bucket.show answers it. A live run
// with a budget of its own is paced at it, not at the bucket's.
void write_gcra_state(const Daemon& d, const limiter::CompiledPolicy& p, const limiter::CompiledBucket& b,
                      const std::string& key, const limiter::BucketKey& k, time::Nanos now, Json& w) {
  limiter::GcraLimit limit = b.gcra;
  uint32_t per_minute = b.header_limit;
  bool run_keyed = false;
  for (const limiter::CompiledRule& r : p.rules) {
    for (int param : r.live_run_param) run_keyed = run_keyed || (&p.buckets[r.bucket] == &b && param >= 0);
  }
  if (const std::optional<uint32_t> own = run_keyed ? d.runs->budget(key) : std::nullopt; own && *own != 0) {
    if (limiter::GcraLimit::make(*own, time::kNanosPerMinute, *own, limit)) per_minute = *own;
  }
  const limiter::GcraDecision g = limiter::peek_gcra(d.limiter->buckets, k, now, limit);
  w["limit"] = per_minute;
  w["burst"] = limit.burst;
  w["remaining"] = g.admit ? g.remaining + 1 : 0u;
  w["reset_s"] = g.reset_s;
  w["refusing"] = !g.admit;
  if (!g.admit) w["retry_after_s"] = g.retry_after_s;
}

Reply cmd_bucket_show(const Daemon& d, const Json& request, Json& w) {
  std::string error;
  const std::optional<std::string> name = control::string_arg(request, control::arg::kBucket, error);
  const std::optional<std::string> key = control::string_arg(request, control::arg::kKey, error);
  if (!name || !key || !error.empty()) return refuse(ErrorCode::kBadRequest, "bucket.show needs \"bucket\" and \"key\"");
  const std::shared_ptr<const dataplane::PolicySnapshot> snapshot = d.publisher->current();
  const limiter::CompiledPolicy& p = snapshot->policy;
  const limiter::CompiledBucket* b = p.bucket_named(*name);
  if (b == nullptr) {
    std::string names;
    for (const auto& x : p.buckets) names += (names.empty() ? "" : ", ") + x.name;
    return refuse(ErrorCode::kNotFound, "no bucket named '" + *name + "' in policy " + p.source.name + " (" + names + ")");
  }
  limiter::BucketKey k{};
  if (const std::string why = key_of(d, p, *b, *key, k); !why.empty()) return refuse(ErrorCode::kInvalidArgument, why);
  const time::Nanos now = d.clock->now();
  const limiter::BucketSlot* slot = d.limiter->buckets.find(k);
  w["bucket"] = b->name;
  w["key"] = *key;
  w["tracked"] = slot != nullptr;
  if (b->calendar) {
    write_window_state(*b, *key, slot, now, w);
  } else {
    write_gcra_state(d, p, *b, *key, k, now, w);
  }
  return std::nullopt;
}

// DQ05: the tokens a finished request used, charged to the deployment's
// current minute; once the minute's total reaches the quota, its next
// request is refused (DQ07).
Reply cmd_usage_report(const Daemon& d, const Json& request, Json& w) {
  std::string error;
  const std::optional<std::string> deployment = control::string_arg(request, control::arg::kDeployment, error);
  const std::optional<uint64_t> tokens = control::uint_arg(request, control::arg::kTokens, uint64_t{1} << 32, error);
  const std::optional<std::string> bucket = control::string_arg(request, control::arg::kBucket, error);
  if (!error.empty()) return refuse(ErrorCode::kBadRequest, error);
  if (!deployment || deployment->empty() || !tokens) {
    return refuse(ErrorCode::kBadRequest, "usage.report needs \"deployment\" and \"tokens\"");
  }
  const std::shared_ptr<const dataplane::PolicySnapshot> snapshot = d.publisher->current();
  const limiter::CompiledPolicy& p = snapshot->policy;
  const limiter::CompiledBucket* b = nullptr;
  if (bucket) {
    b = p.bucket_named(*bucket);
    if (b == nullptr) return refuse(ErrorCode::kNotFound, "no bucket named '" + *bucket + "' in policy " + p.source.name);
    if (!b->calendar) return refuse(ErrorCode::kInvalidArgument, "bucket " + b->name + " counts no tokens (not a minute window)");
  } else {
    std::string candidates;
    for (const limiter::CompiledBucket& x : p.buckets) {
      if (!x.calendar) continue;
      candidates += (candidates.empty() ? "" : ", ") + x.name;
      if (b != nullptr) {
        return refuse(ErrorCode::kInvalidArgument, "several buckets count tokens (" + candidates + "...); name one with \"bucket\"");
      }
      b = &x;
    }
    if (b == nullptr) return refuse(ErrorCode::kNotFound, "policy " + p.source.name + " has no bucket that counts tokens");
  }
  const std::optional<policy::KeySpec::Kind> kind = key_kind_of(p, *b);
  if (!kind || !text_keyed(*kind)) {
    return refuse(ErrorCode::kInvalidArgument, "bucket " + b->name + " is not keyed by a deployment name");
  }
  limiter::BucketKey k{};
  if (const std::string why = key_of(d, p, *b, *deployment, k); !why.empty()) {
    return refuse(ErrorCode::kInvalidArgument, why);
  }
  const time::Nanos now = d.clock->now();
  limiter::report_usage(*d.limiter, k, *tokens, now);
  // Issue 17: a shared window's tokens are the other boxes' business too.
  if (b->cluster_salt != 0 && d.cluster != nullptr) {
    d.cluster->record_tokens(k, static_cast<uint32_t>(limiter::minute_of(now)), *tokens);
  }
  limiter::WindowLimit limit = b->window;
  if (const auto it = b->quotas.find(*deployment); it != b->quotas.end()) limit = it->second;
  const limiter::BucketSlot* slot = d.limiter->buckets.find(k);
  const uint64_t word = slot ? slot->load(1) : 0;
  const uint32_t total = word == limiter::BucketTable::kFrozen ? 0 : limiter::count_in(word, limiter::minute_of(now));
  w["bucket"] = b->name;
  w["deployment"] = *deployment;
  w["tokens"] = *tokens;
  w["minute_tokens"] = total;
  w["tokens_limit"] = limit.tokens_per_minute;
  w["over"] = limit.tokens_per_minute != 0 && total >= limit.tokens_per_minute;
  w["reset_s"] = limiter::seconds_to_next_minute(now);
  return std::nullopt;
}

}  // namespace

RuleTotals rule_totals(const Daemon& d, const limiter::CompiledRule& rule) {
  const size_t slot = rule.counter_slot;
  RuleTotals t;
  for (unsigned i = 0; i < d.workers; ++i) {
    t.admitted += d.counters[i].rules[slot].admitted.get();
    t.refused += d.counters[i].rules[slot].refused.get();
    t.answered += d.counters[i].rules[slot].answered.get();
  }
  return t;
}

void add_commands(control::CommandTable& table, const Daemon& daemon) {
  const Daemon* d = &daemon;
  auto add = [&](const char* name, Reply (*fn)(const Daemon&, const Json&, Json&)) {
    table.add(name, [d, fn](const Json& request, Json& response) { return fn(*d, request, response); });
  };
  auto add_with_file = [&](const char* name, Reply (*fn)(const Daemon&, const Json&, const control::PassedFile&, Json&)) {
    table.add_with_file(name, [d, fn](const Json& request, const control::PassedFile& file, Json& response) {
      return fn(*d, request, file, response);
    });
  };
  add(control::command::kStatus, cmd_status);
  add(control::command::kStats, cmd_stats);
  add(control::command::kPolicyShow, cmd_policy_show);
  add_with_file(control::command::kPolicyCheck, cmd_policy_check);
  add_with_file(control::command::kPolicyReload, cmd_policy_reload);
  add(control::command::kRuns, cmd_runs);
  add(control::command::kRunStart, cmd_run_start);
  add(control::command::kRunEnd, cmd_run_end);
  add_with_file(control::command::kCredentialsLoad, cmd_credentials_load);
  add(control::command::kCredentialsShow, cmd_credentials_show);
  add(control::command::kCredentialAdd, cmd_credential_add);
  add(control::command::kCredentialRemove, cmd_credential_remove);
  add(control::command::kCredentialHash, cmd_credential_hash);
  add(control::command::kBucketShow, cmd_bucket_show);
  add(control::command::kUsageReport, cmd_usage_report);
}

}  // namespace sluice::sluiced

// See sluiced_status_commands.h. One function per command, and one per
// part of its answer.
#include "sluiced_status_commands.h"

#include <rte_eal.h>
#include <rte_ethdev.h>

#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <cstdio>

#include "control/credential_file.h"
#include "control/key_label_text.h"
#include "control/protocol.h"
#include "limiter/compiled_policy.h"
#include "sluiced_policy.h"

namespace sluice::sluiced {

namespace {

using control::Json;
using control::Reply;

uint64_t load(const std::atomic<uint64_t>& v) { return v.load(std::memory_order_relaxed); }

uint64_t flows_tracked(const DaemonView& d) {
  uint64_t flows = 0;
  for (unsigned i = 0; i < d.workers; ++i) flows += load(d.counters[i].flows_active);
  return flows;
}

uint64_t flows_unbound(const DaemonView& d) {
  uint64_t flows = 0;
  for (unsigned i = 0; i < d.workers; ++i) flows += load(d.counters[i].flows_unbound);
  return flows;
}

// A bucket table's occupancy; `region` is its index for the reclaimer.
Json table_of(const DaemonView& d, const limiter::BucketTable& t, size_t region) {
  Json o = Json::object();
  o["capacity"] = t.capacity();
  o["live"] = t.live_as_of_reclaim();
  o["overflows"] = t.overflows();
  if (d.reclaimer != nullptr) o["reclaimed"] = d.reclaimer->freed(region);
  return o;
}

Json tables_of(const DaemonView& d) {
  Json t = Json::object();
  t["buckets"] = table_of(d, d.limiter->buckets, 0);
  t["credential_slots"] = table_of(d, d.limiter->credential_records, 1);
  t["runs"] = {{"live", d.runs->size()}, {"capacity", d.runs->capacity()}};
  const control::CredentialRegistry::Summary c = d.credentials->summary();
  t["credentials"] = {{"live", c.credentials}, {"users", c.users}, {"capacity", c.capacity}};
  t["flows"] = {{"live", flows_tracked(d)}, {"unbound", flows_unbound(d)}};
  return t;
}

// Runs and credentials replicated between the boxes.
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

// The cluster sync (the policy has a cluster section).
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
  o["repaid_keys"] = load(c.repaid_keys);
  o["keys_sent"] = load(c.keys_sent);
  o["keys_published"] = load(c.keys_published);
  o["keys_learned"] = load(c.keys_learned);
  o["keys_reseeded"] = load(c.keys_reseeded);
  o["round_trips"] = load(c.round_trips);
  o["keys_watched"] = load(c.keys_watched);
  o["last_sync_us"] = load(c.last_sync_us);
  o["max_sync_us"] = load(c.max_sync_us);
  o["last_sync_keys"] = load(c.last_sync_keys);
  o["spend_lost_records"] = cluster.lost_records();
  if (const control::ClusterReplica* r = cluster.replica()) o["replication"] = replication_of(*r);
  return o;
}

Json port_stats_of(const DaemonView& d, int side) {
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

Json status_policy_of(const DaemonView& d, const dataplane::PolicySnapshot& cur) {
  Json o = Json::object();
  o["name"] = cur.policy.source.name;
  o["file"] = d.publisher->file();
  o["generation"] = cur.generation;
  o["digest"] = digest_hex(cur.policy.digest);
  o["service_ports"] = port_list(cur.service_ports);
  o["snapshots_held"] = d.publisher->held();
  return o;
}

Reply cmd_status(const DaemonView& d, const Json&, Json& w) {
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
    // Where the box meets the others, and whether it does now.
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

// See sluiced_status_commands.h.
std::string label_text(const DaemonView& d, const limiter::KeyLabel& l) {
  return control::key_label_text(l, [&d](uint64_t id) -> std::string {
    for (const auto& [user, count] : d.credentials->users()) {
      if (control::CredentialRegistry::user_id(user) == id) return user;
    }
    return "";
  });
}

namespace {

// Per rule of the current policy, added up over the workers.
Json rules_of(const DaemonView& d) {
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
Json busiest_of(const DaemonView& d, size_t top) {
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
Json counter_totals_of(const DaemonView& d) {
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
  o["delayed_waiting"] = load(c.delayed_waiting);
#define SLUICE_WORKER_COUNTER(name, help) o[#name] = c.name.get();
  SLUICE_WORKER_COUNTERS(SLUICE_WORKER_COUNTER)
#undef SLUICE_WORKER_COUNTER
  return o;
}

Reply cmd_stats(const DaemonView& d, const Json&, Json& w) {
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

}  // namespace

RuleTotals rule_totals(const DaemonView& d, const limiter::CompiledRule& rule) {
  const size_t slot = rule.counter_slot;
  RuleTotals t;
  for (unsigned i = 0; i < d.workers; ++i) {
    t.admitted += d.counters[i].rules[slot].admitted.get();
    t.refused += d.counters[i].rules[slot].refused.get();
    t.answered += d.counters[i].rules[slot].answered.get();
  }
  return t;
}

void StatusCommands::register_commands(control::CommandTable& table) const {
  table.add(control::command::kStatus, [this](const Json& request, Json& w) { return cmd_status(daemon_, request, w); });
  table.add(control::command::kStats, [this](const Json& request, Json& w) { return cmd_stats(daemon_, request, w); });
}

}  // namespace sluice::sluiced

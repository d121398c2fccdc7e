// See sluiced_metrics.h. The worker counters' families and labels are
// dataplane::kCounterExposition's (next to the counters, so a new one
// cannot be left out); their HELP texts are here.
#include "sluiced_metrics.h"

#include <rte_ethdev.h>
#include <rte_version.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <iterator>
#include <string_view>

#include "sluiced_status_commands.h"

namespace sluice::sluiced {

namespace {

using dataplane::kCounterExposition;
using dataplane::kCounterMembers;

struct FamilyHelp {
  std::string_view name;
  std::string_view help;
};

// Every family kCounterExposition names, in the order they are written.
constexpr FamilyHelp kWorkerFamilies[] = {
    {"sluice_frames_total", "frames the workers received (rx) and sent (tx), per port"},
    {"sluice_frames_dropped_total",
     "frames and segments the workers dropped, by reason: tx_queue_full (the port would not take it); opaque "
     "(could hide TCP the appliance cannot read: ESP, AH, tunnels); malformed (broken headers); handoff_ring_full "
     "(the owning worker's ring); fragment (a first fragment of a service-port segment); flow_table_full, "
     "client_flow_share (SYNs: no flow free, or the client address holds its share); no_context, "
     "client_context_share (no parse context free, or the client's share in use); out_of_order (ahead of the "
     "parsed stream: the sender repeats it); repeat_unrecorded (repeating judged bytes no longer recorded); "
     "closed_connection_data (client bytes past the end of a connection a RST or both FINs closed)"},
    {"sluice_frames_bridged_total",
     "frames bridged untouched: non_ip (ARP, LLDP, ...), ip_not_tcp (ICMP, UDP, later fragments), tcp_other_port"},
    {"sluice_service_frames_total", "TCP frames of service-port flows handled"},
    {"sluice_frames_handed_off_total", "frames passed to the worker that owns their flow"},
    {"sluice_flows_total",
     "service-port flow events: created (SYN seen), established (handshake seen both ways), expired (timeout), "
     "pass_through (switched to pass-through: Upgrade, CONNECT)"},
    {"sluice_untracked_resets_total", "client payload on a flow the appliance does not track: both ends reset"},
    {"sluice_replies_limited_total",
     "segments the appliance would have sent for what an outsider can forge, not sent over a per-worker rate: "
     "challenge_ack (RFC 5961), untracked_origin_reset (the origin's RST for an untracked client segment)"},
    {"sluice_adoptions_total",
     "connections the appliance did not know, taken up at a request head: adopted (the origin probed); proved "
     "(the origin answered: judged from there); failed (the origin gave no numbers: reset); reset_unjudged (a request with a body or a protocol switch on an adopted connection)"},
    {"sluice_request_heads_total",
     "request heads parsed; each is counted once more in sluice_requests_total, under its verdict"},
    {"sluice_requests_total",
     "requests by verdict, each counted once (the sum over all labels is sluice_request_heads_total): admitted "
     "(shadow refusals included) and refused (429) under the rule that decided; forwarded (no rule applied, RF02), "
     "exempt (TB08, TB18) and answered (the appliance's own 400, 401, 404, 431, 501, 505, whichever rule gave "
     "them: see sluice_rule_answers_total) under rule=\"\". Rules of the current policy only: a rule a reload "
     "removes leaves the family, and comes back with its counts"},
    {"sluice_shadow_refusals_total",
     "refusals of a shadow rule, forwarded (X01); counted as admitted in sluice_requests_total"},
    {"sluice_framing_errors_total",
     "connections ended because a stream could not be framed: request (the client's), response (the origin's)"},
    {"sluice_ambiguous_paths_total",
     "requests whose path origins read differently (a backslash, an encoded slash or dot, a dot segment, '//', "
     "';', a bad or control escape, bytes that are not UTF-8, an encoded unreserved character: docs/paths.md): "
     "refused (answered 400, ambiguous_paths: refuse; counted as answered in sluice_requests_total too), "
     "judged_strictest (judged by the stricter of the raw and normalised readings, never exempt)"},
    {"sluice_answers_total",
     "the appliance's answers (429 and others) by outcome: sent_closing (with FIN, the origin reset); "
     "sent_kept_open (the connection stays open: after_answer); resent, kept_open_resent (sent again: the client "
     "repeated the request); lost (overwritten before the repeat came: reset); abandoned (the origin closed first)"},
    {"sluice_client_segments_total",
     "client segments passed on changed or specially: retransmit_uncharged (already parsed, not charged again); "
     "overlap_trimmed (judged bytes cut off); urgent_cleared (URG cleared, sent as ordinary data); "
     "repeat_rewritten (written back to the judged bytes); backpressure (cut or dropped: too many responses "
     "outstanding); rst_out_of_window (a RST outside the window: dropped, RFC 5961), rst_challenged (a RST in "
     "the window, not at the expected number: dropped, challenge ACK), syn_challenged (a SYN on an open "
     "connection: dropped, challenge ACK)"},
    {"sluice_deadlines_total",
     "connections past a deadline of the policy: head (answered 408), first_head (no request on a new "
     "connection: closed), body (stalled: both ends reset), keep_alive (idle: closed), response (unread: both "
     "ends reset)"},
    {"sluice_syn_cookies_total",
     "SYN cookies (syn_proxy): sent (a client SYN answered), validated (an ACK with a valid cookie: a flow), "
     "failed (no valid cookie on an untracked flow: dropped, payload reset), early_data (data ahead of the "
     "handshake's ACK: dropped)"},
    {"sluice_syn_proxy_handshakes_total",
     "cookie handshakes and the origin: bound (it answered the SYN), unbound (accepted unbound, binding: "
     "delayed), bound_no_stash (bound at once: no bind stash free), origin_refused (RST or no answer in 5 s: "
     "the client reset), option_mismatch (a promised option refused: both ends reset)"},
    {"sluice_unbound_answers_total", "requests answered on unbound flows: the origin never saw the connection"},
    {"sluice_evictions_total",
     "holders taken back to make room: parse contexts of a slow_head (answered 408), a stalled_body (reset), a "
     "slow_reader (reset), an idle_context (closed); flows: half_open_flow (forgotten), idle_flow (closed), "
     "over_budget_flow (forgotten)"},
    {"sluice_response_fields_total",
     "admitted responses and their RateLimit fields (TB16): inserted, skipped (too long, or 32 edits in flight)"},
    {"sluice_usage_reports_total", "responses whose reported tokens were charged to their window (DQ05)"},
    {"sluice_penalty_total", "penalty boxes: keys boxed, requests refused while boxed, boxings the log dropped"},
    {"sluice_concurrency_refusals_total", "requests refused because their key had every in-flight slot taken"},
    {"sluice_delayed_requests_total",
     "requests admitted late, held until their rate bucket admitted them (delay_max): enforce (held), shadow "
     "(a shadow rule's: forwarded at once)"},
    {"sluice_delay_seconds_total", "time the delayed requests were held, together"},
    {"sluice_proxy_protocol_total",
     "PROXY protocol headers: read (from a trusted proxy), untrusted_peer, missing (a trusted proxy's connection "
     "without one), malformed (each of those: both ends reset), not_adopted (a trusted proxy's connection the "
     "appliance did not know: reset)"},
    {"sluice_delay_full_total",
     "requests of a delaying rule decided while the worker held as many as it may: refused, not delayed"},
};

constexpr bool every_family_has_help() {
  for (const dataplane::CounterExposition& row : kCounterExposition) {
    bool found = false;
    for (const FamilyHelp& f : kWorkerFamilies) found = found || f.name == row.family;
    if (!found) return false;
  }
  return true;
}
static_assert(every_family_has_help(), "a family in dataplane::kCounterExposition has no row in kWorkerFamilies");

// A label value as the exposition format wants it: \, " and newlines escaped.
std::string quoted(std::string_view s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '\n') {
      q += "\\n";
      continue;
    }
    if (c == '\\' || c == '"') q += '\\';
    q += c;
  }
  return q + "\"";
}

std::string label(std::string_view name, std::string_view value) {
  return std::string(name) + "=" + quoted(value);
}

std::string joined(std::string a, std::string_view b) {
  if (!a.empty() && !b.empty()) a += ',';
  return a.append(b);
}

// Writes one family at a time, so each family's samples follow its HELP
// and TYPE with nothing between: a sample always belongs to the family
// begun last. The header goes out with the first sample, so a family with
// none leaves no trace.
class Exposition {
 public:
  void family(std::string_view name, std::string_view type, std::string_view help) {
    name_ = name;
    header_ = "# HELP " + name_ + " " + escaped_help(help) + "\n# TYPE " + name_ + " " + std::string(type) + "\n";
  }
  void sample(const std::string& labels, uint64_t value) { line(labels, std::to_string(value)); }
  // A duration counted in microseconds, exposed in seconds.
  void sample_micros(const std::string& labels, uint64_t micros) {
    char v[32];
    std::snprintf(v, sizeof v, "%" PRIu64 ".%06" PRIu64, micros / 1'000'000, micros % 1'000'000);
    line(labels, v);
  }
  [[nodiscard]] std::string take() { return std::move(out_); }

 private:
  static std::string escaped_help(std::string_view help) {
    std::string h;
    for (char c : help) {
      if (c == '\\') h += "\\\\";
      else if (c == '\n') h += "\\n";
      else h += c;
    }
    return h;
  }
  void line(const std::string& labels, const std::string& value) {
    out_ += header_;
    header_.clear();
    out_ += name_ + (labels.empty() ? "" : "{" + labels + "}") + " " + value + "\n";
  }

  std::string name_, header_, out_;
};

std::string worker_label(size_t w) { return label("worker", std::to_string(w)); }

// One row of kCounterExposition: per worker, or per worker and rule.
void render_counter(const MetricsSample& s, size_t c, Exposition& e) {
  const dataplane::CounterExposition& row = kCounterExposition[c];
  if (row.per_rule == nullptr) {
    for (size_t w = 0; w < s.workers.size(); ++w) {
      const uint64_t v = (s.workers[w].*kCounterMembers[c]).get();
      if (row.micros) {
        e.sample_micros(joined(worker_label(w), row.labels), v);
      } else {
        e.sample(joined(worker_label(w), row.labels), v);
      }
    }
    return;
  }
  for (const RuleSlot& r : s.rules) {
    for (size_t w = 0; w < s.workers.size(); ++w) {
      const std::string labels = joined(joined(worker_label(w), row.labels), label("rule", r.name));
      e.sample(labels, (s.workers[w].rules[r.slot].*row.per_rule).get());
    }
  }
}

void render_workers(const MetricsSample& s, Exposition& e) {
  for (const FamilyHelp& f : kWorkerFamilies) {
    e.family(f.name, "counter", f.help);
    for (size_t c = 0; c < std::size(kCounterExposition); ++c) {
      if (kCounterExposition[c].family == f.name) render_counter(s, c, e);
    }
  }
  e.family("sluice_rule_answers_total", "counter",
           "of the answers in sluice_requests_total{verdict=\"answered\"}, those a rule gave (RF10's 401, a run's 404)");
  for (const RuleSlot& r : s.rules) {
    for (size_t w = 0; w < s.workers.size(); ++w) {
      e.sample(joined(worker_label(w), label("rule", r.name)), s.workers[w].rules[r.slot].answered.get());
    }
  }
  e.family("sluice_flows_active", "gauge", "TCP flows tracked");
  for (size_t w = 0; w < s.workers.size(); ++w) {
    e.sample(worker_label(w), s.workers[w].flows_active.load(std::memory_order_relaxed));
  }
  e.family("sluice_delayed_waiting", "gauge", "requests held for their rule's delay now");
  for (size_t w = 0; w < s.workers.size(); ++w) {
    e.sample(worker_label(w), s.workers[w].delayed_waiting.load(std::memory_order_relaxed));
  }
  e.family("sluice_flows_unbound", "gauge", "TCP flows not yet bound to their origin (delayed binding)");
  for (size_t w = 0; w < s.workers.size(); ++w) {
    e.sample(worker_label(w), s.workers[w].flows_unbound.load(std::memory_order_relaxed));
  }
}

void render_tables(const MetricsSample& s, Exposition& e) {
  e.family("sluice_table_entries", "gauge",
           "entries in use in a shared table, as the reclaimer last counted them (at most 10 s old)");
  for (const TableSample& t : s.tables) e.sample(label("table", t.name), t.entries);
  e.family("sluice_table_capacity", "gauge", "entries a shared table holds");
  for (const TableSample& t : s.tables) e.sample(label("table", t.name), t.capacity);
  e.family("sluice_table_overflows_total", "counter", "keys charged to their kind's overflow bucket (no slot free)");
  for (const TableSample& t : s.tables) e.sample(label("table", t.name), t.overflows);
  e.family("sluice_table_reclaimed_total", "counter", "idle entries dropped (RF08, TB07)");
  for (const TableSample& t : s.tables) {
    if (t.reclaimed) e.sample(label("table", t.name), *t.reclaimed);
  }
  e.family("sluice_runs_live", "gauge", "live runs");
  e.sample("", s.runs_live);
  e.family("sluice_credentials", "gauge", "credentials in the credential-to-user map");
  e.sample("", s.credentials);
}

void render_ports(const MetricsSample& s, Exposition& e) {
  static constexpr const char* kPort[2] = {"client", "origin"};
  const auto each_port = [&](auto&& write) {
    for (size_t i = 0; i < 2; ++i) {
      if (s.ports[i]) write(label("port", kPort[i]), *s.ports[i]);
    }
  };
  e.family("sluice_port_packets_total", "counter", "packets per port and direction, as the driver counts them");
  each_port([&](const std::string& port, const PortCounts& p) {
    e.sample(joined(port, R"(direction="rx")"), p.rx_packets);
    e.sample(joined(port, R"(direction="tx")"), p.tx_packets);
  });
  e.family("sluice_port_bytes_total", "counter", "bytes per port and direction, as the driver counts them");
  each_port([&](const std::string& port, const PortCounts& p) {
    e.sample(joined(port, R"(direction="rx")"), p.rx_bytes);
    e.sample(joined(port, R"(direction="tx")"), p.tx_bytes);
  });
  e.family("sluice_port_packets_dropped_total", "counter",
           "packets a port missed (rx_missed: its queue full), received broken (rx_errors), could not send "
           "(tx_errors) or had no buffer for (rx_no_mbuf), as the driver counts them");
  each_port([&](const std::string& port, const PortCounts& p) {
    e.sample(joined(port, R"(reason="rx_missed")"), p.rx_missed);
    e.sample(joined(port, R"(reason="rx_errors")"), p.rx_errors);
    e.sample(joined(port, R"(reason="tx_errors")"), p.tx_errors);
    e.sample(joined(port, R"(reason="rx_no_mbuf")"), p.rx_no_mbuf);
  });
}

// The cluster sync.
void render_cluster(const ClusterSample& c, Exposition& e) {
  e.family("sluice_cluster_syncs_total", "counter", "syncs of the cluster buckets with Redis, by outcome");
  e.sample(R"(outcome="ok")", c.syncs_ok);
  e.sample(R"(outcome="failed")", c.syncs_failed);
  e.family("sluice_cluster_keys_total", "counter",
           "cluster keys sent to Redis, local TATs the shared lead moved (and of those, learned from other boxes' "
           "change logs), spends the fallback took and later repaid, floors sent again after Redis lost a group");
  e.sample(R"(op="sent")", c.keys_sent);
  e.sample(R"(op="published")", c.keys_published);
  e.sample(R"(op="learned")", c.keys_learned);
  e.sample(R"(op="fallback")", c.fallback_keys);
  e.sample(R"(op="repaid")", c.repaid_keys);
  e.sample(R"(op="reseeded")", c.keys_reseeded);
  e.family("sluice_cluster_round_trips_total", "counter", "calls the cluster buckets' sync made to Redis that answered");
  e.sample("", c.round_trips);
  e.family("sluice_cluster_keys_watched", "gauge", "cluster keys the box follows: spent on lately, or owing Redis");
  e.sample("", c.keys_watched);
  e.family("sluice_cluster_fallback", "gauge", "1 while Redis cannot be reached and the fallback applies");
  e.sample("", c.in_fallback);
  e.family("sluice_cluster_fallbacks_total", "counter", "times the box fell back");
  e.sample("", c.fallbacks);
  e.family("sluice_cluster_sync_seconds_total", "counter", "time spent syncing");
  e.sample_micros("", c.sync_us_total);
  e.family("sluice_cluster_last_sync_seconds", "gauge", "how long the last sync took");
  e.sample_micros("", c.last_sync_us);
  e.family("sluice_cluster_last_sync_keys", "gauge", "keys the last sync sent to Redis (spends and reads)");
  e.sample("", c.last_sync_keys);
  e.family("sluice_cluster_spend_lost_total", "counter", "admissions a full spend log could not record");
  e.sample("", c.spend_lost);
  if (const auto& r = c.replication) {
    e.family("sluice_cluster_replicated_changes_total", "counter",
             "changes to runs and credentials: this box's published, other boxes' applied or refused, this box's dropped");
    e.sample(R"(op="published")", r->published);
    e.sample(R"(op="applied")", r->applied);
    e.sample(R"(op="refused")", r->refused);
    e.sample(R"(op="dropped")", r->dropped);
  }
}

void render_policy(const MetricsSample& s, Exposition& e) {
  e.family("sluice_policy_generation", "gauge", "policies published since start (0: the first)");
  e.sample(label("policy", s.policy_name), s.policy_generation);
  e.family("sluice_policy_reloads_total", "counter", "policies published by a reload (sluicectl policy reload, SIGHUP)");
  e.sample("", s.policy_reloads);
  e.family("sluice_policy_snapshots_held", "gauge", "the current policy and retired ones a request in flight may still use");
  e.sample("", s.snapshots_held);
}

// --- Reading the daemon ---------------------------------------------------

std::string dpdk_version() {
  std::string_view v = rte_version();  // "DPDK 22.11.5"
  if (const size_t space = v.find(' '); space != std::string_view::npos) v.remove_prefix(space + 1);
  return std::string(v);
}

// By the appliance's clock (UTC, never stepped): whole seconds, so the
// value stays put from one scrape to the next.
uint64_t start_time_seconds(const DaemonView& d) {
  const auto up = std::chrono::steady_clock::now() - d.started;
  const uint64_t up_ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(up).count());
  const uint64_t now_ns = d.clock != nullptr ? d.clock->now() : 0;
  return now_ns > up_ns ? (now_ns - up_ns) / 1'000'000'000 : 0;
}

std::vector<RuleSlot> rule_slots(const limiter::CompiledPolicy& policy) {
  std::vector<RuleSlot> rules;
  for (const limiter::CompiledRule& r : policy.rules) {
    bool counted = false;
    for (const RuleSlot& seen : rules) counted = counted || seen.slot == r.counter_slot;
    if (!counted) rules.push_back({r.name, r.counter_slot});  // a shared slot under the first rule that has it
  }
  return rules;
}

std::optional<PortCounts> port_counts(uint16_t port) {
  rte_eth_stats st{};
  if (rte_eth_stats_get(port, &st) != 0) return std::nullopt;
  PortCounts p;
  p.rx_packets = st.ipackets, p.tx_packets = st.opackets, p.rx_bytes = st.ibytes, p.tx_bytes = st.obytes;
  p.rx_missed = st.imissed, p.rx_errors = st.ierrors, p.tx_errors = st.oerrors, p.rx_no_mbuf = st.rx_nombuf;
  return p;
}

ClusterSample cluster_sample(const control::ClusterService& cluster) {
  const control::ClusterCounters& c = cluster.counters();
  const auto get = [](const std::atomic<uint64_t>& v) { return v.load(std::memory_order_relaxed); };
  ClusterSample s;
  s.syncs_failed = get(c.sync_failures);
  s.syncs_ok = get(c.syncs) - s.syncs_failed;
  s.keys_sent = get(c.keys_sent), s.keys_published = get(c.keys_published), s.fallback_keys = get(c.fallback_keys);
  s.repaid_keys = get(c.repaid_keys);
  s.keys_learned = get(c.keys_learned), s.keys_reseeded = get(c.keys_reseeded), s.round_trips = get(c.round_trips);
  s.keys_watched = get(c.keys_watched), s.in_fallback = get(c.in_fallback), s.fallbacks = get(c.fallbacks);
  s.sync_us_total = get(c.sync_us_total), s.last_sync_us = get(c.last_sync_us), s.last_sync_keys = get(c.last_sync_keys);
  s.spend_lost = cluster.lost_records();
  if (const control::ClusterReplica* r = cluster.replica()) {
    const control::ReplicaCounters& rc = r->counters();
    s.replication = ClusterSample::Replication{get(rc.published), get(rc.applied), get(rc.refused), get(rc.dropped)};
  }
  return s;
}

std::vector<TableSample> table_samples(const DaemonView& d) {
  const limiter::BucketTable* tables[2] = {&d.limiter->buckets, &d.limiter->credential_records};
  const char* names[2] = {"buckets", "credential_slots"};
  std::vector<TableSample> out;
  for (size_t t = 0; t < 2; ++t) {
    TableSample s{names[t], tables[t]->live_as_of_reclaim(), tables[t]->capacity(), tables[t]->overflows(), {}};
    if (d.reclaimer != nullptr) s.reclaimed = d.reclaimer->freed(t);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

MetricsSample sample_metrics(const DaemonView& d) {
  MetricsSample s;
  s.version = SLUICE_VERSION;
  s.dpdk_version = dpdk_version();
  s.start_time_seconds = start_time_seconds(d);
  s.workers = std::span<const dataplane::WorkerCounters>(d.counters, d.workers);
  const std::shared_ptr<const dataplane::PolicySnapshot> snapshot = d.publisher->current();
  s.rules = rule_slots(snapshot->policy);
  s.tables = table_samples(d);
  s.runs_live = d.runs->size();
  s.credentials = d.credentials->summary().credentials;
  for (size_t i = 0; i < 2 && d.ports != nullptr; ++i) s.ports[i] = port_counts(d.ports[i].id);
  if (d.cluster != nullptr) s.cluster = cluster_sample(*d.cluster);
  s.policy_name = snapshot->policy.source.name;
  s.policy_generation = snapshot->generation;
  s.policy_reloads = d.publisher->reloads();
  s.snapshots_held = d.publisher->held();
  return s;
}

std::string render_metrics(const MetricsSample& s) {
  Exposition e;
  e.family("sluice_build_info", "gauge", "the version of sluice and of the DPDK it runs on (always 1)");
  e.sample(joined(label("version", s.version), label("dpdk_version", s.dpdk_version)), 1);
  e.family("sluice_start_time_seconds", "gauge", "when sluiced started, in seconds since the Unix epoch");
  e.sample("", s.start_time_seconds);
  render_workers(s, e);
  render_tables(s, e);
  render_ports(s, e);
  if (s.cluster) render_cluster(*s.cluster, e);
  render_policy(s, e);
  return e.take();
}

std::string render_metrics(const DaemonView& daemon) { return render_metrics(sample_metrics(daemon)); }

}  // namespace sluice::sluiced

// Per-worker counters: the totals, the same per rule, and the worker's
// busiest keys. Each worker writes only its own (a load and a store, never a
// shared read-modify-write), the control plane reads them all and adds them
// up, so counting costs the hot path no cache-line ping-pong. Each counter's
// place on Prometheus (family and labels) is in kCounterExposition below.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string_view>

#include "busy_keys.h"
#include "limiter/compiled_policy.h"

namespace sluice::dataplane {

class Counter {
 public:
  void add(uint64_t n = 1) noexcept { v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }
  [[nodiscard]] uint64_t get() const noexcept { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> v_{0};
};

// X(name, help): the counters, in the order `sluicectl stats` shows them.
#define SLUICE_WORKER_COUNTERS(X)                                                              \
  X(rx_client, "frames received on the client port")                                          \
  X(rx_origin, "frames received on the origin port")                                          \
  X(tx_client, "frames sent on the client port")                                              \
  X(tx_origin, "frames sent on the origin port")                                              \
  X(tx_dropped, "frames the port would not take (transmit queue full)")                       \
  X(bridged_non_ip, "non-IP frames bridged (ARP, LLDP, ...)")                                 \
  X(bridged_ip_other, "IP frames that are not TCP bridged (ICMP, UDP, later fragments)")      \
  X(bridged_tcp_other, "TCP frames to other ports bridged")                                   \
  X(dropped_opaque, "frames that could hide TCP the appliance cannot read dropped (ESP, AH, tunnels, ...)") \
  X(dropped_malformed, "frames with broken headers dropped")                                   \
  X(dropped_bad_checksum, "service-port segments with a wrong IPv4 header or TCP checksum dropped") \
  X(service_frames, "TCP frames of service-port flows handled")                                \
  X(handed_off, "frames passed to the worker that owns their flow")                           \
  X(handoff_dropped, "frames dropped because the owner's hand-off ring was full")             \
  X(fragments_dropped, "first fragments of service-port segments dropped")                     \
  X(flows_created, "flows whose SYN was seen")                                                 \
  X(flows_established, "flows whose handshake was seen both ways")                             \
  X(flows_expired, "flows removed by timeout")                                                 \
  X(flow_table_full, "SYNs dropped because the flow table was full")                           \
  X(untracked_reset, "client payload on a flow the appliance does not track: both ends reset") \
  X(untracked_origin_resets_limited, "resets for untracked client payload not sent to the origin: over the per-worker rate") \
  X(rst_out_of_window, "client RSTs outside the window dropped, the connection kept (RFC 5961)") \
  X(rst_challenged, "client RSTs in the window but not at the expected number: dropped, challenge ACK (RFC 5961)") \
  X(syn_challenged, "client SYNs on an open connection: dropped, challenge ACK (RFC 5961)") \
  X(challenge_acks_limited, "challenge ACKs not sent: over the per-worker rate") \
  X(closed_data_dropped, "client bytes past the end of a closed connection dropped") \
  X(flows_adopted, "connections the appliance did not know (begun before a restart, or expired) adopted at a request head: probed") \
  X(adoption_proved, "adopted connections the origin showed to exist (it answered the probe): judged from there") \
  X(adoption_failed, "adopted connections the origin gave no numbers for (silent, reset, or sending): reset") \
  X(adopted_reset, "requests with a body or a protocol switch on an adopted connection: reset unjudged") \
  X(requests, "request heads parsed")                                                          \
  X(forwarded, "requests no rule applied to (RF02)")                                           \
  X(exempt, "exempt requests (TB08, TB18)")                                                    \
  X(admitted, "requests a rule admitted")                                                      \
  X(refused, "requests refused (429)")                                                         \
  X(answered, "requests answered by the appliance (400, 401, 404, 431, 501, 505)")            \
  X(shadow_refusals, "refusals of a shadow rule, forwarded (X01)")                             \
  X(parse_errors, "connections whose request stream could not be framed")                      \
  X(paths_refused, "requests whose path origins read differently: answered 400 (ambiguous_paths: refuse)") \
  X(paths_strictest, "requests whose path origins read differently: judged by the stricter reading, never exempt (ambiguous_paths: strictest)") \
  X(response_errors, "connections ended: a response could not be framed")        \
  X(answers_sent, "answers (429 and others) sent with FIN, origin reset")                      \
  X(answers_resent, "answers sent again for a retransmitted refused request")                  \
  X(answers_lost, "refused requests retransmitted after their answer was overwritten: reset")  \
  X(answers_abandoned, "answers not sent because the origin had closed first")                 \
  X(answers_kept_open, "answers after which the connection stayed open (after_answer)")        \
  X(kept_answers_resent, "kept-open answers sent again: the client sent their request again") \
  X(retransmits, "client segments already parsed, forwarded again uncharged")                  \
  X(overlaps_trimmed, "client segments that began with bytes already judged: those cut off")   \
  X(urgent_cleared, "client segments with urgent data sent on as ordinary data (URG cleared)") \
  X(repeats_rewritten, "client segments repeating judged bytes with other bytes: written back") \
  X(repeats_dropped, "client segments repeating judged bytes no longer recorded, unacknowledged: dropped") \
  X(out_of_order, "segments ahead of the parsed stream dropped for the sender to retransmit")  \
  X(backpressure, "segments cut or dropped: too many responses outstanding")                   \
  X(contexts_exhausted, "segments dropped: no parse context free")                             \
  X(deadline_head, "heads not complete within deadlines.head: answered 408, closed")            \
  X(deadline_first_head, "new connections without a request within deadlines.head: closed")    \
  X(deadline_body, "request bodies stalled past deadlines.body: both ends reset")              \
  X(deadline_keep_alive, "connections idle past deadlines.keep_alive: closed")                  \
  X(deadline_response, "responses unread past deadlines.response: both ends reset")            \
  X(syn_cookies_sent, "client SYNs answered with a SYN cookie (syn_proxy)")                    \
  X(syn_cookies_validated, "client ACKs that carried a valid cookie: a flow, and a SYN to the origin") \
  X(syn_cookies_failed, "client segments on untracked flows without a valid cookie: dropped (payload: reset)") \
  X(syn_cookie_early_data, "client data ahead of its handshake's ACK (reordered, or the ACK lost): dropped, not reset") \
  X(syn_proxy_bound, "proxied flows the origin answered the SYN of: bound to it")              \
  X(syn_proxy_unbound, "cookie handshakes accepted unbound (binding: delayed): no origin connection yet") \
  X(unbound_answers, "requests answered on unbound flows: the origin never saw the connection") \
  X(bind_stash_exhausted, "cookie handshakes bound at once for want of a free bind stash")     \
  X(syn_proxy_refused, "proxied handshakes the origin refused (RST) or left unanswered for 5 s: the client reset") \
  X(syn_proxy_mismatch, "origins that refused a promised option (timestamps): both ends reset") \
  X(share_flows_refused, "SYNs dropped: the client address holds its share of flows")          \
  X(share_contexts_refused, "segments dropped: the client address holds its share of contexts") \
  X(evicted_slow_head, "contexts taken back from a head arriving for over 1 s: answered 408")   \
  X(evicted_stalled_body, "contexts taken back from a body stalled for over 1 s: reset")        \
  X(evicted_slow_reader, "contexts taken back from a client not reading its response for over 1 s: reset") \
  X(evicted_idle_context, "contexts taken back from a connection idle for over 1 s: closed")    \
  X(evicted_half_open, "half-open flows forgotten to make room for a new one")                  \
  X(evicted_idle_flow, "connections idle (or silent) for over 1 s closed to make room for a new one") \
  X(evicted_over, "flows already over forgotten early to make room for a new one")             \
  X(pass_through, "flows switched to pass-through (Upgrade, CONNECT)")                          \
  X(fields_inserted, "admitted responses given their rate-limit fields (TB16)")                 \
  X(fields_skipped, "admitted responses left without fields (too long, or 32 edits in flight)")  \
  X(usage_reported, "responses whose reported tokens were charged to their window (DQ05)")      \
  X(penalty_boxed, "keys put in their rule's penalty box (refused too often too fast)")         \
  X(penalty_refused, "requests refused because their key was in a penalty box")                 \
  X(penalty_log_dropped, "boxings not handed to the control thread (its ring was full)")       \
  X(in_flight_refused, "requests refused because their key had every in-flight slot taken (concurrency)") \
  X(delayed, "requests admitted late: held until their rate bucket admitted them (delay_max)")  \
  X(delay_us_total, "microseconds the delayed requests were held, together")                   \
  X(delay_full, "requests of a delaying rule decided while the worker held as many as it may: refused, not delayed") \
  X(delay_shadowed, "requests a shadow rule would have delayed: forwarded at once") \
  X(proxy_headers, "PROXY protocol headers read from trusted proxies (client_ip proxy_protocol)") \
  X(proxy_untrusted, "PROXY protocol headers from peers not in trusted_proxies: both ends reset") \
  X(proxy_missing, "connections from trusted proxies that did not begin with a PROXY protocol header: both ends reset") \
  X(proxy_malformed, "malformed PROXY protocol headers: both ends reset") \
  X(proxy_not_adopted, "connections from trusted proxies not adopted (their PROXY header is long gone): reset")

// What a rule decided, for `sluicectl stats` per rule. Exempt and forwarded
// requests are counted only in the totals.
struct RuleCounters {
  Counter admitted;  // includes the rule's shadow refusals, as the total does
  Counter refused;
  Counter answered;
};

// Slots are given to rule names by the policy publisher and kept across
// reloads (limiter::CompiledRule::counter_slot, which a Decision carries: no
// lookup on the hot path). A slot is never given to another name, so a
// rule's counts only grow; names past the 63rd share the last slot.
inline constexpr size_t kRuleCounters = limiter::kRuleCounterSlots;

struct alignas(64) WorkerCounters {
#define SLUICE_DECLARE_COUNTER(name, help) Counter name;
  SLUICE_WORKER_COUNTERS(SLUICE_DECLARE_COUNTER)
#undef SLUICE_DECLARE_COUNTER
  std::atomic<uint64_t> flows_active{0};          // a gauge, set once per loop pass
  std::atomic<uint64_t> delayed_waiting{0};       // the same: requests held for their delay now
  std::atomic<uint64_t> flows_unbound{0};         // the same: of those, not yet bound to their origin (delayed binding)
  // The oldest policy generation this worker may still read (requests parsed
  // under a policy since replaced); the control plane frees older snapshots.
  // Set once per loop pass; 0 until the worker has looked at all its contexts.
  std::atomic<uint64_t> oldest_policy_generation{0};
  // Passes of the worker's loop so far (Worker::poll_once). Not a metric: the
  // main thread feeds systemd's watchdog only while every worker's moves
  // (src/sluiced_notify.h), so a stuck worker gets the appliance restarted.
  Counter heartbeat;
  std::array<RuleCounters, kRuleCounters> rules;  // by CompiledRule::counter_slot
  BusyKeys busy;                                  // every refusal, one admission in 16 (see FlowEngine)
};

// How each counter appears on Prometheus (src/sluiced_metrics.cpp): one
// sample of a family (per worker), told apart from the family's other
// counters by its labels. One row per counter, in the X-macro's order: the
// static_assert below fails the build when a counter is added, moved or
// renamed without its row, so none is left out of the exposition. The names
// `sluicectl stats` and telemetry show are the X-macro's, unchanged.
struct CounterExposition {
  std::string_view counter;  // the X-macro's name
  std::string_view family;   // e.g. sluice_frames_total
  std::string_view labels;   // e.g. port="client",direction="rx"; empty: the family's only counter
  // Where the family has a rule label: the per-rule counter the sample is
  // taken from, one per rule (the worker's total is their sum).
  Counter RuleCounters::*per_rule = nullptr;
  // The counter holds microseconds; the family, seconds.
  bool micros = false;
};

inline constexpr CounterExposition kCounterExposition[] = {
    {"rx_client", "sluice_frames_total", R"(port="client",direction="rx")"},
    {"rx_origin", "sluice_frames_total", R"(port="origin",direction="rx")"},
    {"tx_client", "sluice_frames_total", R"(port="client",direction="tx")"},
    {"tx_origin", "sluice_frames_total", R"(port="origin",direction="tx")"},
    {"tx_dropped", "sluice_frames_dropped_total", R"(reason="tx_queue_full")"},
    {"bridged_non_ip", "sluice_frames_bridged_total", R"(kind="non_ip")"},
    {"bridged_ip_other", "sluice_frames_bridged_total", R"(kind="ip_not_tcp")"},
    {"bridged_tcp_other", "sluice_frames_bridged_total", R"(kind="tcp_other_port")"},
    {"dropped_opaque", "sluice_frames_dropped_total", R"(reason="opaque")"},
    {"dropped_malformed", "sluice_frames_dropped_total", R"(reason="malformed")"},
    {"dropped_bad_checksum", "sluice_frames_dropped_total", R"(reason="bad_checksum")"},
    {"service_frames", "sluice_service_frames_total", ""},
    {"handed_off", "sluice_frames_handed_off_total", ""},
    {"handoff_dropped", "sluice_frames_dropped_total", R"(reason="handoff_ring_full")"},
    {"fragments_dropped", "sluice_frames_dropped_total", R"(reason="fragment")"},
    {"flows_created", "sluice_flows_total", R"(event="created")"},
    {"flows_established", "sluice_flows_total", R"(event="established")"},
    {"flows_expired", "sluice_flows_total", R"(event="expired")"},
    {"flow_table_full", "sluice_frames_dropped_total", R"(reason="flow_table_full")"},
    {"untracked_reset", "sluice_untracked_resets_total", ""},
    {"untracked_origin_resets_limited", "sluice_replies_limited_total", R"(reply="untracked_origin_reset")"},
    {"rst_out_of_window", "sluice_client_segments_total", R"(treatment="rst_out_of_window")"},
    {"rst_challenged", "sluice_client_segments_total", R"(treatment="rst_challenged")"},
    {"syn_challenged", "sluice_client_segments_total", R"(treatment="syn_challenged")"},
    {"challenge_acks_limited", "sluice_replies_limited_total", R"(reply="challenge_ack")"},
    {"closed_data_dropped", "sluice_frames_dropped_total", R"(reason="closed_connection_data")"},
    {"flows_adopted", "sluice_adoptions_total", R"(outcome="adopted")"},
    {"adoption_proved", "sluice_adoptions_total", R"(outcome="proved")"},
    {"adoption_failed", "sluice_adoptions_total", R"(outcome="failed")"},
    {"adopted_reset", "sluice_adoptions_total", R"(outcome="reset_unjudged")"},
    {"requests", "sluice_request_heads_total", ""},
    {"forwarded", "sluice_requests_total", R"(verdict="forwarded",rule="")"},
    {"exempt", "sluice_requests_total", R"(verdict="exempt",rule="")"},
    {"admitted", "sluice_requests_total", R"(verdict="admitted")", &RuleCounters::admitted},
    {"refused", "sluice_requests_total", R"(verdict="refused")", &RuleCounters::refused},
    {"answered", "sluice_requests_total", R"(verdict="answered",rule="")"},
    {"shadow_refusals", "sluice_shadow_refusals_total", ""},
    {"parse_errors", "sluice_framing_errors_total", R"(stream="request")"},
    {"paths_refused", "sluice_ambiguous_paths_total", R"(treatment="refused")"},
    {"paths_strictest", "sluice_ambiguous_paths_total", R"(treatment="judged_strictest")"},
    {"response_errors", "sluice_framing_errors_total", R"(stream="response")"},
    {"answers_sent", "sluice_answers_total", R"(outcome="sent_closing")"},
    {"answers_resent", "sluice_answers_total", R"(outcome="resent")"},
    {"answers_lost", "sluice_answers_total", R"(outcome="lost")"},
    {"answers_abandoned", "sluice_answers_total", R"(outcome="abandoned")"},
    {"answers_kept_open", "sluice_answers_total", R"(outcome="sent_kept_open")"},
    {"kept_answers_resent", "sluice_answers_total", R"(outcome="kept_open_resent")"},
    {"retransmits", "sluice_client_segments_total", R"(treatment="retransmit_uncharged")"},
    {"overlaps_trimmed", "sluice_client_segments_total", R"(treatment="overlap_trimmed")"},
    {"urgent_cleared", "sluice_client_segments_total", R"(treatment="urgent_cleared")"},
    {"repeats_rewritten", "sluice_client_segments_total", R"(treatment="repeat_rewritten")"},
    {"repeats_dropped", "sluice_frames_dropped_total", R"(reason="repeat_unrecorded")"},
    {"out_of_order", "sluice_frames_dropped_total", R"(reason="out_of_order")"},
    {"backpressure", "sluice_client_segments_total", R"(treatment="backpressure")"},
    {"contexts_exhausted", "sluice_frames_dropped_total", R"(reason="no_context")"},
    {"deadline_head", "sluice_deadlines_total", R"(phase="head")"},
    {"deadline_first_head", "sluice_deadlines_total", R"(phase="first_head")"},
    {"deadline_body", "sluice_deadlines_total", R"(phase="body")"},
    {"deadline_keep_alive", "sluice_deadlines_total", R"(phase="keep_alive")"},
    {"deadline_response", "sluice_deadlines_total", R"(phase="response")"},
    {"syn_cookies_sent", "sluice_syn_cookies_total", R"(outcome="sent")"},
    {"syn_cookies_validated", "sluice_syn_cookies_total", R"(outcome="validated")"},
    {"syn_cookies_failed", "sluice_syn_cookies_total", R"(outcome="failed")"},
    {"syn_cookie_early_data", "sluice_syn_cookies_total", R"(outcome="early_data")"},
    {"syn_proxy_bound", "sluice_syn_proxy_handshakes_total", R"(outcome="bound")"},
    {"syn_proxy_unbound", "sluice_syn_proxy_handshakes_total", R"(outcome="unbound")"},
    {"unbound_answers", "sluice_unbound_answers_total", ""},
    {"bind_stash_exhausted", "sluice_syn_proxy_handshakes_total", R"(outcome="bound_no_stash")"},
    {"syn_proxy_refused", "sluice_syn_proxy_handshakes_total", R"(outcome="origin_refused")"},
    {"syn_proxy_mismatch", "sluice_syn_proxy_handshakes_total", R"(outcome="option_mismatch")"},
    {"share_flows_refused", "sluice_frames_dropped_total", R"(reason="client_flow_share")"},
    {"share_contexts_refused", "sluice_frames_dropped_total", R"(reason="client_context_share")"},
    {"evicted_slow_head", "sluice_evictions_total", R"(victim="slow_head")"},
    {"evicted_stalled_body", "sluice_evictions_total", R"(victim="stalled_body")"},
    {"evicted_slow_reader", "sluice_evictions_total", R"(victim="slow_reader")"},
    {"evicted_idle_context", "sluice_evictions_total", R"(victim="idle_context")"},
    {"evicted_half_open", "sluice_evictions_total", R"(victim="half_open_flow")"},
    {"evicted_idle_flow", "sluice_evictions_total", R"(victim="idle_flow")"},
    {"evicted_over", "sluice_evictions_total", R"(victim="over_budget_flow")"},
    {"pass_through", "sluice_flows_total", R"(event="pass_through")"},
    {"fields_inserted", "sluice_response_fields_total", R"(outcome="inserted")"},
    {"fields_skipped", "sluice_response_fields_total", R"(outcome="skipped")"},
    {"usage_reported", "sluice_usage_reports_total", ""},
    {"penalty_boxed", "sluice_penalty_total", R"(event="boxed")"},
    {"penalty_refused", "sluice_penalty_total", R"(event="refused_boxed")"},
    {"penalty_log_dropped", "sluice_penalty_total", R"(event="log_dropped")"},
    {"in_flight_refused", "sluice_concurrency_refusals_total", ""},
    {"delayed", "sluice_delayed_requests_total", R"(mode="enforce")"},
    {"delay_us_total", "sluice_delay_seconds_total", "", nullptr, true},
    {"delay_full", "sluice_delay_full_total", ""},
    {"delay_shadowed", "sluice_delayed_requests_total", R"(mode="shadow")"},
    {"proxy_headers", "sluice_proxy_protocol_total", R"(outcome="read")"},
    {"proxy_untrusted", "sluice_proxy_protocol_total", R"(outcome="untrusted_peer")"},
    {"proxy_missing", "sluice_proxy_protocol_total", R"(outcome="missing")"},
    {"proxy_malformed", "sluice_proxy_protocol_total", R"(outcome="malformed")"},
    {"proxy_not_adopted", "sluice_proxy_protocol_total", R"(outcome="not_adopted")"},
};

// The counters themselves, in the X-macro's order: kCounterExposition[i]
// describes kCounterMembers[i].
inline constexpr Counter WorkerCounters::*kCounterMembers[] = {
#define SLUICE_COUNTER_MEMBER(name, help) &WorkerCounters::name,
    SLUICE_WORKER_COUNTERS(SLUICE_COUNTER_MEMBER)
#undef SLUICE_COUNTER_MEMBER
};

namespace detail {
inline constexpr std::string_view kCounterNames[] = {
#define SLUICE_COUNTER_NAME(name, help) #name,
    SLUICE_WORKER_COUNTERS(SLUICE_COUNTER_NAME)
#undef SLUICE_COUNTER_NAME
};

constexpr bool every_counter_has_its_row() {
  if (std::size(kCounterExposition) != std::size(kCounterNames)) return false;
  for (size_t i = 0; i < std::size(kCounterNames); ++i) {
    if (kCounterExposition[i].counter != kCounterNames[i]) return false;
  }
  return true;
}
}  // namespace detail

static_assert(detail::every_counter_has_its_row(),
              "every SLUICE_WORKER_COUNTERS counter needs its row in kCounterExposition, in the same order");

}  // namespace sluice::dataplane

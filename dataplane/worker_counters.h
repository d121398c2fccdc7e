// Per-worker counters: the totals, the same per rule, and the worker's
// busiest keys. Each worker writes only its own (a load and a store, never a
// shared read-modify-write), the control plane reads them all and adds them
// up, so counting costs the hot path no cache-line ping-pong.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

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
  X(service_frames, "TCP frames of service-port flows handled")                                \
  X(handed_off, "frames passed to the worker that owns their flow")                           \
  X(handoff_dropped, "frames dropped because the owner's hand-off ring was full")             \
  X(fragments_dropped, "first fragments of service-port segments dropped")                     \
  X(flows_created, "flows whose SYN was seen")                                                 \
  X(flows_established, "flows whose handshake was seen both ways")                             \
  X(flows_expired, "flows removed by timeout")                                                 \
  X(flow_table_full, "SYNs dropped because the flow table was full")                           \
  X(untracked_reset, "client payload on a flow the appliance does not track: both ends reset") \
  X(flows_adopted, "connections the appliance did not know (begun before a restart, or expired) adopted at a request head") \
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
  X(evicted_idle_context, "contexts taken back from a connection idle for over 1 s: closed")    \
  X(evicted_half_open, "half-open flows forgotten to make room for a new one")                  \
  X(evicted_idle_flow, "connections idle (or silent) for over 1 s closed to make room for a new one") \
  X(evicted_over, "flows already over forgotten early to make room for a new one")             \
  X(pass_through, "flows switched to pass-through (Upgrade, CONNECT)")                          \
  X(fields_inserted, "admitted responses given their rate-limit fields (TB16)")                 \
  X(fields_skipped, "admitted responses left without fields (too long, or 32 edits in flight)")  \
  X(usage_reported, "responses whose reported tokens were charged to their minute (DQ05)")

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
  std::atomic<uint64_t> flows_unbound{0};         // the same: of those, not yet bound to their origin (delayed binding)
  // The oldest policy generation this worker may still read (requests parsed
  // under a policy since replaced); the control plane frees older snapshots.
  // Set once per loop pass; 0 until the worker has looked at all its contexts.
  std::atomic<uint64_t> oldest_policy_generation{0};
  std::array<RuleCounters, kRuleCounters> rules;  // by CompiledRule::counter_slot
  BusyKeys busy;                                  // every refusal, one admission in 16 (see FlowEngine)
};

}  // namespace sluice::dataplane

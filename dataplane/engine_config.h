// What a worker's flow engine is sized and keyed with: the pools per
// worker, each client's share of them, the secrets drawn at start, and the
// few switches that change what the engine writes. Filled from sluiced's
// options (src/sluiced_options.cpp); read once, at construction.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "bind_stash.h"
#include "client_shares.h"
#include "edit_hold.h"
#include "flow_carry.h"
#include "flow_table.h"
#include "limiter/spend_log.h"
#include "penalty_log.h"
#include "refusal_sampler.h"

namespace sluice::dataplane {

struct EngineConfig {
  size_t flows = 65536;                 // per worker
  size_t contexts = 2048;               // per worker
  size_t edit_holds = 8192;             // per worker: flows between requests with fields unacknowledged (edit_hold.h)
  size_t answer_bytes = 8u << 20;       // answers kept for retransmitted refused requests, per worker
  // Flows that may wait unbound for their first forwarded request at once
  // (delayed binding; bind_stash.h: a head limit and 32 KiB each, committed
  // as used). With none free a new flow is bound as its handshake completes.
  size_t bind_stashes = 256;             // per worker
  // Requests a worker may hold at once for their rule's delay (delay_queue.h);
  // each keeps its context meanwhile.
  size_t delay_slots = 256;              // per worker
  uint32_t max_head_bytes = 64 * 1024;  // context buffers; a policy may ask less, never more
  uint16_t max_fields = 128;
  FlowTimeouts timeouts;
  // The flow table's memory and the worker's work mark, in the flow file
  // (control/flow_file.h), so that flows outlive the process; none: the
  // engine's own (tests, benchmarks).
  FlowSlots flow_memory{};
  WorkMark* mark = nullptr;
  // Where the worker copies a flow before it changes it (change_undo.h), in
  // the flow file too; none: the engine's own.
  UndoArea undo{};
  // Where the parse contexts themselves (contexts * ContextPool::object_stride()
  // bytes; their buffers stay the worker's) and the edit holds live, in the
  // flow file too, so that a restart carries on a connection inside a
  // request or response; none: the engine's own.
  std::span<std::byte> context_memory{};
  std::span<EditHold> hold_memory{};
  // The contexts' held-head buffers (contexts * ContextPool::head_stride(
  // max_head_bytes) bytes), in the flow file too: a head held across
  // segments was acknowledged to its client, and exists nowhere else.
  std::span<char> head_memory{};
  // The bind stashes' buffers (bind_stashes * BindStash::buffer_bytes(
  // max_head_bytes) bytes) and slots, in the flow file too: a flow being
  // bound to its origin at a kill carries on with what it stashed.
  std::span<uint8_t> stash_memory{};
  std::span<StashSlot> stash_slots{};
  // The contexts' other buffers (ContextPool::arena_bytes), faulted in
  // beforehand (sluiced makes it while DPDK starts); none: the pool's own.
  std::span<std::byte> context_arena{};
  // The answer store's ring (AnswerStore::ring_size(answer_bytes) bytes) and
  // its count of bytes written, in the flow file too, so that an answer a
  // client may ask for again outlives the process; none: the engine's own.
  std::span<std::byte> answer_memory{};
  uint64_t* answers_written = nullptr;
  // Each client address's share (IPv6: its /64) of the flows and contexts
  // (client_shares.h); 0: a sixteenth of each.
  uint32_t flows_per_client = 0;
  uint32_t contexts_per_client = 0;
  // Keys the shares' hash, so that clients cannot be chosen to collide:
  // secret, drawn at start.
  uint64_t share_seed = 0;
  // Keys the SYN cookies (syn_proxy.h): secret, drawn at start, the same
  // for every worker.
  std::array<uint8_t, 32> cookie_seed{};
  // Admitted responses get the rate-limit fields of their request's decision
  // (TB16), inserted after the status line; the flow's sequence numbers are
  // then shifted for the rest of its life (seqadj: dataplane/README.md).
  bool insert_fields = true;
  // This worker's record of what it admits on `scope: cluster`
  // buckets, which the cluster sync turns over (none: no cluster buckets).
  limiter::SpendLog* spends = nullptr;
  // Where refusals are offered for the audit log (none: not
  // offered); the worker owns it.
  RefusalSampler* refusals = nullptr;
  // Where the keys it boxes are handed to the control thread (none: not
  // handed); the worker owns it.
  PenaltyLog* penalties = nullptr;
};

// Each client's share of the pools `c` sizes: what it sets, else the default.
[[nodiscard]] inline ShareCaps share_caps(const EngineConfig& c) noexcept {
  ShareCaps caps = default_share_caps(c.flows, c.contexts);
  if (c.flows_per_client != 0) caps.flows = c.flows_per_client;
  if (c.contexts_per_client != 0) caps.contexts = c.contexts_per_client;
  return caps;
}

}  // namespace sluice::dataplane

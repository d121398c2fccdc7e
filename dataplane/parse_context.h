// The parser state and buffers a flow borrows while a request or response is
// in flight: the request stream with its field store and spill, a buffer for
// a head split across segments, the response framer, and the answer of a
// refused request (kept to send again if the client retransmits). A worker
// has a fixed pool of them; a keep-alive connection between requests holds
// none, so thousands of idle connections cost ~200 bytes each.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <utility>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <vector>

#include "http/http1_policy.h"
#include "http/request_stream.h"
#include "http/response_stream.h"
#include "time/clock.h"
#include "dataplane/flow_key.h"
#include "dataplane/judged_bytes.h"
#include "dataplane/populated_memory.h"
#include "dataplane/seq_shift.h"
#include "limiter/decide.h"

namespace sluice::dataplane {

inline constexpr size_t kMaxAnswerBytes = 4096;  // http::kMaxAnswerBytes
// Rate-limit fields inserted into one response: the most any policy's
// rule may render (a policy whose fields could take more is refused).
inline constexpr size_t kMaxInsertedFields = limiter::RateLimitFields::kMaxText;
static_assert(kMaxInsertedFields == UINT8_MAX,
              "FieldText::len is one byte, and any value it holds names bytes of the buffer (a carried context's too)");

// Text kept for one response or one edit, without allocation.
struct FieldText {
  uint8_t len = 0;
  char bytes[kMaxInsertedFields];
  [[nodiscard]] std::string_view view() const noexcept { return {bytes, len}; }
  // Copies only the bytes in use (a whole FieldText is 161 bytes).
  void assign(std::string_view text) noexcept {
    len = text.size() <= sizeof bytes ? static_cast<uint8_t>(text.size()) : 0;
    if (len != 0) std::memcpy(bytes, text.data(), len);  // an empty view may have no data()
  }
};

// A stream built in place again for each policy (it holds references into
// the policy, so it cannot be assigned). Not std::optional: a restart reads
// a dead process's context (ParseContext::carry_on), and whether an
// optional holds a value is a bool whose byte a crash may have left as
// anything; here it is a pointer, which any bytes are.
template <class T>
class InPlace {
 public:
  InPlace() = default;
  ~InPlace() { reset(); }
  InPlace(const InPlace&) = delete;
  InPlace& operator=(const InPlace&) = delete;

  template <class... Args>
  T& emplace(Args&&... args) noexcept {
    reset();
    value_ = new (bytes_) T(std::forward<Args>(args)...);
    return *value_;
  }
  void reset() noexcept {
    if (value_ != nullptr) value_->~T();
    value_ = nullptr;
  }
  [[nodiscard]] bool has_value() const noexcept { return value_ != nullptr; }
  [[nodiscard]] T* operator->() noexcept { return value_; }
  [[nodiscard]] const T* operator->() const noexcept { return value_; }
  [[nodiscard]] T& operator*() noexcept { return *value_; }
  [[nodiscard]] const T& operator*() const noexcept { return *value_; }
  // The object in its place, for a dead process's copy, whose pointer names
  // that process's memory.
  [[nodiscard]] const T& in_place() const noexcept { return *std::launder(reinterpret_cast<const T*>(bytes_)); }

 private:
  alignas(T) std::byte bytes_[sizeof(T)];
  T* value_ = nullptr;
};

// The buffers a context parses in, laid out by its pool (max_fields field
// lines; max_head_bytes of spill; max_head_bytes + 1 each for a held head
// and the judged bytes).
struct ParseBuffers {
  http::FieldLine* fields;
  char* spill;
  char* head;
  char* judged;
};

struct ParseContext {
  ParseContext(const ParseBuffers& buffers, uint32_t max_head_bytes, uint16_t max_fields) noexcept;

  // Ready for a new flow (or the next message of an idle one) under `policy`,
  // the policy of snapshot `generation`.
  void start(const http::Http1Policy& policy, uint64_t generation) noexcept;
  // Between two messages of a flow: the request stream rebuilt for another
  // policy, the response stream (requests still unanswered) kept.
  void renew_requests(const http::Http1Policy& policy, uint64_t generation) noexcept;

  // On a context just started: goes on where `dead` stood, a context of
  // the same layout that another process left in memory (a restart that
  // carries its connection on). Everything it kept in its own fields comes
  // over, its pointers and buffers do not. A head held across segments
  // comes over only as `held_head`, the bytes of dead's held-head buffer
  // (which lives in the flow file): they are copied and fed again to the
  // fresh request stream, which must stop where the dead one did, short of
  // the head's end. One that refers to answers in the worker's answer store
  // (kept or spliced in) only if `answers` (this worker has that store);
  // judged bytes the origin has not acknowledged are let go of
  // (JudgedBytes::carry_on). False if it cannot, or anything in it is not a
  // value this code writes; the context is then to be given back unused.
  [[nodiscard]] bool carry_on(const ParseContext& dead, bool answers, std::span<const char> held_head = {}) noexcept;
  // Copies what is in use of this context into `image` (object_stride()
  // bytes), each part at its own offset: everything carry_on() reads of a
  // dead context (the rings' live slots, the pending edits, the answer's
  // length of bytes), nothing it does not (a ring's free slots, the rest of
  // the answer buffer). About 3 KB where a request is outstanding, of 18.
  void save_live(std::byte* image) const noexcept;

  http::FieldLine* field_store;
  size_t field_capacity;
  char* spill;
  char* head;  // a head split across segments, copied whole
  size_t head_capacity;
  size_t head_len = 0;
  bool buffering = false;  // the current head is being fed from `head`
  // The flow that borrowed the context (its key and hash find it again).
  FlowKey owner{};
  uint64_t owner_hash = 0;
  time::Nanos head_since = 0;  // while buffering: when the head's first byte arrived (its deadline's start)
  bool held_ack_owed = false;  // the held bytes' acknowledgement waits for the origin's of those before them
  // A head admitted late (a rule's delay): whole in `head` (head_len bytes
  // from client.held_seq), acknowledged to the client, parsing paused
  // behind it, and released to the origin at this time (0: none). The
  // client's acknowledgement and window of the segment that completed it
  // go on the released segments.
  time::Nanos delayed_until = 0;
  uint32_t delay_ack = 0;
  uint16_t delay_window = 0;
  // Whether `head` holds bytes acknowledged to the client that the origin
  // has not had: a head split across segments, or one delayed.
  [[nodiscard]] bool holds_head() const noexcept { return buffering || delayed_until != 0; }
  // The heads and chunked bodies forwarded since the flow borrowed the
  // context, until the origin acknowledges them (a repeat of their bytes
  // carries the judged ones).
  JudgedBytes judged;
  bool judging_body = false;  // the current request's chunked body goes into `judged` as it comes

  InPlace<http::RequestStream> requests;
  // The policy `requests` was built for, and its snapshot's generation: the
  // pointer alone could name a freed snapshot's successor at the same address.
  const http::Http1Policy* policy = nullptr;
  uint64_t generation = 0;
  http::ResponseStream responses;

  // The positions in the rings below and the request counts, side by side:
  // every request reads or moves them (the rings' slots are far apart).
  uint8_t response_fields_front = 0;
  uint8_t response_fields_count = 0;
  uint8_t usage_front = 0;
  uint8_t usage_count = 0;
  uint8_t kept_front = 0;
  uint8_t kept_count = 0;
  bool absorbing = false;           // the last refused request's body is still arriving (keep-alive answers)
  uint32_t requests_forwarded = 0;  // requests whose responses are expected, since start()
  uint32_t responses_ended = 0;     // final responses framed, since start()

  // The fields each outstanding request's response is to get (empty for
  // requests that get none), in request order: pushed when a request is
  // forwarded, taken at its final response's status line.
  std::array<limiter::RateLimitFields, http::ResponseStream::kMaxOutstanding> response_fields;
  void push_response_fields(const limiter::RateLimitFields& fields) noexcept;
  // nullptr if none is queued
  [[nodiscard]] const limiter::RateLimitFields* take_response_fields() noexcept;

  // Where each outstanding request's tokens are charged when its response
  // reports them (DQ05), in request order: pushed when a request is
  // forwarded, taken when its response ends.
  struct UsageNote {
    limiter::BucketKey key{};
    limiter::Calendar calendar{};  // the window's span and offset
    // A rule's in-flight slot the request holds until its response ends
    // (or the context is given back): limiter/in_flight.h.
    limiter::BucketKey in_flight_key{};
    bool charge = false;
    bool shared = false;  // a cluster window's
    bool holds_in_flight = false;
  };
  std::array<UsageNote, http::ResponseStream::kMaxOutstanding> usage_notes;
  void push_usage(const limiter::Decision& d) noexcept;
  [[nodiscard]] const UsageNote* take_usage() noexcept;  // nullptr if none is queued

  // The origin-to-client stream as edited so far, and the bytes of each
  // pending edit (kept to rewrite a retransmission identically), in the
  // order of to_client's edits: rate-limit fields, copied here, or a kept
  // answer, which lives in the worker's AnswerStore.
  struct EditBytes {
    FieldText fields;
    uint64_t answer_pos = 0;
    uint16_t answer_len = 0;  // 0: the edit inserts `fields`
  };
  SeqShift to_client;
  std::array<EditBytes, SeqShift::kMaxEdits> edit_bytes;
  // Drops the bytes of edits the client has acknowledged (folded away), and
  // the kept answers it now has whole.
  void acknowledged_by_client(uint32_t client_ack) noexcept;

  // Answers that keep the connection open (policy after_answer: keep-alive).
  // A refused request's bytes are cut out of the client-to-origin stream
  // (to_origin's removals; the origin never sees them) and its answer is
  // spliced into the origin-to-client stream after the responses of the
  // requests forwarded before it. Until the client has the whole answer, the
  // refused request stays unacknowledged towards the client (the cap of
  // ack_cap()), so a lost answer comes back when the client sends the
  // request again.
  SeqShift to_origin;
  struct KeptAnswer {
    uint32_t from = 0;    // client sequence numbers of the refused request: [from, to)
    uint32_t to = 0;
    uint32_t after = 0;   // goes out once this many responses have ended
    uint64_t pos = 0;     // the answer in the AnswerStore
    uint16_t len = 0;
    bool sent = false;
    uint32_t client_end = 0;  // once sent: its end in the client's numbers of the origin's stream
  };
  std::array<KeptAnswer, http::ResponseStream::kMaxOutstanding> kept;
  [[nodiscard]] KeptAnswer& kept_at(unsigned i) noexcept { return kept[(kept_front + i) % kept.size()]; }
  [[nodiscard]] bool push_kept(const KeptAnswer& a) noexcept;  // false when full
  // Whether a client acknowledgement up to the oldest unacknowledged kept
  // answer's request is all the client may get, and where that is.
  [[nodiscard]] bool ack_cap(uint32_t& cap) const noexcept {
    if (kept_count == 0) return false;
    cap = kept[kept_front].from;
    return true;
  }
  // Kept answers not yet spliced in (each needs room for an edit of to_client).
  [[nodiscard]] unsigned kept_unsent() const noexcept;
  // How many more refusals the edits can keep open: each takes a kept
  // answer, a removal in to_origin and an insertion in to_client.
  [[nodiscard]] unsigned kept_open_room() const noexcept;
  // Where the last removal from the client's stream ends (a new one may not
  // start before it), if there is one pending.
  [[nodiscard]] bool last_removal_end(uint32_t& end) const noexcept {
    if (to_origin.pending() == 0) return false;
    const SeqShift::Edit& last = to_origin.edit(to_origin.pending() - 1);
    end = last.at + last.removed;
    return true;
  }

  // The answer of a request refused on a connection that closes, until it
  // goes to the AnswerStore (last: 4 KiB most requests never touch).
  uint16_t answer_len = 0;
  char answer[kMaxAnswerBytes];
};

// The contexts and their buffers live in one arena (populated_memory.h):
// 2048 contexts as separate allocations took 440 ms of a restart's
// start-up on this VM, in page faults; in the arena about 100.
class ContextPool {
 public:
  // Throws std::bad_alloc if the arena cannot be mapped. `objects`, if it
  // holds count * object_stride() bytes (64-byte aligned), is where the
  // contexts themselves go (the flow file's, so that a restart can carry
  // them on); `heads`, if it holds count * head_stride(max_head_bytes)
  // bytes, is where their held-head buffers go (the flow file's too: the
  // part of a head that was acknowledged to the client and is not yet the
  // origin's exists nowhere else). Their other buffers are in the arena:
  // `arena` if it holds arena_bytes() for these (64-byte aligned, zero:
  // a PopulatedMemory made beforehand, while DPDK starts), else one of its
  // own.
  ContextPool(size_t count, uint32_t max_head_bytes, uint16_t max_fields, std::span<std::byte> objects = {},
              std::span<char> heads = {}, std::span<std::byte> arena = {});
  // The arena `count` contexts need, their objects and held heads given
  // (`own_objects`, `own_heads`: in the arena instead).
  [[nodiscard]] static size_t arena_bytes(size_t count, uint32_t max_head_bytes, uint16_t max_fields,
                                          bool own_objects, bool own_heads) noexcept;
  // Bytes per context in `objects`.
  [[nodiscard]] static size_t object_stride() noexcept;
  // Bytes per context in `heads`: a held head's buffer, 64-byte aligned.
  [[nodiscard]] static size_t head_stride(uint32_t max_head_bytes) noexcept;
  ~ContextPool();
  ContextPool(const ContextPool&) = delete;
  ContextPool& operator=(const ContextPool&) = delete;

  // The index of a free context, or -1.
  [[nodiscard]] int32_t acquire() noexcept;
  // Starts an acquired context under a policy (ParseContext::start) and
  // notes which snapshot it holds on to.
  void start(int32_t index, const http::Http1Policy& policy, uint64_t generation) noexcept;
  // ParseContext::renew_requests, noting the new generation.
  void renew_requests(int32_t index, const http::Http1Policy& policy, uint64_t generation) noexcept;
  void release(int32_t index) noexcept;

  // The oldest policy generation a held context may still refer to, for the
  // control plane, which frees a retired snapshot only once no worker reports
  // one that old. Looks at `step` contexts per call (a full cycle over the
  // pool takes size()/step calls) and returns the bound of the last full
  // cycle: the lowest generation among the held contexts it saw and the
  // generations the caller passed during the cycle (a context started in the
  // middle of a cycle is started under one of those). `pass_generation` is
  // the generation of the snapshot the caller's loop pass uses.
  [[nodiscard]] uint64_t oldest_generation(uint64_t pass_generation, size_t step) noexcept;
  [[nodiscard]] ParseContext& at(int32_t index) noexcept { return *contexts_[static_cast<size_t>(index)]; }
  [[nodiscard]] const ParseContext& at(int32_t index) const noexcept { return *contexts_[static_cast<size_t>(index)]; }
  // Each context's share of the arena (the context and its buffers).
  [[nodiscard]] size_t stride() const noexcept { return stride_; }
  [[nodiscard]] size_t free_count() const noexcept { return free_.size(); }
  // Whether context `index` is lent to a flow.
  [[nodiscard]] bool held(size_t index) const noexcept { return held_generation_[index] != kNotHeld; }
  [[nodiscard]] size_t size() const noexcept { return contexts_.size(); }
  [[nodiscard]] uint32_t max_head_bytes() const noexcept { return max_head_bytes_; }

 private:
  std::optional<PopulatedMemory> own_arena_;  // when none is given
  std::span<std::byte> arena_;
  size_t stride_ = 0;
  std::vector<ParseContext*> contexts_;  // into the arena
  std::vector<int32_t> free_;  // reserved at construction: push and pop never allocate
  // Per context, the generation it was started under, kNotHeld when free:
  // packed, so scanning it costs a cache line per eight contexts.
  static constexpr uint64_t kNotHeld = ~uint64_t{0};
  std::vector<uint64_t> held_generation_;
  size_t scan_next_ = 0;
  uint64_t cycle_min_ = kNotHeld;
  uint64_t oldest_ = 0;  // nothing is known before the first full cycle
  uint32_t max_head_bytes_;
};

}  // namespace sluice::dataplane

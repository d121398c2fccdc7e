// Allocated once at start, reused for the life of the worker.
#include "parse_context.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <utility>

#include "http/carried_bytes.h"

#if defined(__SANITIZE_ADDRESS__)
#define SLUICE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SLUICE_ASAN 1
#endif
#endif
#ifdef SLUICE_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace sluice::dataplane {

ParseContext::ParseContext(const ParseBuffers& b, uint32_t max_head_bytes, uint16_t max_fields) noexcept
    : field_store(b.fields),
      field_capacity(max_fields),
      spill(b.spill),
      head(b.head),
      head_capacity(max_head_bytes + 1),
      judged(std::span<char>(b.judged, max_head_bytes + 1)) {}

void ParseContext::start(const http::Http1Policy& p, uint64_t g) noexcept {
  head_len = 0;
  buffering = false;
  held_ack_owed = false;
  delayed_until = 0;
  judging_body = false;
  answer_len = 0;
  responses.reset();
  response_fields_front = response_fields_count = 0;
  usage_front = usage_count = 0;
  absorbing = false;
  requests_forwarded = responses_ended = 0;
  kept_front = kept_count = 0;
  if (policy == &p && generation == g) {
    requests->reset();
    return;
  }
  renew_requests(p, g);
}

void ParseContext::renew_requests(const http::Http1Policy& p, uint64_t g) noexcept {
  policy = &p;
  generation = g;
  // The response stream keeps a view of the policy's usage field name.
  responses.set_usage_field(p.usage_field);
  const size_t fields = p.stream.head.max_fields < field_capacity ? p.stream.head.max_fields : field_capacity;
  const size_t spill_bytes =
      p.stream.head.max_head_bytes < head_capacity - 1 ? p.stream.head.max_head_bytes : head_capacity - 1;
  requests.reset();
  requests.emplace(p.fields, p.stream, std::span<http::FieldLine>(field_store, fields),
                   std::span<char>(spill, spill_bytes));
}

bool ParseContext::carry_on(const ParseContext& dead, bool answers, std::span<const char> held_head) noexcept {
  // A context a start() ran on has its request stream (and its policy
  // noted); the bools are checked as bytes before any is read. A held head
  // must have come along whole, and fit this context's buffer.
  if (dead.policy == nullptr ||
      !http::all_bool_bytes({&dead.buffering, &dead.held_ack_owed, &dead.judging_body, &dead.absorbing}) ||
      (dead.buffering && dead.delayed_until != 0) ||
      (dead.holds_head() ? dead.head_len == 0 || dead.head_len != held_head.size() || dead.head_len > head_capacity
                         : dead.head_len != 0) ||
      dead.answer_len > sizeof answer || dead.kept_count > kept.size()) {
    return false;
  }
  if (!answers && (dead.answer_len != 0 || dead.kept_count != 0)) return false;
  if (dead.response_fields_front >= response_fields.size() || dead.response_fields_count > response_fields.size() ||
      dead.usage_front >= usage_notes.size() || dead.usage_count > usage_notes.size() ||
      dead.kept_front >= kept.size() || !dead.to_client.valid() || !dead.to_origin.valid()) {
    return false;
  }
  for (unsigned i = 0; i < dead.to_client.pending(); ++i) {
    const EditBytes& e = dead.edit_bytes[i];
    // (A FieldText's length byte cannot name more than its buffer: parse_context.h.)
    if ((e.answer_len != 0 && !answers) || e.answer_len > kMaxAnswerBytes) {
      return false;
    }
  }
  for (unsigned i = 0; i < dead.kept_count; ++i) {
    const KeptAnswer& k = dead.kept[(dead.kept_front + i) % kept.size()];
    if (!http::is_bool_byte(k.sent) || k.len > kMaxAnswerBytes) return false;
  }
  for (unsigned i = 0; i < dead.response_fields_count; ++i) {
    const limiter::RateLimitFields& f = dead.response_fields[(dead.response_fields_front + i) % response_fields.size()];
    if (f.name_len > sizeof f.name || static_cast<uint8_t>(f.style) > static_cast<uint8_t>(policy::HeaderStyle::kIetf) ||
        f.more > f.others.size() || !http::is_bool_byte(f.concurrent)) {
      return false;
    }
    for (unsigned j = 0; j < f.more; ++j) {
      if (f.others[j].name_at + f.others[j].name_len > sizeof f.other_names) return false;
    }
  }
  for (unsigned i = 0; i < dead.usage_count; ++i) {
    const UsageNote& n = dead.usage_notes[(dead.usage_front + i) % usage_notes.size()];
    if (!http::all_bool_bytes({&n.charge, &n.shared, &n.holds_in_flight}) || !n.calendar.valid()) return false;
  }
  // Between segments a head in progress is always held (RequestPath); one
  // that is not names bytes nobody kept.
  if (!dead.buffering && dead.requests.in_place().head_in_progress()) return false;
  if (!requests->carry_on(dead.requests.in_place()) || !responses.carry_on(dead.responses) ||
      !judged.carry_on(dead.judged)) {
    return false;
  }
  if (dead.buffering) {
    // The held bytes are fed again, as RequestPath does with every held
    // head: the fresh stream must read them as the dead one did, a head
    // begun and not yet ended. Anything else (a head this policy ends or
    // refuses, a stream that was not at a head) is not where the dead
    // process stood.
    if (!requests->idle()) return false;
    std::memcpy(head, held_head.data(), held_head.size());
    const http::StreamStep st = requests->next({head, held_head.size()});
    if (st.event != http::StreamEvent::kNeedMore || !requests->head_in_progress()) return false;
    head_len = held_head.size();
    buffering = true;
  } else if (dead.delayed_until != 0) {
    // A delayed head was decided and charged: its bytes come over as they
    // are, to be released when its time comes (the stream is past it).
    std::memcpy(head, held_head.data(), held_head.size());
    head_len = held_head.size();
    delayed_until = dead.delayed_until;
    delay_ack = dead.delay_ack;
    delay_window = dead.delay_window;
  }
  head_since = dead.head_since;
  held_ack_owed = dead.held_ack_owed;
  judging_body = dead.judging_body;
  absorbing = dead.absorbing;
  requests_forwarded = dead.requests_forwarded;
  responses_ended = dead.responses_ended;
  // The rings whole, byte by byte: slots not in use are never read before
  // they are written again.
  response_fields_front = dead.response_fields_front;
  response_fields_count = dead.response_fields_count;
  http::copy_bytes(response_fields, dead.response_fields);
  usage_front = dead.usage_front;
  usage_count = dead.usage_count;
  http::copy_bytes(usage_notes, dead.usage_notes);
  http::copy_bytes(to_client, dead.to_client);
  http::copy_bytes(to_origin, dead.to_origin);
  for (unsigned i = 0; i < dead.to_client.pending(); ++i) {
    edit_bytes[i].fields.assign(dead.edit_bytes[i].fields.view());
    edit_bytes[i].answer_pos = dead.edit_bytes[i].answer_pos;
    edit_bytes[i].answer_len = dead.edit_bytes[i].answer_len;
  }
  kept_front = dead.kept_front;
  kept_count = dead.kept_count;
  http::copy_bytes(kept, dead.kept);
  answer_len = dead.answer_len;
  std::memcpy(answer, dead.answer, answer_len);
  return true;
}

void ParseContext::save_live(std::byte* image) const noexcept {
  const auto* self = reinterpret_cast<const std::byte*>(this);
  const auto put = [&](const void* part, size_t n) noexcept {
    const auto* from = static_cast<const std::byte*>(part);
    std::memcpy(image + (from - self), from, n);
  };
  const auto at = [self](const void* part) noexcept {
    return static_cast<size_t>(static_cast<const std::byte*>(part) - self);
  };
  // Everything before the rings: the scalars, the judged record, both streams.
  put(self, at(&response_fields));
  for (unsigned i = 0; i < response_fields_count; ++i) {
    put(&response_fields[(response_fields_front + i) % response_fields.size()], sizeof(limiter::RateLimitFields));
  }
  for (unsigned i = 0; i < usage_count; ++i) put(&usage_notes[(usage_front + i) % usage_notes.size()], sizeof(UsageNote));
  put(&to_client, to_client.live_bytes());
  put(edit_bytes.data(), to_client.pending() * sizeof(EditBytes));
  put(&to_origin, to_origin.live_bytes());
  for (unsigned i = 0; i < kept_count; ++i) put(&kept[(kept_front + i) % kept.size()], sizeof(KeptAnswer));
  put(&answer_len, at(answer) - at(&answer_len) + answer_len);
}

void ParseContext::push_response_fields(const limiter::RateLimitFields& fields) noexcept {
  if (response_fields_count == response_fields.size()) return;  // expect() refuses first
  limiter::RateLimitFields& to = response_fields[(response_fields_front + response_fields_count) % response_fields.size()];
  // The name only where the style has one: most of the 96 bytes stay untouched.
  to.style = fields.style;
  to.limit = fields.limit;
  to.remaining = fields.remaining;
  to.reset = fields.reset;
  to.window = fields.window;
  to.name_len = fields.name_len;
  if (fields.name_len != 0) std::memcpy(to.name, fields.name, fields.name_len);
  // A layered rule's other budgets, likewise only as far as they go.
  to.more = fields.more;
  to.concurrent = fields.concurrent;
  if (fields.more != 0) [[unlikely]] {
    std::memcpy(to.others.data(), fields.others.data(), fields.more * sizeof fields.others[0]);
    const auto& last = fields.others[fields.more - 1];
    std::memcpy(to.other_names, fields.other_names, last.name_at + last.name_len);
  }
  ++response_fields_count;
}

const limiter::RateLimitFields* ParseContext::take_response_fields() noexcept {
  if (response_fields_count == 0) return nullptr;
  const limiter::RateLimitFields* t = &response_fields[response_fields_front];
  response_fields_front = static_cast<uint8_t>((response_fields_front + 1) % response_fields.size());
  --response_fields_count;
  return t;
}

void ParseContext::push_usage(const limiter::Decision& d) noexcept {
  if (usage_count == usage_notes.size()) return;  // expect() refuses first
  UsageNote& n = usage_notes[(usage_front + usage_count) % usage_notes.size()];
  n.charge = d.has_usage_key;
  n.key = d.usage_key;
  n.calendar = d.usage_calendar;
  n.holds_in_flight = d.holds_in_flight;
  n.in_flight_key = d.in_flight_key;
  n.shared = d.usage_shared;
  ++usage_count;
}

const ParseContext::UsageNote* ParseContext::take_usage() noexcept {
  if (usage_count == 0) return nullptr;
  const UsageNote* n = &usage_notes[usage_front];
  usage_front = static_cast<uint8_t>((usage_front + 1) % usage_notes.size());
  --usage_count;
  return n;
}

void ParseContext::acknowledged_by_client(uint32_t client_ack) noexcept {
  const unsigned before = to_client.pending();
  to_client.acknowledged(client_ack);
  const unsigned folded = before - to_client.pending();
  // The rest move to the front (nothing moves when nothing was folded: a
  // copy onto itself would be wasted, and memcpy's to the same place).
  for (unsigned i = folded; folded != 0 && i < before; ++i) {
    EditBytes& to = edit_bytes[i - folded];
    const EditBytes& from = edit_bytes[i];
    to.fields.assign(from.fields.view());
    to.answer_pos = from.answer_pos;
    to.answer_len = from.answer_len;
  }
  while (kept_count != 0 && kept[kept_front].sent &&
         static_cast<int32_t>(client_ack - kept[kept_front].client_end) >= 0) {
    kept_front = static_cast<uint8_t>((kept_front + 1) % kept.size());
    --kept_count;
  }
}

bool ParseContext::push_kept(const KeptAnswer& a) noexcept {
  if (kept_count == kept.size()) return false;
  kept[(kept_front + kept_count) % kept.size()] = a;
  ++kept_count;
  return true;
}

unsigned ParseContext::kept_unsent() const noexcept {
  unsigned n = 0;
  for (unsigned i = 0; i < kept_count; ++i) n += kept[(kept_front + i) % kept.size()].sent ? 0 : 1;
  return n;
}

unsigned ParseContext::kept_open_room() const noexcept {
  const unsigned answers = static_cast<unsigned>(kept.size()) - kept_count;
  const unsigned removals = SeqShift::kMaxEdits - to_origin.pending();
  // Each kept answer, spliced in or not yet, takes an insertion of to_client.
  const unsigned taken = to_client.pending() + kept_unsent();
  const unsigned insertions = taken < SeqShift::kMaxEdits ? SeqShift::kMaxEdits - taken : 0;
  return std::min({answers, removals, insertions});
}

namespace {

constexpr size_t align_up(size_t n) { return (n + 63) / 64 * 64; }

// After each part of a context's share of the arena: a gap of at least
// kGuard bytes that an AddressSanitizer build poisons from the part's last
// byte on, so that a write past a buffer is caught as it was when each
// buffer was an allocation of its own.
constexpr size_t kGuard = 64;
void guard(std::byte* from, std::byte* to) noexcept {
#ifdef SLUICE_ASAN
  ASAN_POISON_MEMORY_REGION(from, static_cast<size_t>(to - from));
#else
  (void)from;
  (void)to;
#endif
}

}  // namespace

size_t ContextPool::object_stride() noexcept { return align_up(sizeof(ParseContext)); }
size_t ContextPool::head_stride(uint32_t max_head_bytes) noexcept { return align_up(size_t{max_head_bytes} + 1); }

size_t ContextPool::arena_bytes(size_t count, uint32_t max_head_bytes, uint16_t max_fields, bool own_objects,
                                bool own_heads) noexcept {
  const size_t object = own_objects ? object_stride() + kGuard : 0;
  const size_t fields = align_up(sizeof(http::FieldLine) * max_fields) + kGuard;
  const size_t spill = align_up(max_head_bytes) + kGuard;
  const size_t head = align_up(size_t{max_head_bytes} + 1) + kGuard;
  return (object + fields + spill + (own_heads ? head : 0) + head) * count;
}

ContextPool::ContextPool(size_t count, uint32_t max_head_bytes, uint16_t max_fields, std::span<std::byte> objects,
                         std::span<char> heads, std::span<std::byte> arena)
    : held_generation_(count, kNotHeld), max_head_bytes_(max_head_bytes) {
  static_assert(alignof(ParseContext) <= 64 && alignof(http::FieldLine) <= 64);
  // The context itself and its held-head buffer in the arena too, unless
  // memory is given for them (the flow file's, where a restart finds them).
  const bool own_objects = objects.size() < count * object_stride();
  const bool own_heads = heads.size() < count * head_stride(max_head_bytes);
  const size_t object = own_objects ? object_stride() + kGuard : 0;
  const size_t fields = align_up(sizeof(http::FieldLine) * max_fields) + kGuard;
  const size_t spill = align_up(max_head_bytes) + kGuard;
  const size_t head = align_up(size_t{max_head_bytes} + 1) + kGuard;
  const size_t own_head = own_heads ? head : 0;
  stride_ = object + fields + spill + own_head + head;
  if (arena.size() >= stride_ * count && reinterpret_cast<uintptr_t>(arena.data()) % 64 == 0) {
    arena_ = arena.first(stride_ * count);
  } else {
    own_arena_.emplace(stride_ * count);
    arena_ = {own_arena_->data(), own_arena_->size()};
  }
  std::byte* const base = arena_.data();
  contexts_.reserve(count);
  free_.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    std::byte* at = base + i * stride_;
    auto* lines = reinterpret_cast<http::FieldLine*>(at + object);
    std::uninitialized_value_construct_n(lines, max_fields);
    char* const held = own_heads ? reinterpret_cast<char*>(at + object + fields + spill)
                                 : heads.data() + i * head_stride(max_head_bytes);
    const ParseBuffers b{lines, reinterpret_cast<char*>(at + object + fields), held,
                         reinterpret_cast<char*>(at + object + fields + spill + own_head)};
    std::byte* const place = own_objects ? at : objects.data() + i * object_stride();
    contexts_.push_back(new (place) ParseContext(b, max_head_bytes, max_fields));
    const std::pair<size_t, size_t> parts[] = {{0, own_objects ? sizeof(ParseContext) : 0},
                                               {object, sizeof(http::FieldLine) * max_fields},
                                               {object + fields, max_head_bytes},
                                               {object + fields + spill, own_heads ? size_t{max_head_bytes} + 1 : 0},
                                               {object + fields + spill + own_head, size_t{max_head_bytes} + 1}};
    for (size_t k = own_objects ? 0 : 1; k < std::size(parts); ++k) {
      const size_t next = k + 1 < std::size(parts) ? parts[k + 1].first : stride_;
      guard(at + parts[k].first + parts[k].second, at + next);
    }
    free_.push_back(static_cast<int32_t>(count - 1 - i));
  }
}

ContextPool::~ContextPool() {
  for (ParseContext* c : contexts_) c->~ParseContext();
#ifdef SLUICE_ASAN
  ASAN_UNPOISON_MEMORY_REGION(arena_.data(), arena_.size());
#endif
}

int32_t ContextPool::acquire() noexcept {
  if (free_.empty()) return -1;
  const int32_t i = free_.back();
  free_.pop_back();
  return i;
}

void ContextPool::start(int32_t index, const http::Http1Policy& policy, uint64_t generation) noexcept {
  contexts_[static_cast<size_t>(index)]->start(policy, generation);
  held_generation_[static_cast<size_t>(index)] = generation;
}

void ContextPool::renew_requests(int32_t index, const http::Http1Policy& policy, uint64_t generation) noexcept {
  contexts_[static_cast<size_t>(index)]->renew_requests(policy, generation);
  held_generation_[static_cast<size_t>(index)] = generation;
}

void ContextPool::release(int32_t index) noexcept {
  held_generation_[static_cast<size_t>(index)] = kNotHeld;
  free_.push_back(index);
}

uint64_t ContextPool::oldest_generation(uint64_t pass_generation, size_t step) noexcept {
  cycle_min_ = std::min(cycle_min_, pass_generation);
  const size_t end = std::min(held_generation_.size(), scan_next_ + step);
  for (size_t i = scan_next_; i < end; ++i) cycle_min_ = std::min(cycle_min_, held_generation_[i]);
  scan_next_ = end;
  if (scan_next_ == held_generation_.size()) {
    oldest_ = cycle_min_;
    scan_next_ = 0;
    cycle_min_ = kNotHeld;
  }
  return oldest_;
}

}  // namespace sluice::dataplane

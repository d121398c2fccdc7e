// Allocated once at start, reused for the life of the worker.
#include "parse_context.h"

#include <algorithm>

namespace sluice::dataplane {

ParseContext::ParseContext(uint32_t max_head_bytes, uint16_t max_fields)
    : field_store(std::make_unique<http::FieldLine[]>(max_fields)),
      field_capacity(max_fields),
      spill(std::make_unique<char[]>(max_head_bytes)),
      head(std::make_unique<char[]>(max_head_bytes + 1)),
      head_capacity(max_head_bytes + 1) {}

void ParseContext::start(const limiter::CompiledPolicy& p, uint64_t g) noexcept {
  head_len = 0;
  buffering = false;
  answer_len = 0;
  responses.reset();
  if (policy == &p && generation == g) {
    requests->reset();
    return;
  }
  renew_requests(p, g);
}

void ParseContext::renew_requests(const limiter::CompiledPolicy& p, uint64_t g) noexcept {
  policy = &p;
  generation = g;
  const size_t fields = p.stream.head.max_fields < field_capacity ? p.stream.head.max_fields : field_capacity;
  const size_t spill_bytes =
      p.stream.head.max_head_bytes < head_capacity - 1 ? p.stream.head.max_head_bytes : head_capacity - 1;
  requests.reset();
  requests.emplace(p.fields, p.stream, std::span<http::FieldLine>(field_store.get(), fields),
                   std::span<char>(spill.get(), spill_bytes));
}

ContextPool::ContextPool(size_t count, uint32_t max_head_bytes, uint16_t max_fields)
    : held_generation_(count, kNotHeld), max_head_bytes_(max_head_bytes) {
  contexts_.reserve(count);
  free_.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    contexts_.push_back(std::make_unique<ParseContext>(max_head_bytes, max_fields));
    free_.push_back(static_cast<int32_t>(count - 1 - i));
  }
}

int32_t ContextPool::acquire() noexcept {
  if (free_.empty()) return -1;
  const int32_t i = free_.back();
  free_.pop_back();
  return i;
}

void ContextPool::start(int32_t index, const limiter::CompiledPolicy& policy, uint64_t generation) noexcept {
  contexts_[static_cast<size_t>(index)]->start(policy, generation);
  held_generation_[static_cast<size_t>(index)] = generation;
}

void ContextPool::renew_requests(int32_t index, const limiter::CompiledPolicy& policy, uint64_t generation) noexcept {
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

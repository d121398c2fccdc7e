// Allocated once at start, reused for the life of the worker.
#include "parse_context.h"

namespace sluice::dataplane {

ParseContext::ParseContext(uint32_t max_head_bytes, uint16_t max_fields)
    : field_store(std::make_unique<http::FieldLine[]>(max_fields)),
      field_capacity(max_fields),
      spill(std::make_unique<char[]>(max_head_bytes)),
      head(std::make_unique<char[]>(max_head_bytes + 1)),
      head_capacity(max_head_bytes + 1) {}

void ParseContext::start(const limiter::CompiledPolicy& p) noexcept {
  head_len = 0;
  buffering = false;
  answer_len = 0;
  responses.reset();
  if (policy == &p) {
    requests->reset();
    return;
  }
  // (A reload that frees a policy must also clear `policy` here, so a new
  // one at the same address is not taken for it.)
  policy = &p;
  const size_t fields = p.stream.head.max_fields < field_capacity ? p.stream.head.max_fields : field_capacity;
  const size_t spill_bytes =
      p.stream.head.max_head_bytes < head_capacity - 1 ? p.stream.head.max_head_bytes : head_capacity - 1;
  requests.reset();
  requests.emplace(p.fields, p.stream, std::span<http::FieldLine>(field_store.get(), fields),
                   std::span<char>(spill.get(), spill_bytes));
}

ContextPool::ContextPool(size_t count, uint32_t max_head_bytes, uint16_t max_fields) : max_head_bytes_(max_head_bytes) {
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

void ContextPool::release(int32_t index) noexcept { free_.push_back(index); }

}  // namespace sluice::dataplane

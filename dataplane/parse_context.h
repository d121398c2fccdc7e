// The parser state and buffers a flow borrows while a request or response is
// in flight: the request stream with its field store and spill, a buffer for
// a head split across segments, the response framer, and the answer of a
// refused request (kept to send again if the client retransmits). A worker
// has a fixed pool of them; a keep-alive connection between requests holds
// none, so thousands of idle connections cost ~200 bytes each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "http/request_stream.h"
#include "http/response_stream.h"
#include "limiter/compiled_policy.h"

namespace sluice::dataplane {

inline constexpr size_t kMaxAnswerBytes = 4096;  // DecisionScratch::response

struct ParseContext {
  ParseContext(uint32_t max_head_bytes, uint16_t max_fields);

  // Ready for a new flow (or the next message of an idle one) under `policy`.
  void start(const limiter::CompiledPolicy& policy) noexcept;

  std::unique_ptr<http::FieldLine[]> field_store;
  size_t field_capacity;
  std::unique_ptr<char[]> spill;
  std::unique_ptr<char[]> head;  // a head split across segments, copied whole
  size_t head_capacity;
  size_t head_len = 0;
  bool buffering = false;  // the current head is being fed from `head`

  std::optional<http::RequestStream> requests;
  const limiter::CompiledPolicy* policy = nullptr;  // the one `requests` was built for
  http::ResponseStream responses;

  uint16_t answer_len = 0;
  char answer[kMaxAnswerBytes];
};

class ContextPool {
 public:
  ContextPool(size_t count, uint32_t max_head_bytes, uint16_t max_fields);

  // The index of a free context, or -1.
  [[nodiscard]] int32_t acquire() noexcept;
  void release(int32_t index) noexcept;
  [[nodiscard]] ParseContext& at(int32_t index) noexcept { return *contexts_[static_cast<size_t>(index)]; }
  [[nodiscard]] size_t free_count() const noexcept { return free_.size(); }
  [[nodiscard]] size_t size() const noexcept { return contexts_.size(); }
  [[nodiscard]] uint32_t max_head_bytes() const noexcept { return max_head_bytes_; }

 private:
  std::vector<std::unique_ptr<ParseContext>> contexts_;
  std::vector<int32_t> free_;  // reserved at construction: push and pop never allocate
  uint32_t max_head_bytes_;
};

}  // namespace sluice::dataplane

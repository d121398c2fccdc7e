// The response path: an origin segment's new bytes framed into responses,
// matched in order to the requests the request path forwarded. It finds
// where each admitted response's rate-limit fields go (right after its final
// status line) and where each response ends (where a kept-open answer to a
// later refused request may follow), charges DQ05's tokens when a response
// that reports them ends, and says when a refused request's closing answer
// may go. It writes no packet and edits no stream: the flow engine applies
// its plan through the stream editor.
//
// Owns: nothing of its own. Touches: the response half of the flow's parse
// context (the response framer, the queues of fields and usage notes, the
// count of responses ended), the request stream's pending switch, the flow's
// origin.next, and the bucket table (limiter::report_usage).
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "limiter/decide.h"
#include "parse_context.h"
#include "tcp_flow.h"
#include "worker_counters.h"

namespace sluice::dataplane {

// A point in the origin's stream the editor acts on.
struct ResponsePoint {
  enum class Kind : uint8_t {
    kFields,       // a final status line ends at `at`: `fields` go there
    kResponseEnd,  // the `ended`-th response (counted since the context started) ends at `at`
  };
  Kind kind;
  uint32_t at;  // origin sequence number
  uint32_t ended;
  const limiter::RateLimitFields* fields;  // valid until the next request of the flow is parsed
};

struct ResponsePlan {
  enum class Stop : uint8_t {
    kEnd,          // every new byte was framed
    kPassThrough,  // the origin switched protocols: the flow is bridged from here on
    kError,        // the responses cannot be framed any more: the connection ends (origin.next not advanced)
  };
  Stop stop = Stop::kEnd;
  // The flow was refusing (its closing answer waiting for earlier responses)
  // and they are complete, or will never be: the answer may go now.
  bool answer_due = false;
  // In stream order. Response ends are listed only while kept-open answers
  // wait for them.
  // At most one status line and one end per outstanding request: the framer
  // refuses a response no request is waiting for.
  uint8_t points = 0;
  std::array<ResponsePoint, 2 * http::ResponseStream::kMaxOutstanding> at;
};

class ResponsePath {
 public:
  ResponsePath(limiter::LimiterState& limiter, WorkerCounters& counters) noexcept
      : limiter_(limiter), counters_(counters) {}
  void set_spend_log(limiter::SpendLog* log) noexcept { spends_ = log; }

  // Frames the bytes of `payload` (starting at origin sequence `seq`) from
  // flow.origin.next on, which must lie inside it or at its end; `fin`: the
  // segment closes the origin's side.
  [[nodiscard]] ResponsePlan frame(TcpFlow& flow, ParseContext& ctx, uint32_t seq, std::span<const char> payload,
                                   bool fin, time::Nanos now) noexcept;

 private:
  // Once per response: forced inline (see RequestPath's steps).
  [[gnu::always_inline]] inline void status_line(ParseContext& ctx, ResponsePlan& plan, uint32_t at) noexcept;
  [[gnu::always_inline]] inline void response_end(ParseContext& ctx, ResponsePlan& plan, uint32_t at,
                                                  time::Nanos now) noexcept;

  limiter::LimiterState& limiter_;
  limiter::SpendLog* spends_ = nullptr;  // this worker's, for cluster windows' tokens
  WorkerCounters& counters_;
};

}  // namespace sluice::dataplane

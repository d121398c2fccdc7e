// Whom a worker evicts when it runs out of parse contexts or flows. A full
// pool used to turn every newcomer away, whoever held the pool and however
// little they did with it; now the holder that has been slow the longest
// goes: a head that has been arriving for seconds, a body without a new
// byte, a response its client does not read, a connection with nothing in
// flight, a handshake never finished, a connection already over. Never a flow that made progress within the last
// second, and never one waiting on its origin: those are not the crowd.
//
// Finding the slowest holder exactly would cost a scan of the whole pool or
// an ordered index kept up to date on every segment; instead each eviction
// looks at the next few candidates from where the last one stopped, as the
// flow table's sweep does. A crowd of slow holders fills the pool with
// candidates, so the few looked at are almost always slow ones.
//
// Owns: where the last look stopped. Reads the context pool and the flow
// table; acting on the victim is the flow engine's job.
#pragma once

#include <cstddef>
#include <cstdint>

#include "deadline_keeper.h"
#include "parse_context.h"
#include "tcp_tracker.h"

namespace sluice::dataplane {

enum class Evict : uint8_t {
  kSlowHead,     // a head still arriving
  kStalledBody,  // a body without a new byte
  kIdle,         // a connection with nothing in flight
  kFirstHead,    // a new connection that has not sent a request
  kSlowReader,   // a client that does not read what the origin sent
  kHalfOpen,     // a handshake not finished
  kOver,         // closed, reset or answered: kept only for stragglers
};

struct Victim {
  TcpFlow* flow = nullptr;  // nullptr: nobody may be evicted
  Evict why = Evict::kOver;
};

class Evictor {
 public:
  static constexpr size_t kLooks = 32;                          // candidates per eviction
  static constexpr time::Nanos kMinSlow = time::kNanosPerSecond;  // progress within this protects a flow

  // The flow whose context to take back: the slowest of the next kLooks lent
  // contexts' flows, if one has been slow for kMinSlow.
  [[nodiscard]] Victim for_context(const ContextPool& contexts, TcpTracker& tracker, time::Nanos now) noexcept;
  // The flow to forget for a new one: among the next kLooks flows, one that
  // is over, else the slowest handshake or connection without a context
  // (those with one are for_context's), if slow for kMinSlow.
  [[nodiscard]] Victim for_flow(TcpTracker& tracker, time::Nanos now) noexcept;

 private:
  size_t context_cursor_ = 0;
  size_t flow_cursor_ = 0;
};

}  // namespace sluice::dataplane

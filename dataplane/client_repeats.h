// Client bytes that come again, and the acknowledgements a held head is
// owed. A repeat of bytes already parsed is forwarded as it was judged
// (judged_bytes.h: the first copy counts, never this one, which may
// differ); bytes of a held head are acknowledged in the origin's name, but
// only once the origin has everything before them, since that
// acknowledgement covers those bytes too.
//
// Owns: nothing. Touches: a flow's context (its judged record, its held
// acknowledgement), the repeated segment's payload and checksum.
#pragma once

#include <cstdint>

#include "context_lender.h"
#include "frame.h"
#include "packet_sink.h"
#include "service_frame.h"
#include "stream_editor.h"
#include "worker_counters.h"

namespace sluice::dataplane {

class ClientRepeats {
 public:
  ClientRepeats(ContextLender& lender, StreamEditor& editor, WorkerCounters& counters) noexcept
      : lender_(lender), editor_(editor), counters_(counters) {}

  // Client bytes parsed before, again: forwarded as they were judged.
  [[nodiscard]] FrameResult repeat(TcpFlow& flow, uint8_t* frame, FrameView& v, PacketSink& out) noexcept;
  // A client segment while the flow's answer waits for earlier responses:
  // its acknowledgements of those go through, nothing it sends after the
  // refused request does; what came before it, sent again, goes on again
  // as judged (the origin may have lost it).
  [[nodiscard]] FrameResult while_refusing(TcpFlow& flow, uint8_t* frame, FrameView& v) noexcept;
  // A repeat about to go on as `r` says, written back to the judged bytes.
  [[nodiscard]] FrameResult judged(TcpFlow& flow, uint8_t* frame, FrameView& v, FrameResult r) noexcept;
  // A head just held: acknowledged to the client now if the origin has
  // every byte before it, else once it has (origin_acknowledged).
  void ack_held(TcpFlow& flow, ParseContext& ctx, PacketSink& out) noexcept;
  // The origin's acknowledgement `ack` (its numbers) on a flow with a
  // context: judged bytes it covers need no record; an owed held
  // acknowledgement goes.
  void origin_acknowledged(TcpFlow& flow, uint32_t ack, PacketSink& out) noexcept;

 private:
  ContextLender& lender_;
  StreamEditor& editor_;
  WorkerCounters& counters_;
};

}  // namespace sluice::dataplane

// The copy a worker takes of a flow just before it changes the flow for a
// segment, in the flow file's undo area beside its work mark
// (flow_carry.h). A worker killed in the middle of that change leaves the
// flow half-changed; the restarted process carries the copy on instead, as
// if the segment had been lost on the wire, and its sender repeats it.
//
// What is copied is what a restart reads: the TcpFlow, the live parts of
// its parse context (ParseContext::save_live), its edit hold, its held head
// and its bind stash's slot (the stash's bytes only grow, so those the slot
// counts stay as they were). Nothing else a change touches needs it: the pools are rebuilt from
// the carried flows, an answer appended to the answer store is never read
// by the flow as it was, and a bucket the change charged stays charged (a
// repeat is judged and charged again: the limiter's favour, once per kill).
#pragma once

#include <cstddef>
#include <vector>

#include "edit_hold.h"
#include "flow_carry.h"
#include "parse_context.h"
#include "tcp_flow.h"

namespace sluice::dataplane {

class ChangeUndo {
 public:
  // Copies into `area` if it is given (the flow file's), else into memory of
  // its own sized for heads of `max_head_bytes` (tests, benchmarks: the
  // copy costs the same).
  ChangeUndo(const UndoArea& area, uint32_t max_head_bytes);
  ChangeUndo(const ChangeUndo&) = delete;
  ChangeUndo& operator=(const ChangeUndo&) = delete;

  // Before the first change to the segment's flow (null: it has none yet),
  // once `marker` names it: the flow, and the context, hold and stash slot
  // it has borrowed (null where it has none).
  void save(const TcpFlow* flow, const ParseContext* context, const EditHold* hold, const StashSlot* stash,
            WorkMarker& marker) noexcept;

 private:
  std::vector<std::byte> own_;
  UndoArea area_;
};

}  // namespace sluice::dataplane

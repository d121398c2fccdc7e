// The replay itself: every record from every input in time order, each
// decided by the limiter's own decide() at its recorded time, as one box
// would have decided them; DQ05's reported tokens charged when their
// response ended. Intel TBB runs it as a pipeline of batches: taken from the
// stream in order (reading the inputs as it goes: nothing is held whole),
// their heads parsed in parallel, decided one after the other in order
// (each decision depends on every one before it), and counted in order in a
// stage of their own, so that counting one batch overlaps deciding the next.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "replay/record.h"
#include "replay/record_source.h"
#include "replay/replay_result.h"
#include "replay/replay_state.h"

namespace sluice::replay {

struct PolicyUnderReplay {
  PolicyLimiter* limiter = nullptr;
  std::string file;  // as named on the command line
};

struct DecideOptions {
  size_t top_keys = 20;  // refused keys and differences listed (all are counted)
  size_t batch = 256;    // records per pipeline token
};

// Decides the stream's records, in the order it gives them (time order),
// under `first` (and `second`, for --compare) and fills report's records,
// first, last, outcome, other, comparison and decide_seconds (which, for a
// stream that reads its inputs as it goes, includes the reading).
void decide_stream(RecordStream& records, PolicyUnderReplay first, std::optional<PolicyUnderReplay> second,
                   const DecideOptions& options, ReplayReport& report);

// The same for records in memory, sorted by (at, order) first.
void decide_records(std::vector<RequestRecord> records, PolicyUnderReplay first,
                    std::optional<PolicyUnderReplay> second, const DecideOptions& options, ReplayReport& report);

}  // namespace sluice::replay

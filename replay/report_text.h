// The replay's terminal summary: the inputs, the totals, a row per rule,
// the busiest refused keys with each one's first refusal, the comparison
// with --compare, and the speed. The same figures as the JSON report.
#pragma once

#include <string>

#include "replay/replay_result.h"

namespace sluice::replay {

[[nodiscard]] std::string render_text(const ReplayReport& report);

}  // namespace sluice::replay

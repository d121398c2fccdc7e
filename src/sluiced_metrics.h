// sluiced's Prometheus text exposition (served by control::MetricsServer on
// --metrics ADDR:PORT): every worker counter per worker, per-rule verdicts,
// table occupancy, live runs and credentials, ports, the policy.
#pragma once

#include <string>

#include "sluiced_commands.h"

namespace sluice::sluiced {

[[nodiscard]] std::string render_metrics(const Daemon& daemon);

}  // namespace sluice::sluiced

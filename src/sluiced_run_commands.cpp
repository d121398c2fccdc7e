// See sluiced_run_commands.h. Each command checks its arguments first and
// answers a bad one with a coded error, so nothing is half done.
#include "sluiced_run_commands.h"

#include <ctime>
#include <optional>
#include <string>

#include "control/protocol.h"

namespace sluice::sluiced {

namespace {

using control::ErrorCode;
using control::Json;
using control::refuse;
using control::Reply;
namespace arg = control::arg;

Reply run_refusal(const control::RunRegistry::Result& r) {
  using O = control::RunRegistry::Outcome;
  switch (r.outcome) {
    case O::kInvalidToken: return refuse(ErrorCode::kInvalidArgument, r.message);
    case O::kNotLive: return refuse(ErrorCode::kNotFound, r.message);
    case O::kFull: return refuse(ErrorCode::kFull, r.message);
    case O::kJournalFailed: return refuse(ErrorCode::kStateUnwritable, r.message);
    default: return std::nullopt;
  }
}

Json run_of(const control::LiveRun& run) {
  return {{"token", run.token}, {"budget", run.budget}, {"started_unix", static_cast<int64_t>(run.started_unix)}};
}

Reply list_runs(const control::RunRegistry& runs, Json& w) {
  w["capacity"] = runs.capacity();
  w["runs"] = Json::array();
  for (const control::LiveRun& run : runs.list()) w["runs"].push_back(run_of(run));
  return std::nullopt;
}

Reply start_run(control::RunRegistry& runs, control::ClusterService* cluster, const Json& request, Json& w) {
  std::string error;
  const std::optional<std::string> token = control::string_arg(request, arg::kToken, error);
  const std::optional<uint64_t> budget = control::uint_arg(request, arg::kBudget, 1'000'000'000, error);
  if (!error.empty()) return refuse(ErrorCode::kBadRequest, error);
  if (!token) return refuse(ErrorCode::kBadRequest, "run.start needs \"token\"");
  const control::RunRegistry::Result r =
      runs.start(*token, static_cast<uint32_t>(budget.value_or(0)), static_cast<int64_t>(std::time(nullptr)));
  if (!r.ok()) return run_refusal(r);
  using O = control::RunRegistry::Outcome;
  if (cluster != nullptr && r.outcome != O::kAlreadyLive) {
    cluster->publish({control::ReplicaChange::Table::kRuns, control::ReplicaChange::Op::kSet, *token,
                      std::to_string(budget.value_or(0)), {}});
  }
  w["token"] = *token;
  w["budget"] = budget.value_or(0);
  w["outcome"] = r.outcome == O::kStarted ? "started" : r.outcome == O::kBudgetChanged ? "budget_changed" : "already_live";
  w["message"] = r.message;
  return std::nullopt;
}

Reply end_run(control::RunRegistry& runs, control::ClusterService* cluster, const Json& request, Json& w) {
  std::string error;
  const std::optional<std::string> token = control::string_arg(request, arg::kToken, error);
  if (!error.empty()) return refuse(ErrorCode::kBadRequest, error);
  if (!token) return refuse(ErrorCode::kBadRequest, "run.end needs \"token\"");
  const control::RunRegistry::Result r = runs.end(*token);
  if (!r.ok()) return run_refusal(r);
  if (cluster != nullptr) {
    cluster->publish({control::ReplicaChange::Table::kRuns, control::ReplicaChange::Op::kDelete, *token, {}, {}});
  }
  w["token"] = *token;
  w["message"] = r.message;
  return std::nullopt;
}

}  // namespace

void RunCommands::register_commands(control::CommandTable& table) const {
  table.add(control::command::kRuns, [this](const Json&, Json& w) { return list_runs(runs_, w); });
  table.add(control::command::kRunStart,
            [this](const Json& request, Json& w) { return start_run(runs_, cluster_, request, w); });
  table.add(control::command::kRunEnd,
            [this](const Json& request, Json& w) { return end_run(runs_, cluster_, request, w); });
}

}  // namespace sluice::sluiced

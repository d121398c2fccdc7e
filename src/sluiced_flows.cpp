// See sluiced_flows.h.
#include "sluiced_flows.h"

#include <sys/random.h>

#include <array>
#include <map>

#include "control/log.h"
#include "dataplane/flow_carry.h"
#include "dataplane/flow_key.h"
#include "dataplane/flow_table.h"

namespace sluice::sluiced {

namespace {

bool draw(void* p, size_t n) { return ::getrandom(p, n, 0) == static_cast<ssize_t>(n); }

}  // namespace

std::string FlowTables::open(const std::string& state_dir, unsigned workers, size_t flows, size_t contexts,
                             uint32_t max_head_bytes, size_t holds, size_t stashes, size_t answer_bytes,
                             uint64_t now) {
  control::FlowFile::Seeds fresh;
  if (!draw(fresh.cookie.data(), fresh.cookie.size()) || !draw(&fresh.flow, sizeof fresh.flow) ||
      !draw(&fresh.share, sizeof fresh.share)) {
    return "cannot draw a seed from getrandom()";
  }
  const control::FlowFile::Geometry g{workers,
                                      dataplane::FlowTable::capacity_for(flows),
                                      contexts,
                                      holds,
                                      dataplane::AnswerStore::ring_size(answer_bytes),
                                      dataplane::ContextPool::head_stride(max_head_bytes),
                                      stashes,
                                      dataplane::BindStash::buffer_bytes(max_head_bytes)};
  opened_ = control::FlowFile::open(state_dir, g, control::boot_id(), now, fresh);
  if (!opened_.file) return opened_.error;
  file_ = std::move(opened_.file);
  return {};
}

void FlowTables::resume(const std::vector<std::unique_ptr<dataplane::Worker>>& workers,
                        const std::function<unsigned(const dataplane::FlowKey&)>& owner, uint64_t flow_seed,
                        const dataplane::PolicySnapshot& snap) {
  using control::FlowFile;
  using control::LogEvent;
  using control::LogLevel;
  const std::string& path = file_->path();
  switch (opened_.outcome) {
    case FlowFile::Outcome::kCreated:
      return;
    case FlowFile::Outcome::kRebooted:
      control::log(LogLevel::kNotice, LogEvent::kState, opened_.note);
      return;
    case FlowFile::Outcome::kSetAside:
      control::log(LogLevel::kWarning, LogEvent::kState,
                   opened_.note + "; the connections it held are reset (or adopted, where the policy turns "
                                  "adoption on) at their next segment");
      return;
    case FlowFile::Outcome::kRelaid:
      control::log(LogLevel::kNotice, LogEvent::kState, opened_.note);
      break;
    case FlowFile::Outcome::kAttached:
      break;
  }
  // Why each flow that does not continue is forgotten, in a stable order.
  std::map<std::string, size_t> forgotten;
  if (opened_.marked != 0) forgotten["being changed when the process died"] += opened_.marked;
  if (opened_.duplicates != 0) forgotten["in two slots"] += opened_.duplicates;
  // Per worker, the keys of the connections not carried on: reset at their
  // next segment (dataplane/forgotten_flows.h).
  std::vector<std::vector<dataplane::FlowKey>> left(workers.size());
  for (const dataplane::FlowKey& k : opened_.left_out) left[owner(k)].push_back(k);
  size_t carried = 0;
  size_t inside = 0;  // of those carried, how many inside a request or response
  for (const dataplane::CarriedFlow& c : opened_.carried) {
    const dataplane::TcpFlow& f = c.flow;
    const unsigned w = owner(f.key);
    // Its answers (if any) are in the answer store of the worker it was in.
    const bool answers = opened_.answers_kept && w == c.worker;
    const dataplane::CarryVerdict verdict = dataplane::carry_verdict(c, answers);
    if (verdict != dataplane::CarryVerdict::kCarries) {
      forgotten[std::string(dataplane::describe(verdict))] += 1;
      left[w].push_back(f.key);
      continue;
    }
    const dataplane::FlowEngine::Resumed resumed =
        workers[w]->engine().resume(c, dataplane::flow_hash(f.key, flow_seed), snap, answers);
    if (resumed != dataplane::FlowEngine::Resumed::kYes && resumed != dataplane::FlowEngine::Resumed::kDuplicate) {
      left[w].push_back(f.key);
    }
    switch (resumed) {
      case dataplane::FlowEngine::Resumed::kYes:
        ++carried;
        if (c.context != nullptr) ++inside;
        break;
      case dataplane::FlowEngine::Resumed::kDuplicate:
        forgotten["in two slots"] += 1;
        break;
      case dataplane::FlowEngine::Resumed::kTableFull:
        forgotten["no room in its worker's table"] += 1;
        break;
      case dataplane::FlowEngine::Resumed::kShareFull:
        forgotten["past its client's share of flows"] += 1;
        break;
      case dataplane::FlowEngine::Resumed::kNoStash:
        forgotten["no bind stash free"] += 1;
        break;
      case dataplane::FlowEngine::Resumed::kNoneFree:
        forgotten["no parse context or edit hold free"] += 1;
        break;
      case dataplane::FlowEngine::Resumed::kCannotCarry:
        forgotten["a head held or being read, or an answer in another worker's store"] += 1;
        break;
    }
  }
  for (size_t w = 0; w < workers.size(); ++w) workers[w]->engine().forget(std::move(left[w]));
  size_t reset = 0;
  std::string why;
  for (const auto& [reason, n] : forgotten) {
    reset += n;
    why += (why.empty() ? "" : ", ") + std::to_string(n) + " " + reason;
  }
  tally_ = {carried, reset};
  std::string line = "carried on " + std::to_string(carried) + " connection" + (carried == 1 ? "" : "s") + " (" +
                     std::to_string(inside) + " inside a request or response) from " + path + " (generation " +
                     std::to_string(file_->generation()) + ")";
  // The flow a worker was changing at the kill, as it was before that change.
  if (opened_.undone != 0) {
    line += "; " + std::to_string(opened_.undone) + " taken back to before the segment the process died in (its "
            "sender repeats it)";
  }
  line += reset == 0 ? "; none reset"
                     : "; " + std::to_string(reset) + " reset at their next segment (or adopted, where the policy "
                                                     "turns adoption on): " + why;
  control::log(reset == 0 ? LogLevel::kNotice : LogLevel::kWarning, LogEvent::kState, line);
  opened_.carried.clear();
  opened_.carried.shrink_to_fit();
}

}  // namespace sluice::sluiced

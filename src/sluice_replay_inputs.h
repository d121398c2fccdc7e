// sluice-replay's inputs, from the command line to one stream of records in
// time order: each input looked at once (its format and compression from
// its first bytes), the captures read together as one packet stream, each
// log read a step at a time and opened only when the merge reaches it, all
// merged by time (replay/time_merge.h). What each input gave (lines or
// packets, problems, records kept) is known once the stream has been read.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "http/http1_policy.h"
#include "replay/access_log.h"
#include "replay/record.h"
#include "replay/replay_result.h"
#include "replay/time_merge.h"
#include "sluice_replay_options.h"

namespace sluice::replay_cli {

class ReplayInputs {
 public:
  // Looks at every input and reads the captures; the logs are read as the
  // stream is. `policy` is the first policy's (its service ports, field
  // set, limits and usage field).
  ReplayInputs(const Options& options, const http::Http1Policy& policy);
  ~ReplayInputs();
  ReplayInputs(const ReplayInputs&) = delete;  // the merge's openers point into it
  ReplayInputs& operator=(const ReplayInputs&) = delete;

  // An input could not be opened, or is not what it was taken for: nothing
  // should be replayed (problems() says why).
  [[nodiscard]] bool fatal_before() const noexcept { return fatal_; }
  // Every input's records in time order (once).
  [[nodiscard]] replay::TimeMerge& stream() { return *merge_; }
  // After the stream: an input turned out not to be whole (damaged
  // compressed data).
  [[nodiscard]] bool fatal_after() const;

  // Each input's problems on stderr (all of them where one was fatal).
  void print_problems(bool quiet) const;
  [[nodiscard]] uint64_t problem_count() const;
  [[nodiscard]] std::vector<replay::InputSummary> summaries() const;

 private:
  void read_captures(const http::Http1Policy& policy, std::vector<replay::MergeInput>& merge);
  void open_log(uint32_t i, std::vector<replay::MergeInput>& merge);

  const Options& o_;
  struct Seen;
  std::vector<std::unique_ptr<Seen>> seen_;  // by input
  [[nodiscard]] replay::LogOptions log_options(InputFormat format) const;

  std::string usage_field_;  // the policy's (DQ05)
  std::unique_ptr<replay::LogBuffers> buffers_;
  std::vector<std::unique_ptr<replay::InputResult>> results_;  // by input
  std::unique_ptr<replay::TimeMerge> merge_;
  bool fatal_ = false;
};

}  // namespace sluice::replay_cli

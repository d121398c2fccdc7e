// --compare: the requests one policy stopped and the other did not, counted
// apart by how (a refusal, a rule's answer, an unparsable head), and those
// refused or answered by one and let through by the other added up by who:
// the stopping policy's rule and key (its client address where the answer
// charged no key).
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>

#include "limiter/decide.h"
#include "replay/outcome_tally.h"
#include "replay/record.h"
#include "replay/replay_result.h"
#include "replay/replay_state.h"

namespace sluice::replay {

class DifferenceTally {
 public:
  // `second` null: nothing is compared.
  DifferenceTally(const PolicyLimiter& first, const PolicyLimiter* second) : limiters_{&first, second} {}

  // The two policies' decisions on one request.
  void count(const RequestRecord& r, const DecidedNote& first, const DecidedNote& second);

  [[nodiscard]] Comparison finish(size_t top_keys) const;

 private:
  struct Who {
    int16_t rule = -1;
    limiter::KeyLabel label;  // kNone: the client address below
    net::IpAddress peer;
    uint64_t requests = 0;
    time::Nanos first = 0;
  };
  using Groups = std::unordered_map<uint64_t, Who>;

  void add(Groups& groups, const RequestRecord& r, const DecidedNote& d);
  // How a policy stopped a request, if it did.
  enum class Stop : uint8_t { kNone, kRefused, kAnswered, kUnparsed };
  [[nodiscard]] static Stop stop_of(const DecidedNote& d) noexcept;
  struct Split {
    uint64_t both = 0, only[2] = {0, 0};
  };
  [[nodiscard]] std::vector<Difference> largest(const Groups& groups, const PolicyLimiter& limiter,
                                                size_t top_keys) const;

  const PolicyLimiter* limiters_[2];
  Split refused_, answered_, unparsed_;
  Groups groups_[2];
};

}  // namespace sluice::replay

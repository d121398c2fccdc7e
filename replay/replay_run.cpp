// See replay_run.h.
#include "replay/replay_run.h"

#include "limiter/in_flight.h"

#include <tbb/concurrent_queue.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_pipeline.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "http/head_parser.h"
#include "http/http1_policy.h"
#include "http/limiter_answer.h"
#include "http/limiter_request.h"
#include "limiter/client_ip.h"
#include "replay/difference_tally.h"
#include "replay/outcome_tally.h"

namespace sluice::replay {

namespace {

using limiter::Decision;
using limiter::Verdict;

struct ParsedHead {
  http::RequestHead head;
  http::ParseError error = http::ParseError::kNone;
};

// A thread's head parser for each policy (their field sets may differ).
class ThreadParsers {
 public:
  http::HeadParser& for_policy(size_t i, const http::Http1Policy& p) {
    Slot& s = slots_[i];
    if (!s.parser) {
      s.store.resize(p.stream.head.max_fields);
      s.spill.resize(p.stream.head.max_head_bytes);
      s.parser = std::make_unique<http::HeadParser>(p.fields, p.stream.head, s.store, s.spill);
    }
    return *s.parser;
  }

 private:
  struct Slot {
    std::vector<http::FieldLine> store;
    std::vector<char> spill;
    std::unique_ptr<http::HeadParser> parser;
  };
  Slot slots_[2];
};

ParsedHead parse_head(http::HeadParser& parser, const RequestRecord& r) {
  ParsedHead out;
  if (r.parse_error != http::ParseError::kNone) {
    out.error = r.parse_error;
    return out;
  }
  parser.reset();
  const http::FeedResult f = parser.feed(r.head);
  if (f.status == http::HeadStatus::kComplete) {
    out.head = parser.head();  // views into r.head, which outlives the decision
  } else {
    out.error = f.status == http::HeadStatus::kError ? f.error : http::ParseError::kBareLF;  // a head with no end: the text was not one
  }
  return out;
}

// One policy's side of the decisions: its limiter, scratch, tally and the
// tokens of responses still to end (DQ05).
class PolicyRun {
 public:
  explicit PolicyRun(PolicyUnderReplay p)
      : limiter_(*p.limiter), tally_(limiter_, p.file), scratch_(new limiter::DecisionScratch{}) {}

  // Decides `r` into `out`. A request on a connection an earlier answer of
  // this policy closed is not judged: the appliance never saw it.
  void decide(const RequestRecord& r, const ParsedHead& h, DecidedNote& out) {
    settle_usage(r.at);
    if (r.kind == RequestRecord::Kind::kResponseEnd) {
      response_ended(r);
      out = DecidedNote{};
      return;
    }
    if (r.kind == RequestRecord::Kind::kConnectionEnd) {
      closed_.erase(r.connection);  // nothing more comes on it
      out = DecidedNote{};
      return;
    }
    if (r.connection != 0 && closed_.contains(r.connection)) {
      out = DecidedNote{};
      return;
    }
    const limiter::CompiledPolicy& policy = limiter_.policy();
    limiter::ConnectionFacts conn = r.conn;
    http::ParseError error = h.error;
    if (!relay(policy, r, conn, error)) {
      out = DecidedNote{};  // reset, nothing judged: the appliance would not have let the connection on
      if (r.connection != 0) closed_.insert(r.connection);
      return;
    }
    const bool unparsed = error != http::ParseError::kNone;
    const Decision& d = unparsed ? (decision_ = http::answer_parse_error(policy, error))
                                 : (decision_ = limiter::decide(policy, limiter_.state(), http::limiter_request(h.head, conn),
                                                                r.at, *scratch_));
    out = DecidedNote::of(d, unparsed);
    const bool forwarded = d.verdict == Verdict::kAdmit || d.verdict == Verdict::kForward || d.verdict == Verdict::kExempt;
    if (r.response != 0) {
      // Its response's end comes as a record of its own: what it will
      // settle is kept until then.
      const bool charges = d.has_usage_key && forwarded;
      if (charges || d.holds_in_flight) {
        awaiting_.emplace(r.response, Awaiting{d.usage_key, d.usage_calendar, d.in_flight_key, charges, d.holds_in_flight});
      }
    } else if (r.has_usage && d.has_usage_key && forwarded) {
      pending_.push({r.usage_at, r.order, d.usage_key, d.usage_calendar, r.usage_tokens, false});
    }
    // A rule's in-flight slot: given back when the response ended, where
    // the input says when (a response that reported its usage); else at
    // once, as if the origin had answered in no time.
    if (d.holds_in_flight && r.response == 0) {
      if (r.has_usage && r.usage_at > r.at) {
        pending_.push({r.usage_at, r.order, d.in_flight_key, {}, 0, true});
      } else {
        limiter::release_in_flight(limiter_.state().buckets, d.in_flight_key, limiter_.state().in_flight_epoch);
      }
    }
    // An answer closes the connection unless HTTP/1 lets it stay open (an
    // unparsable head's always closes).
    const bool kept_open = !unparsed && http::answer_keeps_connection(policy, h.head);
    if (!forwarded && !kept_open && r.connection != 0) closed_.insert(r.connection);
  }

  // A connection that began with a PROXY protocol header (or did not), as
  // the policy's client_ip proxy_protocol takes it: the client it names
  // stands for the peer (a trusted proxy's); read as HTTP where the policy
  // reads no such header (answered 400 and closed); false where the
  // appliance resets the connection (a header from an untrusted peer, none
  // from a trusted proxy).
  static bool relay(const limiter::CompiledPolicy& policy, const RequestRecord& r, limiter::ConnectionFacts& conn,
                    http::ParseError& error) {
    const policy::ClientIpSpec& spec = policy.client_ip.spec;
    if (spec.proxy_protocol == policy::ClientIpSpec::ProxyProtocol::kOff) {
      // "PROXY TCP4 ..." has no HTTP version; v2's binary signature no method.
      if (r.relay != RequestRecord::Relay::kNone && error == http::ParseError::kNone) {
        error = r.relay_version == 1 ? http::ParseError::kBadVersion : http::ParseError::kBadMethod;
      }
      return true;
    }
    const bool trusted = limiter::trusted_proxy(spec, r.conn.peer);
    if ((r.relay == RequestRecord::Relay::kNone) == trusted) return false;
    if (r.relay == RequestRecord::Relay::kRelayed) conn.peer = r.relayed;
    return true;
  }

  // A response's end (a capture's): the tokens it reported charged, the
  // request's in-flight slot given back. A request this policy did not
  // forward, or that settles nothing, waits for nothing.
  void response_ended(const RequestRecord& end) {
    const auto it = awaiting_.find(end.response);
    if (it == awaiting_.end()) return;
    const Awaiting& a = it->second;
    if (a.charges && end.has_usage) {
      limiter::report_usage(limiter_.state(), a.usage_key, a.calendar, end.usage_tokens, end.at);
      ++usage_reports_;
    }
    if (a.holds_in_flight) limiter::release_in_flight(limiter_.state().buckets, a.in_flight_key, limiter_.state().in_flight_epoch);
    awaiting_.erase(it);
  }

  // Counts a decision: a stage of its own, after the deciding one.
  void count(const RequestRecord& r, const DecidedNote& d) { tally_.count(r, d); }

  // Every response that ended by `now` charges its tokens first.
  void settle_usage(time::Nanos now) {
    while (!pending_.empty() && pending_.top().at <= now) {
      const Usage& u = pending_.top();
      if (u.in_flight) {
        limiter::release_in_flight(limiter_.state().buckets, u.key, limiter_.state().in_flight_epoch);
      } else {
        limiter::report_usage(limiter_.state(), u.key, u.calendar, u.tokens, u.at);
        ++usage_reports_;
      }
      pending_.pop();
    }
  }

  [[nodiscard]] PolicyOutcome finish(size_t top_keys, time::Nanos first, time::Nanos last) {
    settle_usage(UINT64_MAX);
    tally_.set_usage_reports(usage_reports_);
    return tally_.finish(top_keys, first, last);
  }
  [[nodiscard]] const PolicyLimiter& limiter() const noexcept { return limiter_; }

 private:
  struct Usage {
    time::Nanos at;
    uint64_t order;
    limiter::BucketKey key;
    limiter::Calendar calendar;
    uint64_t tokens;
    bool in_flight;  // an in-flight slot to give back, not tokens
    bool operator>(const Usage& o) const noexcept { return at != o.at ? at > o.at : order > o.order; }
  };
  PolicyLimiter& limiter_;
  OutcomeTally tally_;
  std::unique_ptr<limiter::DecisionScratch> scratch_;
  Decision decision_;
  std::priority_queue<Usage, std::vector<Usage>, std::greater<>> pending_;
  struct Awaiting {
    limiter::BucketKey usage_key;
    limiter::Calendar calendar;
    limiter::BucketKey in_flight_key;
    bool charges;          // DQ05: the response's tokens are charged
    bool holds_in_flight;  // a rule's in-flight slot is given back at the end
  };
  std::unordered_map<uint64_t, Awaiting> awaiting_;  // by RequestRecord::response
  std::unordered_set<uint64_t> closed_;  // connections an answer closed (a capture's: until they end)
  uint64_t usage_reports_ = 0;
};

struct Batch {
  std::vector<RequestRecord> records;  // in time order
  std::vector<ParsedHead> heads[2];    // per policy
  std::vector<DecidedNote> notes[2];   // per policy
};

// Batches are reused: a batch's parsed heads are some 700 bytes each, and
// fresh ones for every batch would cost the pipeline its speed in page
// faults. At most the pipeline's tokens are ever made.
class BatchPool {
 public:
  Batch* take() {
    Batch* b = nullptr;
    if (free_.try_pop(b)) return b;
    all_.push_back(std::make_unique<Batch>());  // only from the serial input stage
    return all_.back().get();
  }
  void give_back(Batch* b) {
    b->records.clear();
    for (int p = 0; p < 2; ++p) {
      b->heads[p].clear();
      b->notes[p].clear();
    }
    free_.push(b);
  }

 private:
  tbb::concurrent_queue<Batch*> free_;
  std::vector<std::unique_ptr<Batch>> all_;
};

}  // namespace

void decide_stream(RecordStream& records, PolicyUnderReplay first, std::optional<PolicyUnderReplay> second,
                   const DecideOptions& options, ReplayReport& report) {
  const auto started = std::chrono::steady_clock::now();
  std::vector<std::unique_ptr<PolicyRun>> runs;
  runs.push_back(std::make_unique<PolicyRun>(first));
  if (second) runs.push_back(std::make_unique<PolicyRun>(*second));
  DifferenceTally differences(*first.limiter, second ? second->limiter : nullptr);
  tbb::enumerable_thread_specific<ThreadParsers> parsers;

  BatchPool batches;
  uint64_t count = 0;
  time::Nanos earliest = UINT64_MAX, latest = 0;  // a record later than the merge's window may come out of order
  bool more = true;
  const size_t tokens = 4 * std::max<size_t>(1, tbb::this_task_arena::max_concurrency());
  tbb::parallel_pipeline(
      tokens,
      tbb::make_filter<void, Batch*>(tbb::filter_mode::serial_in_order,
                                     [&](tbb::flow_control& fc) -> Batch* {
                                       Batch* b = more ? batches.take() : nullptr;
                                       while (b != nullptr && b->records.size() < options.batch) {
                                         RequestRecord& r = b->records.emplace_back();
                                         if (!records.next(r)) {
                                           b->records.pop_back();
                                           more = false;
                                           break;
                                         }
                                         if (r.kind != RequestRecord::Kind::kRequest) continue;
                                         ++count;
                                         earliest = std::min(earliest, r.at);
                                         latest = std::max(latest, r.at);
                                       }
                                       if (b == nullptr || b->records.empty()) {
                                         if (b != nullptr) batches.give_back(b);
                                         fc.stop();
                                         return nullptr;
                                       }
                                       return b;
                                     }) &
          tbb::make_filter<Batch*, Batch*>(tbb::filter_mode::parallel,
                                           [&](Batch* b) {
                                             ThreadParsers& tp = parsers.local();
                                             for (size_t p = 0; p < runs.size(); ++p) {
                                               const http::Http1Policy& policy = runs[p]->limiter().policy();
                                               http::HeadParser& parser = tp.for_policy(p, policy);
                                               b->heads[p].reserve(b->records.size());
                                               for (const RequestRecord& r : b->records) {
                                                 b->heads[p].push_back(r.kind == RequestRecord::Kind::kRequest
                                                                           ? parse_head(parser, r)
                                                                           : ParsedHead{});
                                               }
                                             }
                                             return b;
                                           }) &
          // Decided in order: each decision depends on every one before it.
          tbb::make_filter<Batch*, Batch*>(tbb::filter_mode::serial_in_order,
                                           [&](Batch* b) {
                                             for (size_t p = 0; p < runs.size(); ++p) {
                                               b->notes[p].resize(b->records.size());
                                               for (size_t i = 0; i < b->records.size(); ++i) {
                                                 runs[p]->decide(b->records[i], b->heads[p][i], b->notes[p][i]);
                                               }
                                             }
                                             return b;
                                           }) &
          // Counted in order too, while the next batch is being decided.
          tbb::make_filter<Batch*, void>(tbb::filter_mode::serial_in_order, [&](Batch* b) {
            for (size_t i = 0; i < b->records.size(); ++i) {
              if (b->records[i].kind != RequestRecord::Kind::kRequest) continue;
              for (size_t p = 0; p < runs.size(); ++p) runs[p]->count(b->records[i], b->notes[p][i]);
              if (runs.size() == 2) differences.count(b->records[i], b->notes[0][i], b->notes[1][i]);
            }
            batches.give_back(b);
          }));

  report.records = count;
  report.first = count == 0 ? 0 : earliest;
  report.last = count == 0 ? 0 : latest;
  report.outcome = runs[0]->finish(options.top_keys, report.first, report.last);
  if (second) {
    report.other = runs[1]->finish(options.top_keys, report.first, report.last);
    report.comparison = differences.finish(options.top_keys);
  }
  report.decide_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
}

void decide_records(std::vector<RequestRecord> records, PolicyUnderReplay first,
                    std::optional<PolicyUnderReplay> second, const DecideOptions& options, ReplayReport& report) {
  RecordsInMemory stream(std::move(records));
  decide_stream(stream, first, second, options, report);
}

}  // namespace sluice::replay

// Test support: drives a HeadParser or RequestStream over a byte string cut
// into pieces in a chosen way, and reduces the outcome to plain strings, so
// results of different cuts and instruction sets can be compared with ==.
// Used by the unit tests and the fuzz target (so no GoogleTest here).
#pragma once

#include <cstdint>
#include <ostream>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "http/head_parser.h"
#include "http/request_stream.h"

namespace sluice::test {

// A head's outcome, copied out of the parser.
struct HeadOutcome {
  http::HeadStatus status = http::HeadStatus::kIncomplete;
  http::ParseError error = http::ParseError::kNone;
  size_t consumed = 0;  // bytes of the whole input that belong to the head
  std::string method, target, path, query, authority;
  bool has_query = false;
  int version = -1;
  std::vector<std::pair<std::string, std::string>> fields;
  std::vector<std::pair<std::string, int>> tracked;  // value and count per tracked id
  int body = -1;
  uint64_t content_length = 0;
  bool keep_alive = false, upgrade = false, expect_continue = false;
  uint32_t head_bytes = 0;

  bool operator==(const HeadOutcome&) const = default;
};

inline std::string describe(const HeadOutcome& o);
inline void PrintTo(const HeadOutcome& o, std::ostream* os);

inline std::string describe(const HeadOutcome& o) {
  std::string s = "status=" + std::to_string(static_cast<int>(o.status)) + " error=" +
                  std::string(http::to_string(o.error)) + " consumed=" + std::to_string(o.consumed);
  if (o.status == http::HeadStatus::kComplete) {
    s += " " + o.method + " " + o.target + " fields=" + std::to_string(o.fields.size());
  }
  return s;
}

inline void PrintTo(const HeadOutcome& o, std::ostream* os) { *os << describe(o); }

// Copies what a complete head yields, all but the field list, into `o`.
inline void copy_request_head(HeadOutcome& o, const http::RequestHead& h, const http::FieldSet& fields) {
  o.method = h.method;
  o.target = h.target;
  o.path = h.path;
  o.query = h.query;
  o.has_query = h.has_query;
  o.authority = h.authority;
  o.version = static_cast<int>(h.version);
  for (size_t id = 0; id < fields.size(); ++id) {
    o.tracked.emplace_back(std::string(h.value(static_cast<http::FieldId>(id))), h.tracked_count[id]);
  }
  o.body = static_cast<int>(h.body);
  o.content_length = h.content_length;
  o.keep_alive = h.keep_alive;
  o.upgrade = h.upgrade;
  o.expect_continue = h.expect_continue;
  o.head_bytes = h.head_bytes;
}

// Owns the storage a parser borrows.
class HeadHarness {
 public:
  explicit HeadHarness(http::Isa isa = http::best_isa(), http::HeadLimits limits = {},
                       const http::FieldSet* fields = nullptr)
      : fields_(fields ? *fields : default_fields()),
        store_(limits.max_fields),
        spill_(limits.max_head_bytes),
        parser_(fields_, limits, store_, spill_, isa) {}

  http::HeadParser& parser() { return parser_; }

  // Feeds `input` cut before each offset in `cuts` (ascending), stopping at
  // the first piece that completes or fails the head.
  HeadOutcome run(std::string_view input, const std::vector<size_t>& cuts) {
    parser_.reset();
    HeadOutcome o;
    size_t begin = 0;
    std::vector<size_t> ends(cuts);
    ends.push_back(input.size());
    for (size_t end : ends) {
      if (end < begin) continue;
      const http::FeedResult r = parser_.feed(std::span<const char>(input.data() + begin, end - begin));
      o.status = r.status;
      o.error = r.error;
      if (r.status == http::HeadStatus::kComplete) {
        o.consumed = begin + r.consumed;
        break;
      }
      if (r.status == http::HeadStatus::kError) break;
      begin = end;
    }
    if (o.status == http::HeadStatus::kComplete) copy_head(o);
    return o;
  }

  HeadOutcome whole(std::string_view input) { return run(input, {}); }

  HeadOutcome bytewise(std::string_view input) {
    std::vector<size_t> cuts;
    for (size_t i = 1; i < input.size(); ++i) cuts.push_back(i);
    return run(input, cuts);
  }

  HeadOutcome random_cuts(std::string_view input, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<size_t> cuts;
    for (size_t i = 1; i < input.size(); ++i) {
      if (rng() % 7 == 0) cuts.push_back(i);
    }
    return run(input, cuts);
  }

 private:
  static const http::FieldSet& default_fields() {
    static const http::FieldSet set;
    return set;
  }

  void copy_head(HeadOutcome& o) const {
    for (const http::FieldLine& f : parser_.fields()) o.fields.emplace_back(f.name, f.value);
    copy_request_head(o, parser_.head(), fields_);
  }

  const http::FieldSet& fields_;
  std::vector<http::FieldLine> store_;
  std::vector<char> spill_;
  http::HeadParser parser_;
};

// One event of a RequestStream, for comparing whole streams.
struct StreamRecord {
  http::StreamEvent event;
  http::ParseError error;
  size_t offset;  // absolute offset in the input just after the event (0 for kError)
  std::string request_line;  // method and target, for kHead

  bool operator==(const StreamRecord&) const = default;
};

inline void PrintTo(const StreamRecord& r, std::ostream* os) {
  *os << "{event " << static_cast<int>(r.event) << " " << http::to_string(r.error) << " at " << r.offset << " \""
      << r.request_line << "\"}";
}

// Runs a whole connection's bytes through a RequestStream in pieces, and
// records every event except kNeedMore.
inline std::vector<StreamRecord> run_stream(std::string_view input, const std::vector<size_t>& cuts,
                                            const http::StreamConfig& config = {},
                                            http::Isa isa = http::best_isa()) {
  static const http::FieldSet fields;
  std::vector<http::FieldLine> store(config.head.max_fields);
  std::vector<char> spill(config.head.max_head_bytes);
  http::RequestStream stream(fields, config, store, spill, isa);
  std::vector<StreamRecord> events;
  std::vector<size_t> ends(cuts);
  ends.push_back(input.size());
  size_t begin = 0;
  for (size_t end : ends) {
    if (end < begin) continue;
    size_t pos = begin;
    for (;;) {
      const http::StreamStep s = stream.next(std::span<const char>(input.data() + pos, end - pos));
      pos += s.consumed;
      if (s.event == http::StreamEvent::kNeedMore) break;
      if (s.event == http::StreamEvent::kPassThrough) {
        if (events.empty() || events.back().event != http::StreamEvent::kPassThrough) {
          events.push_back({s.event, s.error, pos, {}});
        }
        pos = end;
        break;
      }
      std::string line;
      if (s.event == http::StreamEvent::kHead) line = std::string(stream.head().method) + " " + std::string(stream.head().target);
      // Where in a piece an error is noticed is not part of the contract (the
      // connection is closed either way), so errors carry no offset.
      events.push_back({s.event, s.error, s.event == http::StreamEvent::kError ? 0 : pos, line});
      if (s.event == http::StreamEvent::kError || s.event == http::StreamEvent::kAwaitSwitch) return events;
      if (pos == end && s.event != http::StreamEvent::kHead) break;
    }
    begin = end;
  }
  return events;
}

}  // namespace sluice::test

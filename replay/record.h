// What sluice-replay decides on: one request as the appliance would have met
// it, whatever the input it came from (a capture's reassembled flow, a line
// of an access log). Self-contained (the head's bytes are owned), so records
// from every input can be sorted by time and decided in that order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "http/parse_error.h"
#include "limiter/decide.h"
#include "time/clock.h"

namespace sluice::replay {

struct RequestRecord {
  // A request (its head, or a head the parser refused), or the end of the
  // response to one decided earlier: a capture learns a response's end (and
  // the tokens it reported) only after later requests, so it comes as a
  // record of its own, at its own time, naming the request (`response`).
  // A capture's connection that carried requests also ends with a record
  // (kConnectionEnd): what the replay remembers of it can go.
  enum class Kind : uint8_t { kRequest, kResponseEnd, kConnectionEnd } kind = Kind::kRequest;
  time::Nanos at = 0;  // when the head was complete (the response ended): the decision's clock (UTC)
  // Ties on `at` are decided in input order: (input index << 40) | record number.
  uint64_t order = 0;
  limiter::ConnectionFacts conn;
  // The head, request line through the empty line, as the parser reads it.
  // Empty when parse_error is set.
  std::string head;
  // The stream refused the head (the appliance answers 400/431/501/505 and
  // closes): no rule decides it.
  http::ParseError parse_error = http::ParseError::kNone;
  // DQ05: the tokens the response reported, charged to the request's minute
  // when the response ended (`usage_at` >= `at`). A log knows them with the
  // request; a capture's come on the kResponseEnd record (usage_at == at).
  bool has_usage = false;
  uint64_t usage_tokens = 0;
  time::Nanos usage_at = 0;
  // Nonzero: a kResponseEnd record with this number will follow (a
  // capture's request whose response was due), so an in-flight slot is held
  // until then. Unique in the run. On a kResponseEnd: the request it ends.
  uint64_t response = 0;
  // The connection it came on, where the input knows (a capture's flow:
  // (input << 40) | its number from 1); 0 where it does not (a log). An
  // answer that closes the connection means the appliance judged nothing
  // after it there, so the replay skips that connection's later requests.
  uint64_t connection = 0;
  // The PROXY protocol header its connection began with (a capture behind
  // a load balancer): none, one naming `relayed`, or one naming nobody
  // (v2 LOCAL, v1 UNKNOWN). Which counts is the policy's business
  // (client_ip proxy_protocol, trusted_proxies).
  enum class Relay : uint8_t { kNone, kRelayed, kLocal } relay = Relay::kNone;
  uint8_t relay_version = 0;
  net::IpAddress relayed{};
  // Where it came from, for messages: the input's index (Inputs::names) and
  // its record number there (a capture's packet, a log's line; 1-based).
  uint32_t input = 0;
  uint64_t record_number = 0;
};

[[nodiscard]] constexpr uint64_t record_order(uint32_t input, uint64_t record_number) noexcept {
  return (uint64_t{input} << 40) | (record_number & ((uint64_t{1} << 40) - 1));
}

// A record (or part of an input) that could not be used, and why. `where` is
// "FILE:LINE:COLUMN" for text (a log line) or "FILE: packet N" / "FILE: byte
// OFFSET" for a capture. The record is skipped; the rest goes on.
struct InputProblem {
  std::string where;
  std::string message;
  [[nodiscard]] std::string to_string() const { return where + ": " + message; }
};

// What one input gave. `fatal` when nothing of it could be read at all (no
// such file, not a capture or log of the format given): the run stops.
struct InputResult {
  std::vector<RequestRecord> records;
  std::vector<InputProblem> problems;  // the first kMaxProblems, in input order
  uint64_t problem_count = 0;          // all of them
  uint64_t units_read = 0;             // packets or lines read
  bool fatal = false;
  static constexpr size_t kMaxProblems = 100;

  void problem(std::string where, std::string message) {
    ++problem_count;
    if (problems.size() < kMaxProblems) problems.push_back({std::move(where), std::move(message)});
  }
};

}  // namespace sluice::replay

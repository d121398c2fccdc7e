// sluice-replay's command line: what it means, checked before any input is
// read, so a typo is a one-line message and exit code 2.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace sluice::replay_cli {

// Every way sluice-replay can end, each with its own code (in --help).
enum class ExitCode : int {
  kOk = 0,
  kOutput = 1,    // a report could not be written
  kUsage = 2,     // bad command line
  kPolicy = 3,    // a policy file is missing or invalid
  kInput = 4,     // an input cannot be read at all (missing, not of its format)
  kState = 5,     // the state directory, runs or credentials file cannot be used
  kSkipped = 6,   // --strict, and records were skipped
};

enum class InputFormat : uint8_t { kAuto, kCapture, kNginx, kJson };

struct Options {
  enum class Mode : uint8_t { kRun, kHelp, kVersion, kManual } mode = Mode::kRun;
  std::string policy;
  std::string compare;  // empty: no comparison
  std::vector<std::string> inputs;
  InputFormat format = InputFormat::kAuto;
  std::string log_format;  // empty: nginx's combined
  std::vector<std::pair<std::string, std::string>> json_fields;
  std::optional<std::vector<uint16_t>> service_ports;  // overrides the policy's
  std::string state_dir, runs_file, credentials_file;
  // Where the operator's label secret is kept (no --state-dir): credential
  // digests keyed with it compare across reports.
  std::string label_dir;
  bool json = false;
  std::string html;
  size_t top = 20;
  unsigned threads = 0;  // 0: every core
  size_t buckets = size_t{1} << 20;
  bool strict = false;
  bool quiet = false;
  // Only records from `since` (inclusive) to `until` (exclusive) are
  // replayed (UTC nanoseconds).
  std::optional<uint64_t> since, until;
  // How far out of time order a log that times its records at their start
  // ($request_time) may be: its records wait this long for earlier ones.
  uint64_t reorder_window = 60ull * 1'000'000'000ull;
};

struct ParseResult {
  Options options;
  std::string error;  // one line; non-empty: exit 2
};

[[nodiscard]] ParseResult parse_options(int argc, const char* const* argv);
[[nodiscard]] std::string usage_text();
[[nodiscard]] std::string manual_text();

}  // namespace sluice::replay_cli

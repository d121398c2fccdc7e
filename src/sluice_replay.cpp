// sluice-replay: what would this policy have done to that traffic? Reads
// captures and access logs (replay/), decides every request with the
// limiter's own decide() at its recorded time, and writes the summary, the
// JSON report and the HTML page. The order of work: the command line, what
// the box knew (state directory, runs, credentials), the policies, the
// inputs, the decisions, the reports; each failure has its exit code.
#include <tbb/global_control.h>
#include <tbb/info.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "replay/replay_run.h"
#include "replay/replay_state.h"
#include "replay/report_html.h"
#include "replay/report_json.h"
#include "replay/report_text.h"
#include "sluice_replay_inputs.h"
#include "sluice_replay_options.h"

namespace {

using namespace sluice;
using replay_cli::ExitCode;
using replay_cli::InputFormat;
using replay_cli::Options;

int fail(ExitCode code, const std::string& message) {
  std::fprintf(stderr, "sluice-replay: %s\n", message.c_str());
  return static_cast<int>(code);
}

int fail_with(ExitCode code, const std::vector<std::string>& lines, const std::string& message) {
  for (const std::string& l : lines) std::fprintf(stderr, "%s\n", l.c_str());
  return fail(code, message);
}

bool keys_credentials(const replay::LoadedPolicy& first, const replay::LoadedPolicy& second) {
  return (first.policy && replay::keys_credentials(*first.policy)) ||
         (second.policy && replay::keys_credentials(*second.policy));
}

// --html's file, opened before anything is read, so a path that cannot be
// written fails at once rather than after the whole replay.
class HtmlFile {
 public:
  [[nodiscard]] std::string open(const std::string& path) {
    file_.reset(std::fopen(path.c_str(), "w"));
    return file_ ? "" : "cannot write " + path + ": " + std::strerror(errno);
  }
  [[nodiscard]] std::string write(const std::string& path, const std::string& text) {
    const bool ok = std::fwrite(text.data(), 1, text.size(), file_.get()) == text.size() && std::fflush(file_.get()) == 0;
    return ok ? "" : "cannot write " + path + ": " + std::strerror(errno);
  }

 private:
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file_{nullptr, &std::fclose};
};

int run(const Options& o) {
  std::unique_ptr<tbb::global_control> threads;
  if (o.threads > 0) {
    threads = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, o.threads);
  }
  replay::BoxStateLoad box = replay::load_box_state({o.state_dir, o.runs_file, o.credentials_file});
  if (!box.errors.empty()) return fail_with(ExitCode::kState, box.errors, "what the box knew cannot be read");
  if (!o.quiet) {
    for (const std::string& w : box.state.warnings) std::fprintf(stderr, "sluice-replay: warning: %s\n", w.c_str());
  }
  replay::LoadedPolicy first = replay::load_policy(o.policy, *box.state.credential_hasher);
  if (!first.policy) return fail_with(ExitCode::kPolicy, first.errors, "the policy " + o.policy + " is not usable");
  replay::LoadedPolicy second;
  if (!o.compare.empty()) {
    second = replay::load_policy(o.compare, *box.state.credential_hasher);
    if (!second.policy) return fail_with(ExitCode::kPolicy, second.errors, "the policy " + o.compare + " is not usable");
  }

  // Without a box's secret, credential digests are keyed with the
  // operator's label secret (made on first use), so reports compare by key;
  // the policies are compiled again with it.
  std::string credential_labels;
  if (keys_credentials(first, second)) {
    if (box.state.secret_from_box) {
      credential_labels = "the box's secret (" + o.state_dir + "/credential.secret)";
    } else if (replay::LabelSecret label = replay::load_label_secret(o.label_dir); label.hasher) {
      box.state.credential_hasher = label.hasher;
      credential_labels = label.path + (label.created ? " (made now)" : "");
      first = replay::load_policy(o.policy, *box.state.credential_hasher);
      if (!o.compare.empty()) second = replay::load_policy(o.compare, *box.state.credential_hasher);
      if (!first.policy || (!o.compare.empty() && !second.policy)) {
        return fail(ExitCode::kPolicy, "the policies do not compile again with the label secret");
      }
    } else {
      credential_labels = "a secret drawn for this run: they match no other report's";
      if (!o.quiet) {
        std::fprintf(stderr, "sluice-replay: warning: credential digests are keyed for this run only: %s\n",
                     label.error.c_str());
      }
    }
  }

  HtmlFile html;
  if (!o.html.empty()) {
    if (std::string e = html.open(o.html); !e.empty()) return fail(ExitCode::kOutput, e);
  }

  replay::ReplayReport report;
  report.credential_labels = credential_labels;
  report.threads = static_cast<unsigned>(tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism));
  const auto started = std::chrono::steady_clock::now();
  replay_cli::ReplayInputs inputs(o, *first.policy);
  if (inputs.fatal_before()) {
    inputs.print_problems(o.quiet);
    return fail(ExitCode::kInput, "an input cannot be read; nothing replayed");
  }
  report.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  replay::PolicyLimiter first_limiter(*first.policy, box.state, o.buckets);
  std::unique_ptr<replay::PolicyLimiter> second_limiter;
  std::optional<replay::PolicyUnderReplay> compared;
  if (second.policy) {
    second_limiter = std::make_unique<replay::PolicyLimiter>(*second.policy, box.state, o.buckets);
    compared = replay::PolicyUnderReplay{second_limiter.get(), o.compare};
  }
  replay::decide_stream(inputs.stream(), {&first_limiter, o.policy}, compared, {.top_keys = o.top}, report);
  inputs.print_problems(o.quiet);
  // Damaged compressed data found on the way: the input was not whole, and
  // a report on part of it would pass for the whole.
  if (inputs.fatal_after()) return fail(ExitCode::kInput, "an input cannot be read whole; no report written");
  report.inputs = inputs.summaries();
  if (const replay::TimeMerge::Lateness late = inputs.stream().late(); late.records > 0 && !o.quiet) {
    std::fprintf(stderr,
                 "sluice-replay: warning: %llu %s after later ones of their input by more than the reorder "
                 "window (at most %.3f s): decided at their own time, after those (--reorder-window)\n",
                 static_cast<unsigned long long>(late.records), late.records == 1 ? "record came" : "records came",
                 static_cast<double>(late.most) / 1e9);
  }
  if (!o.quiet) {
    for (const replay::PolicyOutcome* p : {&report.outcome, report.other ? &*report.other : nullptr}) {
      if (p == nullptr) continue;
      for (const std::string& w : p->warnings) {
        std::fprintf(stderr, "sluice-replay: warning: %s: %s\n", p->policy.c_str(), w.c_str());
      }
    }
  }
  const double seconds = report.load_seconds + report.decide_seconds;
  report.records_per_second = seconds > 0 ? static_cast<double>(report.records) / seconds : 0;

  const std::string text = o.json ? replay::render_json(report) + "\n" : replay::render_text(report);
  std::fwrite(text.data(), 1, text.size(), stdout);
  if (std::fflush(stdout) != 0) return fail(ExitCode::kOutput, "cannot write the report to stdout");
  if (!o.html.empty()) {
    if (std::string e = html.write(o.html, replay::render_html(report)); !e.empty()) return fail(ExitCode::kOutput, e);
  }
  if (const uint64_t skipped = inputs.problem_count(); o.strict && skipped > 0) {
    return fail(ExitCode::kSkipped, std::to_string(skipped) + (skipped == 1 ? " record skipped" : " records skipped") +
                                        " (--strict)");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const replay_cli::ParseResult parsed = replay_cli::parse_options(argc, argv);
  if (!parsed.error.empty()) {
    std::fprintf(stderr, "sluice-replay: %s (sluice-replay --help tells more)\n", parsed.error.c_str());
    return static_cast<int>(ExitCode::kUsage);
  }
  switch (parsed.options.mode) {
    case Options::Mode::kHelp: std::fputs(replay_cli::usage_text().c_str(), stdout); return 0;
    case Options::Mode::kVersion: std::printf("sluice-replay %s\n", SLUICE_VERSION); return 0;
    case Options::Mode::kManual: std::fputs(replay_cli::manual_text().c_str(), stdout); return 0;
    case Options::Mode::kRun: break;
  }
  try {
    return run(parsed.options);
  } catch (const std::bad_alloc&) {
    return fail(ExitCode::kInput, "out of memory reading the inputs; replay fewer at once");
  }
}

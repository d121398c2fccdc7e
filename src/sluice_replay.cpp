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

#include "replay/access_log.h"
#include "replay/capture_file.h"
#include "replay/capture_input.h"
#include "replay/input_stream.h"
#include "replay/replay_run.h"
#include "replay/replay_state.h"
#include "replay/report_html.h"
#include "replay/report_json.h"
#include "replay/report_text.h"
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

// An input's first bytes, decompressed where it is compressed (at most
// 4 KiB), and what it is compressed with.
struct FirstBytes {
  std::string bytes;
  replay::Compression compression = replay::Compression::kNone;
};
FirstBytes first_bytes(const std::string& path) {
  FirstBytes f;
  std::string error;
  const std::unique_ptr<replay::InputStream> in = replay::InputStream::open(path, error);
  if (!in) return f;
  f.compression = in->compression();
  f.bytes.resize(4096);
  size_t got = 0;
  while (got < f.bytes.size()) {
    const size_t k = in->read(f.bytes.data() + got, f.bytes.size() - got);
    if (k == 0) break;
    got += k;
  }
  f.bytes.resize(got);
  return f;
}

std::span<const uint8_t> as_bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// The format of one input: what --format says, or what its first bytes
// (decompressed) show.
InputFormat format_of(const std::string& path, InputFormat given) {
  if (given != InputFormat::kAuto) return given;
  const FirstBytes first = first_bytes(path);
  if (first.bytes.size() >= 4 && replay::capture_format(as_bytes(first.bytes).first<4>()) != replay::CaptureFormat::kUnknown) {
    return InputFormat::kCapture;
  }
  const size_t c = first.bytes.find_first_not_of(" \t\r\n");
  return c != std::string::npos && first.bytes[c] == '{' ? InputFormat::kJson : InputFormat::kNginx;
}

std::string format_name(InputFormat f, const std::string& path) {
  const FirstBytes first = first_bytes(path);
  std::string name;
  switch (f) {
    case InputFormat::kCapture:
      name = first.bytes.size() >= 4 && replay::capture_format(as_bytes(first.bytes).first<4>()) ==
                                            replay::CaptureFormat::kPcapng
                 ? "pcapng"
                 : "pcap";
      break;
    case InputFormat::kJson: name = "json"; break;
    default: name = "nginx"; break;
  }
  if (first.compression != replay::Compression::kNone) name += std::string(", ") + replay::compression_name(first.compression);
  return name;
}

struct Inputs {
  std::vector<replay::RequestRecord> records;
  std::vector<replay::InputSummary> summaries;
  bool fatal = false;
  uint64_t problems = 0;
};

// Every capture among the inputs, read together as one packet stream: a
// capture split by direction (one file per direction or interface) or cut
// into ring-buffer files holds each connection in pieces, whole only when
// the files are merged. By input index; nullopt for the inputs that are not
// captures.
std::vector<std::optional<replay::InputResult>> read_capture_inputs(const Options& o, const std::vector<InputFormat>& formats,
                                                                    const http::Http1Policy& policy) {
  std::vector<std::optional<replay::InputResult>> results(o.inputs.size());
  std::vector<replay::CaptureFile> files;
  for (uint32_t i = 0; i < o.inputs.size(); ++i) {
    if (formats[i] != InputFormat::kCapture) continue;
    const std::string& path = o.inputs[i];
    if (const FirstBytes first = first_bytes(path); first.compression != replay::Compression::kNone) {
      replay::InputResult& r = results[i].emplace();
      r.fatal = true;
      r.problem(path, std::string("a ") + replay::compression_name(first.compression) +
                          "-compressed capture: compressed logs are read, compressed captures not yet (decompress it "
                          "first, as with zcat)");
      continue;
    }
    files.push_back({path, i});
  }
  if (files.empty()) return results;
  replay::CaptureOptions c;
  if (o.service_ports) {
    for (uint16_t p : *o.service_ports) c.service_ports.set(p);
  } else {
    for (uint16_t p : policy.source.service_ports) c.service_ports.set(p);
  }
  c.fields = &policy.fields;
  c.stream = policy.stream;
  c.usage_field = policy.usage_field;
  std::vector<replay::InputResult> read = replay::read_captures(files, c);
  for (size_t j = 0; j < files.size(); ++j) results[files[j].input] = std::move(read[j]);
  return results;
}

replay::InputResult read_log(const Options& o, const std::string& path, uint32_t index, InputFormat format,
                             const http::Http1Policy& policy) {
  replay::LogOptions l;
  l.format = format == InputFormat::kJson ? replay::LogFormat::kJson : replay::LogFormat::kNginx;
  if (!o.log_format.empty()) l.nginx_format = o.log_format;
  l.json_fields = o.json_fields;
  l.usage_field = policy.usage_field;
  return replay::read_access_log(path, index, l);
}

Inputs read_inputs(const Options& o, const http::Http1Policy& policy) {
  Inputs all;
  std::vector<InputFormat> formats;
  for (const std::string& path : o.inputs) formats.push_back(format_of(path, o.format));
  std::vector<std::optional<replay::InputResult>> captures = read_capture_inputs(o, formats, policy);
  for (uint32_t i = 0; i < o.inputs.size(); ++i) {
    const std::string& path = o.inputs[i];
    const InputFormat format = formats[i];
    replay::InputResult r = captures[i] ? std::move(*captures[i]) : read_log(o, path, i, format, policy);
    if (!o.quiet || r.fatal) {
      for (const replay::InputProblem& p : r.problems) std::fprintf(stderr, "%s\n", p.to_string().c_str());
      if (r.problem_count > r.problems.size()) {
        std::fprintf(stderr, "%s: ... and %llu more problems\n", path.c_str(),
                     static_cast<unsigned long long>(r.problem_count - r.problems.size()));
      }
    }
    all.fatal = all.fatal || r.fatal;
    all.problems += r.problem_count;
    if (o.since || o.until) {
      std::erase_if(r.records, [&](const replay::RequestRecord& rec) {
        return (o.since && rec.at < *o.since) || (o.until && rec.at >= *o.until);
      });
    }
    replay::InputSummary s{path, format_name(format, path), r.units_read, r.records.size(), r.problem_count, {}};
    s.problems.assign(r.problems.begin(), r.problems.begin() + static_cast<std::ptrdiff_t>(std::min<size_t>(r.problems.size(), 20)));
    all.summaries.push_back(std::move(s));
    if (all.records.empty()) {
      all.records = std::move(r.records);
    } else {
      all.records.insert(all.records.end(), std::make_move_iterator(r.records.begin()),
                         std::make_move_iterator(r.records.end()));
    }
  }
  return all;
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

  HtmlFile html;
  if (!o.html.empty()) {
    if (std::string e = html.open(o.html); !e.empty()) return fail(ExitCode::kOutput, e);
  }

  replay::ReplayReport report;
  report.threads = static_cast<unsigned>(tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism));
  const auto started = std::chrono::steady_clock::now();
  Inputs inputs = read_inputs(o, *first.policy);
  if (inputs.fatal) return fail(ExitCode::kInput, "an input cannot be read; nothing replayed");
  report.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  report.inputs = std::move(inputs.summaries);

  replay::PolicyLimiter first_limiter(*first.policy, box.state, o.buckets);
  std::unique_ptr<replay::PolicyLimiter> second_limiter;
  std::optional<replay::PolicyUnderReplay> compared;
  if (second.policy) {
    second_limiter = std::make_unique<replay::PolicyLimiter>(*second.policy, box.state, o.buckets);
    compared = replay::PolicyUnderReplay{second_limiter.get(), o.compare};
  }
  replay::decide_records(inputs.records, {&first_limiter, o.policy}, compared, {.top_keys = o.top}, report);
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
  if (o.strict && inputs.problems > 0) {
    return fail(ExitCode::kSkipped, std::to_string(inputs.problems) +
                                        (inputs.problems == 1 ? " record skipped" : " records skipped") + " (--strict)");
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

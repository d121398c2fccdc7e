// See sluice_replay_inputs.h.
#include "sluice_replay_inputs.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>

#include "replay/capture_file.h"
#include "replay/capture_input.h"
#include "replay/input_stream.h"

namespace sluice::replay_cli {

namespace {
// Logs without a logged duration are out of order only by the moments
// between nginx's workers writing one file (and $time_local's second).
constexpr time::Nanos kWriteRaces = 2 * time::kNanosPerSecond;

std::span<const uint8_t> as_bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}
}  // namespace

// One input as first seen: what it is, and for a pipe (which cannot be
// read twice) the stream its first bytes were read from.
struct ReplayInputs::Seen {
  std::string path;
  InputFormat format = InputFormat::kNginx;
  std::string format_name;
  replay::Compression compression = replay::Compression::kNone;
  std::unique_ptr<replay::InputStream> pipe;
};

ReplayInputs::ReplayInputs(const Options& o, const http::Http1Policy& policy)
    : o_(o), usage_field_(policy.usage_field), buffers_(std::make_unique<replay::LogBuffers>()) {
  for (uint32_t i = 0; i < o.inputs.size(); ++i) {
    auto seen = std::make_unique<Seen>();
    seen->path = o.inputs[i];
    results_.push_back(std::make_unique<replay::InputResult>());
    std::string error;
    std::unique_ptr<replay::InputStream> in = replay::InputStream::open(seen->path, error);
    if (!in) {
      results_.back()->fatal = true;
      results_.back()->problem(seen->path, error);
      fatal_ = true;
      seen_.push_back(std::move(seen));
      continue;
    }
    const std::string_view first = in->peek(4096);
    const replay::CaptureFormat capture =
        first.size() >= 4 ? replay::capture_format(as_bytes(first).first<4>()) : replay::CaptureFormat::kUnknown;
    const size_t c = first.find_first_not_of(" \t\r\n");
    seen->format = o.format != InputFormat::kAuto                  ? o.format
                   : capture != replay::CaptureFormat::kUnknown    ? InputFormat::kCapture
                   : c != std::string_view::npos && first[c] == '{' ? InputFormat::kJson
                                                                    : InputFormat::kNginx;
    seen->format_name = seen->format == InputFormat::kCapture
                            ? (capture == replay::CaptureFormat::kPcapng ? "pcapng" : "pcap")
                            : seen->format == InputFormat::kJson ? "json" : "nginx";
    seen->compression = in->compression();
    if (in->compression() != replay::Compression::kNone) {
      seen->format_name += std::string(", ") + replay::compression_name(in->compression());
    }
    struct stat st {};
    if (fstat(fileno(in->file()), &st) != 0 || !S_ISREG(st.st_mode)) seen->pipe = std::move(in);
    seen_.push_back(std::move(seen));
  }
  std::vector<replay::MergeInput> merge;
  read_captures(policy, merge);
  for (uint32_t i = 0; i < seen_.size(); ++i) {
    if (!results_[i]->fatal && seen_[i]->format != InputFormat::kCapture) open_log(i, merge);
  }
  if (!fatal_) merge_ = std::make_unique<replay::TimeMerge>(std::move(merge), replay::MergeWindow{o.since, o.until});
}

// Every capture among the inputs, read together as one packet stream: a
// capture split by direction (one file per direction or interface) or cut
// into ring-buffer files holds each connection in pieces, whole only when
// the files are merged. Streamed, compressed or not, a file or a pipe.
void ReplayInputs::read_captures(const http::Http1Policy& policy, std::vector<replay::MergeInput>& merge) {
  std::vector<replay::CaptureFile> files;
  std::vector<std::unique_ptr<replay::InputStream>> opened;
  std::vector<replay::InputResult*> results;
  for (uint32_t i = 0; i < seen_.size(); ++i) {
    if (results_[i]->fatal || seen_[i]->format != InputFormat::kCapture) continue;
    files.push_back({seen_[i]->path, i});
    opened.push_back(std::move(seen_[i]->pipe));
    results.push_back(results_[i].get());
  }
  if (files.empty()) return;
  replay::CaptureOptions c;
  if (o_.service_ports) {
    for (uint16_t p : *o_.service_ports) c.service_ports.set(p);
  } else {
    for (uint16_t p : policy.source.service_ports) c.service_ports.set(p);
  }
  c.fields = &policy.fields;
  c.stream = policy.stream;
  c.usage_field = policy.usage_field;
  auto stream = std::make_unique<replay::CaptureStream>(std::move(files), std::move(opened), c, results);
  fatal_ = fatal_ || stream->fatal();
  const time::Nanos starts = stream->starts();
  merge.push_back({.opened = std::move(stream),
                   .starts = starts - std::min(starts, replay::kCaptureLookBack),
                   .look_back = replay::kCaptureLookBack});
}

// A log that is a file is read a first step now, to learn the earliest time
// it holds, and opened again when the merge reaches that time; a pipe is
// read once, from now on.
void ReplayInputs::open_log(uint32_t i, std::vector<replay::MergeInput>& merge) {
  Seen& s = *seen_[i];
  const replay::LogOptions options = log_options(s.format);
  replay::InputResult& result = *results_[i];
  if (s.pipe) {
    auto reader = std::make_unique<replay::AccessLogReader>(std::move(s.pipe), s.path, i, options, *buffers_, result);
    const time::Nanos look_back = reader->logs_durations() ? o_.reorder_window : kWriteRaces;
    fatal_ = fatal_ || result.fatal;
    merge.push_back({.opened = std::move(reader), .look_back = look_back});
    return;
  }
  replay::InputResult first_step;
  replay::AccessLogReader peek(s.path, i, options, *buffers_, first_step);
  std::vector<replay::RequestRecord> batch;
  (void)peek.next(batch);
  if (first_step.fatal) {
    result = std::move(first_step);
    fatal_ = true;
    return;
  }
  const time::Nanos look_back = peek.logs_durations() ? o_.reorder_window : kWriteRaces;
  time::Nanos earliest = UINT64_MAX;
  for (const replay::RequestRecord& r : batch) earliest = std::min(earliest, r.at);
  const time::Nanos starts = batch.empty() ? 0 : earliest - std::min(earliest, look_back);
  merge.push_back({.open = [this, i, options, &result]() -> std::unique_ptr<replay::RecordSource> {
                     return std::make_unique<replay::AccessLogReader>(seen_[i]->path, i, options, *buffers_, result);
                   },
                   .starts = starts,
                   .look_back = look_back});
}

ReplayInputs::~ReplayInputs() = default;

replay::LogOptions ReplayInputs::log_options(InputFormat format) const {
  replay::LogOptions l;
  l.format = format == InputFormat::kJson ? replay::LogFormat::kJson : replay::LogFormat::kNginx;
  if (!o_.log_format.empty()) l.nginx_format = o_.log_format;
  l.json_fields = o_.json_fields;
  l.usage_field = usage_field_;
  return l;
}

bool ReplayInputs::fatal_after() const {
  return std::ranges::any_of(results_, [](const auto& r) { return r->fatal; });
}

void ReplayInputs::print_problems(bool quiet) const {
  for (size_t i = 0; i < results_.size(); ++i) {
    const replay::InputResult& r = *results_[i];
    if (quiet && !r.fatal) continue;
    for (const replay::InputProblem& p : r.problems) std::fprintf(stderr, "%s\n", p.to_string().c_str());
    if (r.problem_count > r.problems.size()) {
      std::fprintf(stderr, "%s: ... and %llu more problems\n", seen_[i]->path.c_str(),
                   static_cast<unsigned long long>(r.problem_count - r.problems.size()));
    }
  }
}

uint64_t ReplayInputs::problem_count() const {
  uint64_t n = 0;
  for (const auto& r : results_) n += r->problem_count;
  return n;
}

std::vector<replay::InputSummary> ReplayInputs::summaries() const {
  std::vector<replay::InputSummary> out;
  for (size_t i = 0; i < results_.size(); ++i) {
    const replay::InputResult& r = *results_[i];
    replay::InputSummary s{seen_[i]->path, seen_[i]->format_name, r.units_read, merge_ ? merge_->kept(i) : 0,
                           r.problem_count, {}};
    s.problems.assign(r.problems.begin(),
                      r.problems.begin() + static_cast<std::ptrdiff_t>(std::min<size_t>(r.problems.size(), 20)));
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace sluice::replay_cli

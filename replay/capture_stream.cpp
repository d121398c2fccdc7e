// CaptureStream (capture_input.h): the captures' packets merged by time, a
// packet at a time, each service-port segment handed to its flow
// (capture_flows.h), and flows forgotten on the appliance's flow timeouts.
// read_captures, for whoever wants the records whole, reads one to its end.
#include "replay/capture_input.h"

#include <algorithm>
#include <unordered_map>

#include "dataplane/flow_table.h"
#include "replay/capture_file.h"
#include "replay/capture_flows.h"

namespace sluice::replay {
namespace {

enum class Walk : uint8_t { kOther, kSegment, kMalformed, kFragment, kUnsupportedLink };

struct WalkedPacket {
  FlowSegment segment;
  dataplane::FlowKey key;
  Walk walk = Walk::kOther;
};

WalkedPacket walk_one(const CapturedPacket& p, const std::bitset<65536>& ports, std::vector<uint8_t>& scratch) {
  WalkedPacket w;
  const PacketFrame f = walk_packet(p, scratch);
  const dataplane::FrameView& v = f.view;
  const bool ours = (v.kind == dataplane::FrameKind::kTcp || v.kind == dataplane::FrameKind::kTcpFragment) &&
                    (ports.test(v.dport) || ports.test(v.sport));
  if (!f.link_supported) w.walk = Walk::kUnsupportedLink;
  if (v.kind == dataplane::FrameKind::kMalformed) w.walk = Walk::kMalformed;
  if (!ours) return w;
  if (v.kind == dataplane::FrameKind::kTcpFragment) {
    w.walk = Walk::kFragment;
    return w;
  }
  // The client is the side that sends to the service port.
  const bool from_client = ports.test(v.dport);
  w.key = from_client ? dataplane::FlowKey{v.src, v.dst, v.sport, v.dport} : dataplane::FlowKey{v.dst, v.src, v.dport, v.sport};
  w.segment = {.payload = f.payload, .at = p.at, .number = p.number, .seq = v.seq, .ack = v.ack, .flags = v.flags,
               .from_client = from_client};
  w.walk = Walk::kSegment;
  return w;
}

// Why a packet that is no segment of a service-port flow is worth a word
// (most are not: other traffic is skipped in silence). A link type that is
// not read is said once per file.
std::string walk_problem(const CapturedPacket& p, Walk walk, std::vector<uint32_t>& links_said) {
  if (walk == Walk::kMalformed) {
    std::string message = "headers that do not parse (the appliance drops such a frame)";
    if (p.data.size() < p.original_length) {
      message += ": only " + std::to_string(p.data.size()) + " of its " + std::to_string(p.original_length) +
                 " bytes were captured";
    }
    return message;
  }
  if (walk == Walk::kFragment) return "a fragment of a TCP segment to a service port: not reassembled";
  if (walk == Walk::kUnsupportedLink && std::find(links_said.begin(), links_said.end(), p.link_type) == links_said.end()) {
    links_said.push_back(p.link_type);
    return "link type " + std::to_string(p.link_type) + " is not read (Ethernet, Linux cooked, raw IP, loopback are): "
           "its packets are skipped";
  }
  return {};
}

struct KeyHash {
  size_t operator()(const dataplane::FlowKey& k) const noexcept { return dataplane::flow_hash(k); }
};

time::Nanos timeout_of(FlowTimeout t) noexcept {
  static const dataplane::FlowTimeouts kAppliance;
  switch (t) {
    case FlowTimeout::kHalfOpen: return kAppliance.half_open;
    case FlowTimeout::kClosed: return kAppliance.closed;
    case FlowTimeout::kIdle: break;
  }
  return kAppliance.idle;
}

// Flows are looked over for their timeouts at most once a second of capture
// time, and only once a quarter of the table's size in packets has gone by,
// so the sweeps cost O(1) a packet.
constexpr time::Nanos kSweepEvery = time::kNanosPerSecond;
// Records handed out per call.
constexpr size_t kBatch = 1024;

}  // namespace

struct CaptureStream::File {
  uint32_t index = 0;                   // in files_
  std::unique_ptr<InputStream> opened;  // a pipe, until its reader takes it
  std::unique_ptr<PacketReader> reader;  // while the merge reads the file
  InputResult* result = nullptr;
  CapturedPacket packet;                 // the reader's next packet, in the merge
  std::vector<uint32_t> links_said;
  bool ended = false;
};

struct CaptureStream::Flows {
  std::unordered_map<dataplane::FlowKey, std::unique_ptr<FlowReplay>, KeyHash> table;
  std::unique_ptr<FlowContext> context;
};

CaptureStream::CaptureStream(std::vector<CaptureFile> files, std::vector<std::unique_ptr<InputStream>> opened,
                             const CaptureOptions& options, std::span<InputResult* const> results)
    : options_(options),
      files_(std::move(files)),
      out_(std::make_unique<FlowOutput>()),
      shared_(std::make_unique<ParseBuffers>()),
      builtin_(std::make_unique<http::FieldSet>()),
      flows_(std::make_unique<Flows>()) {
  shared_->fields.resize(options_.stream.head.max_fields);
  shared_->spill.resize(options_.stream.head.max_head_bytes);
  flows_->context = std::make_unique<FlowContext>(FlowContext{
      options_, options_.fields != nullptr ? *options_.fields : *builtin_, files_, *out_, *shared_, free_});
  opened.resize(files_.size());
  starts_ = UINT64_MAX;
  for (uint32_t i = 0; i < files_.size(); ++i) {
    auto f = std::make_unique<File>();
    f->index = i;
    f->result = results[i];
    f->opened = std::move(opened[i]);
    state_.push_back(std::move(f));
    File& file = *state_.back();
    // Its first packet's time places it in the merge. A file is read again
    // from its start when the merge reaches it (until then it costs
    // nothing); a pipe cannot be, so it stays open.
    const bool pipe = file.opened != nullptr;
    if (!open(file)) continue;
    if (file.ended) continue;  // no packet at all: read to its end already
    merge_.push({file.packet.at, i});
    starts_ = std::min(starts_, file.packet.at);
    if (!pipe) {
      file.reader.reset();
      file.result->problems.clear();  // found again when it is read
      file.result->problem_count = 0;
    }
  }
  if (starts_ == UINT64_MAX) starts_ = 0;
}

CaptureStream::~CaptureStream() = default;

// The file opened (or the pipe taken) and its first packet read; false,
// with the result saying why, when it cannot be opened or is no capture.
bool CaptureStream::open(File& f) {
  const CaptureFile& spec = files_[f.index];
  std::unique_ptr<InputStream> in = std::move(f.opened);
  if (!in) {
    std::string error;
    in = InputStream::open(spec.path, error);
    if (!in) {
      f.result->fatal = fatal_ = true;
      f.result->problem(spec.path, error);
      f.ended = true;
      return false;
    }
  }
  f.reader = std::make_unique<PacketReader>(std::move(in), spec.path);
  read_ahead(f);
  if (f.reader == nullptr && f.result->fatal) return false;
  return true;
}

// The file's next packet, or its end: what it read is counted, its
// problems said, and the file and its decompressor go at once.
void CaptureStream::read_ahead(File& f) {
  const bool got = f.reader->next(f.packet);
  for (CaptureProblem& p : f.reader->take_problems()) f.result->problem(std::move(p.problem.where), std::move(p.problem.message));
  if (got) return;
  f.result->units_read = f.reader->packet_count();
  if (const auto& fatal = f.reader->fatal()) {
    f.result->fatal = fatal_ = true;
    f.result->problem(fatal->where, fatal->message);
  }
  if (const std::string e = f.reader->stream_error(); !e.empty()) {
    // What was read is kept, but the input is not whole: said first.
    f.result->fatal = true;
    ++f.result->problem_count;
    f.result->problems.insert(f.result->problems.begin(), InputProblem{files_[f.index].path, e});
    if (f.result->problems.size() > InputResult::kMaxProblems) f.result->problems.pop_back();
  }
  f.reader.reset();
  f.ended = true;
}

void CaptureStream::replay_packet(File& f) {
  const CapturedPacket& p = f.packet;
  now_ = std::max(now_, p.at);
  WalkedPacket w = walk_one(p, options_.service_ports, scratch_);
  if (w.walk != Walk::kSegment) {
    std::string message = walk_problem(p, w.walk, f.links_said);
    if (!message.empty()) f.result->problem(files_[f.index].path + ": packet " + std::to_string(p.number), std::move(message));
    return;
  }
  w.segment.file = f.index;
  auto [it, fresh] = flows_->table.try_emplace(w.key);
  if (fresh) {
    it->second = std::make_unique<FlowReplay>(w.key, *flows_->context);
    most_flows_ = std::max(most_flows_, flows_->table.size());
  }
  it->second->segment(w.segment);
  if (++since_sweep_ >= flows_->table.size() / 4 && now_ >= last_sweep_ + kSweepEvery) sweep();
}

// Flows whose time is up on the capture's clock are forgotten, as the
// appliance's flow table forgets them: a later segment on the tuple is a
// new connection (adopted at a request head, or begun by a SYN).
void CaptureStream::sweep() {
  since_sweep_ = 0;
  last_sweep_ = now_;
  auto& table = flows_->table;
  for (auto it = table.begin(); it != table.end();) {
    FlowReplay& flow = *it->second;
    if (now_ > flow.last_at() && now_ - flow.last_at() > timeout_of(flow.timeout())) {
      flow.finish(now_);
      it = table.erase(it);
    } else {
      ++it;
    }
  }
}

void CaptureStream::hand_out_problems() {
  for (FlowProblem& p : out_->problems) {
    state_[p.file]->result->problem(std::move(p.problem.problem.where), std::move(p.problem.problem.message));
  }
  out_->problems.clear();
}

bool CaptureStream::next(std::vector<RequestRecord>& out) {
  if (ended_) return false;
  while (out_->records.size() < kBatch) {
    if (merge_.empty()) {
      // The capture's end: every flow still live ends with it.
      for (auto& [key, flow] : flows_->table) flow->finish(now_);
      flows_->table.clear();
      ended_ = true;
      break;
    }
    const Entry e = merge_.top();
    merge_.pop();
    File& f = *state_[e.file];
    if (f.reader == nullptr) {
      // Reached: opened again, its first packet back in the merge.
      if (open(f) && !f.ended) merge_.push({f.packet.at, e.file});
      continue;
    }
    replay_packet(f);
    hand_out_problems();
    read_ahead(f);
    if (!f.ended) merge_.push({f.packet.at, e.file});
  }
  hand_out_problems();
  const bool any = !out_->records.empty();
  out.insert(out.end(), std::make_move_iterator(out_->records.begin()), std::make_move_iterator(out_->records.end()));
  out_->records.clear();
  return any || !ended_;
}

std::vector<InputResult> read_captures(std::span<const CaptureFile> files, const CaptureOptions& options) {
  std::vector<InputResult> results(files.size());
  std::vector<InputResult*> to(files.size());
  std::unordered_map<uint32_t, size_t> file_of;  // by input
  for (size_t i = 0; i < files.size(); ++i) {
    to[i] = &results[i];
    file_of.emplace(files[i].input, i);
  }
  std::vector<RequestRecord> all;
  {
    CaptureStream stream({files.begin(), files.end()}, {}, options, to);
    while (stream.next(all)) {
    }
  }
  // A response's end folded into its request, as a log gives it; the
  // request then waits for no record of its own.
  std::unordered_map<uint64_t, size_t> waiting;
  for (size_t i = 0; i < all.size(); ++i) {
    RequestRecord& r = all[i];
    if (r.kind == RequestRecord::Kind::kRequest && r.response != 0) {
      waiting.emplace(r.response, i);
      r.response = 0;
    } else if (r.kind == RequestRecord::Kind::kResponseEnd && r.has_usage) {
      const auto it = waiting.find(r.response);
      if (it == waiting.end()) continue;
      RequestRecord& answered = all[it->second];
      answered.has_usage = true;
      answered.usage_tokens = r.usage_tokens;
      answered.usage_at = r.at;
    }
  }
  for (RequestRecord& r : all) {
    if (r.kind != RequestRecord::Kind::kRequest) continue;
    results[file_of.at(r.input)].records.push_back(std::move(r));
  }
  return results;
}

InputResult read_capture(const std::string& path, uint32_t input, const CaptureOptions& options) {
  const CaptureFile file{path, input};
  return std::move(read_captures({&file, 1}, options).front());
}

}  // namespace sluice::replay

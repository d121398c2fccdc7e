// A limiter table file (control/table_file.h) left in any state, re-attached:
// the input is a list of patches (offset, bytes) laid over a valid file, so
// that the header, the two copies of the kinds record and the slots are
// damaged in every way the fuzzer finds. Whatever the bytes, opening it
// either re-attaches it or sets it aside with a reason and makes a new one;
// never crashes. A re-attached table, after recover(), holds no frozen word,
// counts its live slots within its capacity, and is charged, looked up and
// reclaimed within its memory (ASan and UBSan watch).
//
// The same patches are laid over a flow file (control/flow_file.h) with
// flows in it, some holding parse contexts (inside a request body, inside
// a response, between requests with fields pending, a head held across
// segments) and edit holds:
// opening it carries flows, or sets it aside with a reason; never crashes.
// Whatever it carries is each key once, no more than the file had slots,
// each judged by carry_verdict() and those that carry taken into a table on
// the new file's memory, as sluiced does; each context that came along is
// taken on by a fresh one (ParseContext::carry_on) or refused, and one
// taken on is fed more of its request and response (ASan and UBSan watch).
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "control/flow_file.h"
#include "control/table_file.h"
#include "dataplane/answer_store.h"
#include "dataplane/change_undo.h"
#include "dataplane/flow_carry.h"
#include "dataplane/flow_key.h"
#include "dataplane/flow_table.h"
#include "dataplane/parse_context.h"
#include "dataplane/policy_snapshot.h"
#include "flow_policies.h"
#include "http/http1_policy.h"
#include "limiter/bucket_table.h"
#include "limiter/bucket_key.h"
#include "policy/policy_loader.h"

namespace {

using sluice::control::TableFile;
using sluice::limiter::BucketKey;
using sluice::limiter::BucketTable;

const BucketTable::Options kOptions{.capacity = 256, .regions = 4, .max_probe = 16, .bucket_kinds = 4, .words = 2};

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "table_file_fuzz: %s\n", what);
  std::abort();
}

void remove_files(const std::string& path) {
  (void)::unlink(path.c_str());
  (void)::unlink((path + ".set-aside").c_str());
  (void)::unlink((path + ".new").c_str());
}

// A directory of its own for the process, removed when it exits.
const std::string& scratch() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/sluice-table-fuzz-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) fail("mkdtemp");
    return std::string(tmpl);
  }();
  static const bool cleaned_at_exit = [] {
    return std::atexit([] {
      remove_files(dir + "/t.table");
      (void)::rmdir(dir.c_str());
    }) == 0;
  }();
  (void)cleaned_at_exit;
  return dir;
}

// Lays the input's patches over the file at `path`: u32 offset (into the
// file, or past it by up to a page to grow it), u8 length, then that many
// bytes; a patch at offset 0xffffffff cuts the file to the offset its next
// 4 bytes give.
void patch(const std::string& path, const uint8_t* data, size_t size) {
  const int fd = ::open(path.c_str(), O_RDWR);
  if (fd < 0) fail("reopen");
  const off_t end = ::lseek(fd, 0, SEEK_END);
  size_t i = 0;
  while (i + 5 <= size) {
    uint32_t off;
    std::memcpy(&off, data + i, 4);
    const size_t len = data[i + 4];
    i += 5;
    if (off == 0xffffffffu && i + 4 <= size) {
      uint32_t cut;
      std::memcpy(&cut, data + i, 4);
      i += 4;
      if (::ftruncate(fd, static_cast<off_t>(cut % static_cast<uint32_t>(end + 4096))) != 0) fail("ftruncate");
      continue;
    }
    const size_t n = len < size - i ? len : size - i;
    const off_t at = static_cast<off_t>(off % static_cast<uint32_t>(end + 4096));
    if (::pwrite(fd, data + i, n, at) != static_cast<ssize_t>(n)) fail("pwrite");
    i += n;
  }
  ::close(fd);
}

sluice::dataplane::FlowKey flow_key(uint16_t port) {
  sluice::dataplane::FlowKey k{};
  k.client.bytes[10] = 0xff;
  k.client.bytes[11] = 0xff;
  k.client.bytes[12] = 198;
  k.client.bytes[13] = 18;
  k.client.bytes[15] = 10;
  k.origin = k.client;
  k.origin.bytes[15] = 20;
  k.client_port = port;
  k.origin_port = 80;
  return k;
}

// The policy the contexts parse under.
const sluice::http::Http1Policy& fuzz_policy() {
  static std::unique_ptr<sluice::limiter::KeyHasher> hasher;
  static std::unique_ptr<sluice::http::Http1Policy> policy;
  if (policy) return *policy;
  std::array<uint8_t, sluice::limiter::KeyHasher::kSecretSize> secret{};
  hasher = std::make_unique<sluice::limiter::KeyHasher>(secret);
  sluice::policy::LoadResult loaded = sluice::policy::load_policy_text(sluice::test::kKeepPolicy, "fuzz.yaml");
  if (!loaded.errors.empty() || !loaded.policy) fail("the policy does not load");
  std::vector<sluice::policy::PolicyError> errors;
  auto compiled = sluice::http::compile_http1_policy(*loaded.policy, *hasher, errors);
  if (!errors.empty() || !compiled) fail("the policy does not compile");
  policy = std::make_unique<sluice::http::Http1Policy>(std::move(*compiled));
  return *policy;
}

// Context i of a pool left where a flow's would be: inside a request body,
// inside a response's body, between requests with an edit pending.
void leave_context(sluice::dataplane::ParseContext& ctx, unsigned i) {
  namespace http = sluice::http;
  const auto feed = [](auto& stream, std::string_view bytes) {
    for (size_t at = 0; at < bytes.size();) {
      const auto step = stream.next(std::span<const char>(bytes.data() + at, bytes.size() - at));
      if (step.consumed == 0) break;
      at += step.consumed;
    }
  };
  if (i == 4) {  // a head held across segments, as RequestPath leaves one
    constexpr std::string_view held = "GET /held HTTP/1.1\r\nHost: a";
    std::memcpy(ctx.head, held.data(), held.size());
    ctx.head_len = held.size();
    ctx.buffering = true;
    feed(*ctx.requests, std::string_view(ctx.head, ctx.head_len));
    return;
  }
  feed(*ctx.requests, "POST /loose HTTP/1.1\r\nHost: api\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab");
  if (!ctx.responses.expect(http::RequestKind::kOrdinary)) fail("a response not expected");
  ++ctx.requests_forwarded;
  if (i % 3 == 1) feed(ctx.responses, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123");
  if (i % 3 == 2) {
    (void)ctx.to_client.add(1000, 0, 24);
    ctx.edit_bytes[0].fields.assign("RateLimit-Remaining: 9\r\n");
  }
  ctx.usage_count = 1;
}

// A flow file with flows in both workers' tables, patched, opened again.
void fuzz_flow_file(const std::string& dir, const uint8_t* data, size_t size) {
  using sluice::control::FlowFile;
  namespace dp = sluice::dataplane;
  const sluice::http::Http1Policy& policy = fuzz_policy();
  constexpr unsigned kContexts = 6;
  const FlowFile::Geometry g{2,
                             64,
                             kContexts,
                             4,
                             8192,
                             dp::ContextPool::head_stride(policy.stream.head.max_head_bytes),
                             2,
                             dp::BindStash::buffer_bytes(policy.stream.head.max_head_bytes)};
  FlowFile::Seeds seeds;
  seeds.flow = 7;
  const std::string path = dir + "/flows.table";
  remove_files(path);
  {
    FlowFile::Opened made = FlowFile::open(dir, g, "boot", 1, seeds);
    if (!made.file) fail(made.error.c_str());
    for (unsigned w = 0; w < 2; ++w) {
      dp::ContextPool pool(kContexts, policy.stream.head.max_head_bytes, policy.stream.head.max_fields,
                           made.file->contexts(w), made.file->heads(w));
      dp::FlowTable t(made.file->slots(w));
      for (uint16_t p = 1; p <= 40; ++p) {
        const dp::FlowKey key = flow_key(static_cast<uint16_t>(p + 100 * w));
        dp::TcpFlow* f = t.insert(key, p);
        if (f == nullptr) fail("flow table full");
        f->state = dp::FlowState::kEstablished;
        f->ip_version = 4;
        if (p == kContexts + 6) {  // one being bound, its first request stashed
          dp::BindStash stashes(2, policy.stream.head.max_head_bytes, made.file->stashes(w), made.file->stash_slots(w));
          f->bind.state = dp::Binding::kBinding;
          f->stash = stashes.acquire();
          const std::string_view req = "GET /stashed HTTP/1.1\r\nHost: a\r\n\r\n";
          if (!stashes.append(f->stash, 100, std::span(reinterpret_cast<const uint8_t*>(req.data()), req.size()))) {
            fail("stash append");
          }
        }
        if (p == kContexts + 5) {  // one refused, its answer in the store
          dp::AnswerStore store(8192, made.file->answers(w), made.file->answers_written(w));
          f->state = dp::FlowState::kAnswered;
          f->answer.len = 20;
          f->answer.pos = store.put("HTTP/1.1 429 Slow\r\n\r\n");
        }
        if (p <= kContexts) {  // the first flows hold contexts
          const int32_t c = pool.acquire();
          pool.start(c, policy, 1);
          dp::ParseContext& ctx = pool.at(c);
          ctx.owner = key;
          ctx.owner_hash = p;
          leave_context(ctx, p);
          f->context = c;
          if (w == 0 && (p == 2 || p == 4)) {
            // Worker 0 was killed in the middle of a change to this flow:
            // its copy in the undo area (dataplane/change_undo.h), the
            // second one (a held head) over the first.
            dp::WorkMarker marker(made.file->mark(0));
            dp::ChangeUndo undo(made.file->undo(0), policy.stream.head.max_head_bytes);
            marker.flow(f->hash);
            undo.save(f, &ctx, nullptr, nullptr, marker);
          }
        } else if (p <= kContexts + 4) {  // the next ones holds
          f->hold = p - kContexts - 1;
          dp::EditHold& h = made.file->holds(w)[static_cast<size_t>(f->hold)];
          h.count = 1;
          h.edits[0] = {1000, 0, 24, 0};
          h.bytes[0].fields.assign("RateLimit-Remaining: 8\r\n");
        }
      }
    }
    dp::WorkMarker(made.file->mark(1)).slot(3);
  }
  patch(path, data, size);
  FlowFile::Opened o = FlowFile::open(dir, g, "boot", 2, seeds);
  if (!o.file) fail(o.error.c_str());
  if (o.outcome == FlowFile::Outcome::kSetAside && o.note.empty()) fail("flow file set aside without a reason");
  if (o.carried.size() > 2 * 64) fail("more flows carried than the file had slots");
  for (size_t i = 1; i < o.carried.size(); ++i) {
    if (o.carried[i - 1].flow.key == o.carried[i].flow.key) fail("a key carried twice");
  }
  dp::FlowTable t(o.file->slots(0));
  std::vector<char> fresh_head(g.head_bytes);
  dp::ContextPool fresh(1, policy.stream.head.max_head_bytes, policy.stream.head.max_fields, o.file->contexts(0),
                        fresh_head);
  for (const dp::CarriedFlow& c : o.carried) {
    const dp::TcpFlow& f = c.flow;
    if (dp::carry_verdict(c, o.answers_kept) != dp::CarryVerdict::kCarries) continue;
    if (c.flow.state == dp::FlowState::kAnswered) {  // its answer as a retransmission would get it
      const dp::AnswerStore store(8192, o.file->answers(c.worker), o.file->answers_written(c.worker));
      (void)store.get(c.flow.answer.pos, c.flow.answer.len);
    }
    if (c.context != nullptr) {
      const int32_t i = fresh.acquire();
      fresh.start(i, policy, 2);
      dp::ParseContext& ctx = fresh.at(i);
      if (ctx.carry_on(c.context->view(), o.answers_kept, c.context->held_head)) {
        // What it goes on with: more of the body, more of the response.
        const std::string_view more = "3\r\nabc\r\n0\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n";
        for (size_t at = 0; at < more.size();) {
          const auto step = ctx.requests->next(std::span<const char>(more.data() + at, more.size() - at));
          if (step.consumed == 0) break;
          at += step.consumed;
        }
        const std::string_view reply = "456789HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
        for (size_t at = 0; at < reply.size();) {
          const auto step = ctx.responses.next(std::span<const char>(reply.data() + at, reply.size() - at));
          if (step.consumed == 0) break;
          at += step.consumed;
        }
        ctx.acknowledged_by_client(5000);
        (void)ctx.take_usage();
        (void)ctx.take_response_fields();
      }
      fresh.release(i);
    }
    if (c.hold && !c.hold->valid()) continue;
    if (c.stash) {  // into a stash of this process, as FlowEngine::resume puts it
      dp::BindStash stash(1, policy.stream.head.max_head_bytes);
      const int32_t s = stash.acquire();
      if (!c.stash->bytes.empty() && stash.append(s, c.stash->start, c.stash->bytes) && c.stash->fin) {
        (void)stash.close(s, c.stash->start + static_cast<uint32_t>(c.stash->bytes.size()));
      }
      if (stash.bytes(s).size() > c.stash->bytes.size()) fail("a stash holds more than was carried");
    }
    if (t.find(f.key, dp::flow_hash(f.key, 7)) != nullptr) fail("a carried key found before it was inserted");
    dp::TcpFlow* in = t.insert(f.key, dp::flow_hash(f.key, 7));
    if (in == nullptr) break;  // the table's 7/8
    *in = f;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& dir = scratch();
  const std::string path = dir + "/t.table";
  remove_files(path);
  {
    TableFile::Opened made = TableFile::open(dir, "t.table", kOptions, 1);
    if (!made.file) fail(made.error.c_str());
    if (!made.file->record_kinds({{0, "alpha", 1}, {1, "beta", 2}})) fail("record_kinds");
    BucketTable t(kOptions, made.file->slots());
    for (uint64_t n = 1; n <= 40; ++n) (void)t.find_or_claim(BucketKey{n << 8 | 1, (n << 16) | (n & 3)});
  }
  patch(path, data, size);
  TableFile::Opened o = TableFile::open(dir, "t.table", kOptions, 2);
  if (!o.file) fail(o.error.c_str());
  if (o.outcome == TableFile::Outcome::kSetAside && o.note.empty()) fail("set aside without a reason");
  BucketTable t(kOptions, o.file->slots());
  const size_t live = t.recover();
  if (live > t.capacity()) fail("more live slots than the capacity");
  for (unsigned r = 0; r < t.regions(); ++r) {
    t.visit_region(r, [](const BucketKey&, const uint64_t* w) {
      if (w[0] == BucketTable::kFrozen || w[1] == BucketTable::kFrozen) fail("a frozen word after recover()");
    });
  }
  for (uint16_t k = 0; k < 4; ++k) {
    if (t.overflow_slot(k).load(0) == BucketTable::kFrozen) fail("a frozen overflow bucket after recover()");
  }
  (void)o.file->kinds();
  for (uint64_t n = 1; n <= 64; ++n) {
    const BucketTable::Found f = t.find_or_claim(BucketKey{n * 0x9e3779b97f4a7c15ull | 1, (n << 16) | (n & 7)});
    f.slot->word(0).store(n);
  }
  for (unsigned r = 0; r < t.regions(); ++r) {
    t.close_region(r);
    (void)t.retire_idle(r, [](uint16_t, const uint64_t* w) { return (w[0] & 1) == 0; });
    t.open_region(r);
  }
  if (!o.file->record_kinds({{0, "alpha", 1}})) fail("record_kinds after re-attach");
  fuzz_flow_file(dir, data, size);
  return 0;
}

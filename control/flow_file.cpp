// See flow_file.h. Control plane only: runs at start, before any worker.
#include "control/flow_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "control/crc32c.h"
#include "control/mapped_file.h"

namespace sluice::control {

namespace {

using dataplane::ContextPool;
using dataplane::EditHold;
using dataplane::StashSlot;
using dataplane::TcpFlow;
using dataplane::UndoArea;
using dataplane::WorkMark;

constexpr char kMagic[8] = {'S', 'L', 'U', 'I', 'C', 'E', 'F', 'L'};
constexpr uint32_t kMaxWorkers = 1024;
constexpr uint64_t kMaxSlots = uint64_t{1} << 28;
constexpr uint64_t kMaxContexts = uint64_t{1} << 20;  // per worker, as for holds
constexpr size_t kMarkBytes = 64;  // the mark's cache line, then the answer store's count's, then the slots
constexpr size_t kLinesBytes = 2 * kMarkBytes;
constexpr uint64_t kMaxAnswerBytes = uint64_t{1} << 30;  // per worker
constexpr uint64_t kMaxHeadBytes = uint64_t{1} << 20;    // per context
static_assert(sizeof(WorkMark) <= kMarkBytes && alignof(TcpFlow) <= kMarkBytes);

struct Header {
  char magic[8];
  uint32_t layout;
  uint32_t crc;  // CRC-32C of the header with this field 0
  uint32_t flow_bytes;
  uint32_t mark_bytes;
  uint32_t workers;
  uint32_t reserved;
  uint64_t slots;  // per worker
  uint64_t region_bytes;
  uint64_t file_bytes;
  uint64_t generation;
  uint64_t created_at;  // UTC ns
  char boot[40];        // the boot it was made in, NUL-padded
  uint8_t cookie_seed[32];
  uint64_t flow_seed;
  uint64_t share_seed;
  uint32_t context_bytes;  // ContextPool::object_stride()
  uint32_t hold_bytes;
  uint64_t contexts;      // per worker
  uint64_t holds;         // per worker
  uint64_t answer_bytes;  // per worker: the answer store's ring
  uint64_t head_bytes;    // per context: its held-head buffer
  uint64_t stashes;       // per worker
  uint64_t stash_bytes;   // per stash: its buffer
};
static_assert(sizeof(Header) <= kFilePage);

uint32_t header_crc(Header h) {
  h.crc = 0;
  return crc32c({reinterpret_cast<const char*>(&h), sizeof h});
}

// A worker's region: its mark, its undo area (a flow, a context, a hold and
// a held head, each from a 64-byte boundary), its slots and used flags, its
// contexts (from a 64-byte boundary), its holds.
constexpr size_t lines(size_t bytes) { return (bytes + 63) / 64 * 64; }
size_t undo_context_offset() { return kLinesBytes + lines(sizeof(TcpFlow)); }
size_t undo_hold_offset() { return undo_context_offset() + lines(ContextPool::object_stride()); }
size_t undo_stash_offset() { return undo_hold_offset() + lines(sizeof(EditHold)); }
size_t undo_head_offset() { return undo_stash_offset() + lines(sizeof(StashSlot)); }
size_t slots_offset(uint64_t head_bytes) { return undo_head_offset() + lines(head_bytes); }
size_t contexts_offset(const FlowFile::Geometry& g) {
  return lines(slots_offset(g.head_bytes) + g.slots * sizeof(TcpFlow) + g.slots);
}
size_t holds_offset(const FlowFile::Geometry& g) {
  return contexts_offset(g) + g.contexts * ContextPool::object_stride();
}
size_t heads_offset(const FlowFile::Geometry& g) { return lines(holds_offset(g) + g.holds * sizeof(EditHold)); }
size_t stash_slots_offset(const FlowFile::Geometry& g) { return lines(heads_offset(g) + g.contexts * g.head_bytes); }
size_t stashes_offset(const FlowFile::Geometry& g) {
  return round_to_page(stash_slots_offset(g) + g.stashes * sizeof(StashSlot));
}
size_t answers_offset(const FlowFile::Geometry& g) { return round_to_page(stashes_offset(g) + g.stashes * g.stash_bytes); }
size_t region_bytes_for(const FlowFile::Geometry& g) { return answers_offset(g) + round_to_page(g.answer_bytes); }
FlowFile::Geometry geometry_of(const Header& h) {
  return {h.workers, h.slots, h.contexts, h.holds, h.answer_bytes, h.head_bytes, h.stashes, h.stash_bytes};
}

Header header_for(const FlowFile::Geometry& g, std::string_view boot, uint64_t now, const FlowFile::Seeds& s) {
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.layout = FlowFile::kLayout;
  h.flow_bytes = sizeof(TcpFlow);
  h.mark_bytes = sizeof(WorkMark);
  h.workers = g.workers;
  h.slots = g.slots;
  h.context_bytes = static_cast<uint32_t>(ContextPool::object_stride());
  h.hold_bytes = sizeof(EditHold);
  h.contexts = g.contexts;
  h.holds = g.holds;
  h.answer_bytes = g.answer_bytes;
  h.head_bytes = g.head_bytes;
  h.stashes = g.stashes;
  h.stash_bytes = g.stash_bytes;
  h.region_bytes = region_bytes_for(g);
  h.file_bytes = kFilePage + h.region_bytes * g.workers;
  h.generation = 1;
  h.created_at = now;
  std::memcpy(h.boot, boot.data(), std::min(boot.size(), sizeof h.boot - 1));
  std::memcpy(h.cookie_seed, s.cookie.data(), sizeof h.cookie_seed);
  h.flow_seed = s.flow;
  h.share_seed = s.share;
  h.crc = header_crc(h);
  return h;
}

// "" if `h`, read from a file of `size` bytes sized in `unit`s
// (file_unit), is a flow file this binary reads, else why not.
std::string check(const Header& h, uint64_t size, size_t unit) {
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) return "not a sluice flow file (no SLUICEFL at its start)";
  if (h.layout != FlowFile::kLayout) {
    return "layout " + std::to_string(h.layout) + ", this sluiced reads layout " + std::to_string(FlowFile::kLayout);
  }
  if (h.crc != header_crc(h)) return "its header is damaged (checksum)";
  if (h.flow_bytes != sizeof(TcpFlow) || h.mark_bytes != sizeof(WorkMark) ||
      h.context_bytes != ContextPool::object_stride() || h.hold_bytes != sizeof(EditHold)) {
    return "its flows, marks, contexts and holds are " + std::to_string(h.flow_bytes) + ", " +
           std::to_string(h.mark_bytes) + ", " + std::to_string(h.context_bytes) + " and " +
           std::to_string(h.hold_bytes) + " bytes, this sluiced's " + std::to_string(sizeof(TcpFlow)) + ", " +
           std::to_string(sizeof(WorkMark)) + ", " + std::to_string(ContextPool::object_stride()) + " and " +
           std::to_string(sizeof(EditHold));
  }
  if (h.workers == 0 || h.workers > kMaxWorkers || h.slots < 16 || h.slots > kMaxSlots ||
      (h.slots & (h.slots - 1)) != 0 || h.contexts > kMaxContexts || h.holds > kMaxContexts ||
      h.answer_bytes > kMaxAnswerBytes || h.head_bytes > kMaxHeadBytes || h.stashes > kMaxContexts ||
      h.stash_bytes > kMaxHeadBytes + dataplane::BindStash::kWindow ||
      h.region_bytes != region_bytes_for(geometry_of(h)) ||
      h.file_bytes != kFilePage + h.region_bytes * h.workers) {
    return "its geometry is not one sluiced makes (" + std::to_string(h.workers) + " workers of " +
           std::to_string(h.slots) + " slots)";
  }
  if (size != (h.file_bytes + unit - 1) / unit * unit) {
    return "it is " + std::to_string(size) + " bytes, its header says " + std::to_string(h.file_bytes);
  }
  return {};
}

bool same_boot(const Header& h, std::string_view boot) {
  if (boot.empty()) return false;
  return std::string_view(h.boot, strnlen(h.boot, sizeof h.boot)) == boot.substr(0, sizeof h.boot - 1);
}

struct Region {
  WorkMark* mark;
  uint64_t* answers_written;
  UndoArea undo;
  TcpFlow* slots;
  uint8_t* used;
  std::byte* contexts;
  EditHold* holds;
  char* heads;
  StashSlot* stash_slots;
  uint8_t* stashes;
  std::byte* answers;
};
dataplane::PoolImages pools_of(const Region& r, const Header& h) {
  return {{r.contexts, h.contexts * h.context_bytes},
          {r.holds, h.holds},
          {r.heads, h.contexts * h.head_bytes},
          h.head_bytes,
          {r.stashes, h.stashes * h.stash_bytes},
          {r.stash_slots, h.stashes},
          h.stash_bytes};
}
Region region_of(std::byte* map, const Header& h, unsigned w) {
  std::byte* base = map + kFilePage + h.region_bytes * w;
  const FlowFile::Geometry g = geometry_of(h);
  auto* slots = reinterpret_cast<TcpFlow*>(base + slots_offset(h.head_bytes));
  return {reinterpret_cast<WorkMark*>(base),
          reinterpret_cast<uint64_t*>(base + kMarkBytes),
          {reinterpret_cast<TcpFlow*>(base + kLinesBytes), base + undo_context_offset(),
           reinterpret_cast<EditHold*>(base + undo_hold_offset()),
           reinterpret_cast<StashSlot*>(base + undo_stash_offset()),
           {reinterpret_cast<char*>(base + undo_head_offset()), h.head_bytes}},
          slots,
          reinterpret_cast<uint8_t*>(slots + h.slots),
          base + contexts_offset(g),
          reinterpret_cast<EditHold*>(base + holds_offset(g)),
          reinterpret_cast<char*>(base + heads_offset(geometry_of(h))),
          reinterpret_cast<StashSlot*>(base + stash_slots_offset(g)),
          reinterpret_cast<uint8_t*>(base + stashes_offset(g)),
          base + answers_offset(geometry_of(h))};
}

struct Found {
  TcpFlow flow;
  unsigned worker;
};
bool key_less(const Found& a, const Found& b) { return std::memcmp(&a.flow.key, &b.flow.key, sizeof a.flow.key) < 0; }
bool key_equal(const Found& a, const Found& b) {
  return std::memcmp(&a.flow.key, &b.flow.key, sizeof a.flow.key) == 0;
}

// What a worker's mark says of the flow it names (flow_carry.h).
enum class Marked : uint8_t {
  kNone,      // no flow is marked, or its change had not begun: all carried as they are
  kUndone,    // carried as it was before the change, from the undo area
  kDropped,   // made by the change: as if its segment had been lost
  kReset,     // cannot be undone (something of it was sent, a sweep's, or the undo area is not its)
};
Marked judge_mark(const WorkMark& mark, const UndoArea& undo, const Header& h) {
  if (mark.what == WorkMark::kSlot) return Marked::kReset;
  if (mark.what != WorkMark::kFlow) return Marked::kNone;
  if (mark.escaped != 0) return Marked::kReset;
  switch (mark.before) {
    case WorkMark::kUntouched:
      return Marked::kNone;
    case WorkMark::kWasAbsent:
      return Marked::kDropped;
    case WorkMark::kSaved:
      return undo.flow->hash == mark.hash && mark.head_len <= h.head_bytes ? Marked::kUndone : Marked::kReset;
    default:
      return Marked::kReset;
  }
}

// Every used slot's flow but those a mark names, with what it borrowed; a
// key in two slots kept once if both copies agree (a crash inside a
// backward shift), else not. A marked flow whose change can be undone is
// carried as the undo area kept it.
void read_flows(std::byte* map, const Header& h, FlowFile::Opened& out) {
  std::vector<Found> v;
  std::vector<dataplane::CarriedFlow> undone;
  for (unsigned w = 0; w < h.workers; ++w) {
    const Region r = region_of(map, h, w);
    const WorkMark mark = *r.mark;
    const Marked marked = judge_mark(mark, r.undo, h);
    for (uint64_t i = 0; i < h.slots; ++i) {
      if (r.used[i] == 0) continue;
      const TcpFlow& f = r.slots[i];
      const bool named = mark.what == WorkMark::kFlow ? f.hash == mark.hash : mark.slot == i;
      if (marked != Marked::kNone && named) {
        if (marked == Marked::kReset) {
          ++out.marked;
          out.left_out.push_back(f.key);
        }
        continue;
      }
      v.push_back({f, w});
    }
    if (marked == Marked::kUndone || marked == Marked::kDropped) ++out.undone;
    if (marked == Marked::kUndone) {
      undone.push_back(dataplane::carried_from_undo(r.undo, mark.head_len, pools_of(r, h)));
      undone.back().worker = w;
    }
  }
  std::stable_sort(v.begin(), v.end(), key_less);
  for (size_t i = 0; i < v.size();) {
    size_t j = i + 1;
    bool agree = true;
    while (j < v.size() && key_equal(v[i], v[j])) {
      agree = agree && std::memcmp(&v[i].flow, &v[j].flow, sizeof(TcpFlow)) == 0;
      ++j;
    }
    out.duplicates += j - i - 1;
    if (agree) {
      const Region r = region_of(map, h, v[i].worker);
      out.carried.push_back(dataplane::carried_from(v[i].flow, pools_of(r, h)));
      out.carried.back().worker = v[i].worker;
    } else {
      out.left_out.push_back(v[i].flow.key);
    }
    i = j;
  }
  // An undo copy whose key another slot holds too is not the flow the mark
  // named (a damaged area): neither is trusted over the other.
  std::vector<Found> kept;
  kept.reserve(out.carried.size());
  for (const dataplane::CarriedFlow& c : out.carried) kept.push_back({c.flow, c.worker});
  std::sort(kept.begin(), kept.end(), key_less);
  for (dataplane::CarriedFlow& c : undone) {
    const Found probe{c.flow, c.worker};
    if (std::binary_search(kept.begin(), kept.end(), probe, key_less)) {
      --out.undone;
      ++out.marked;
      out.left_out.push_back(c.flow.key);
      continue;
    }
    out.carried.push_back(std::move(c));
  }
}

std::string shape(const FlowFile::Geometry& g) {
  return std::to_string(g.workers) + (g.workers == 1 ? " worker" : " workers") + " of " + std::to_string(g.slots) +
         " slots, " + std::to_string(g.contexts) + " contexts (" + std::to_string(g.head_bytes) +
         " bytes of held head each), " + std::to_string(g.holds) + " holds, " + std::to_string(g.stashes) +
         " bind stashes of " + std::to_string(g.stash_bytes) + " bytes and " + std::to_string(g.answer_bytes) +
         " answer bytes";
}

}  // namespace

std::string boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (!std::getline(in, id)) return {};
  return id;
}

FlowFile::Opened FlowFile::open(const std::string& dir, const Geometry& geometry, std::string_view boot, uint64_t now,
                                const Seeds& fresh) {
  Opened out;
  const std::string path = dir + "/flows.table";
  if (geometry.workers == 0 || geometry.workers > kMaxWorkers || geometry.slots < 16 || geometry.slots > kMaxSlots ||
      (geometry.slots & (geometry.slots - 1)) != 0 || geometry.contexts > kMaxContexts ||
      geometry.holds > kMaxContexts || geometry.answer_bytes > kMaxAnswerBytes ||
      geometry.head_bytes > kMaxHeadBytes || geometry.stashes > kMaxContexts ||
      geometry.stash_bytes > kMaxHeadBytes + dataplane::BindStash::kWindow) {
    out.error = path + ": cannot lay out " + shape(geometry);
    return out;
  }
  Seeds seeds = fresh;
  bool reuse = false;  // the old file, as it is
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd >= 0) {
    struct stat st {};
    Header h{};
    std::string why;
    if (fstat(fd, &st) != 0) {
      why = std::string("cannot stat it: ") + std::strerror(errno);
    } else if (!S_ISREG(st.st_mode)) {
      why = "not a regular file";
    } else if (static_cast<size_t>(st.st_size) < sizeof h ||
               !read_start(fd, &h, sizeof h)) {
      why = "too short for a header (" + std::to_string(st.st_size) + " bytes)";
    } else {
      why = check(h, static_cast<uint64_t>(st.st_size), file_unit(fd));
    }
    if (why.empty() && !same_boot(h, boot)) {
      out.outcome = Outcome::kRebooted;
      out.note = path + ": made before this boot; its connections are not carried";
    } else if (why.empty()) {
      void* old = mmap(nullptr, h.file_bytes, PROT_READ, MAP_SHARED, fd, 0);
      if (old == MAP_FAILED) {
        out.error = path + ": cannot map it: " + std::strerror(errno);
        ::close(fd);
        return out;
      }
      read_flows(static_cast<std::byte*>(old), h, out);
      munmap(old, h.file_bytes);
      std::memcpy(seeds.cookie.data(), h.cookie_seed, sizeof h.cookie_seed);
      seeds.flow = h.flow_seed;
      seeds.share = h.share_seed;
      reuse = h.workers == geometry.workers && h.slots == geometry.slots && h.contexts == geometry.contexts &&
              h.holds == geometry.holds && h.answer_bytes == geometry.answer_bytes &&
              h.head_bytes == geometry.head_bytes && h.stashes == geometry.stashes &&
              h.stash_bytes == geometry.stash_bytes;
      out.outcome = reuse ? Outcome::kAttached : Outcome::kRelaid;
      if (!reuse) {
        out.note = path + ": made for " + shape(geometry_of(h)) + ", this start has " + shape(geometry) +
                   "; its flows go into a new one";
      }
    }
    if (reuse) {
      std::byte* map = map_shared(fd, h.file_bytes, Populate::kForWriting);
      if (map == nullptr) {
        out.error = path + ": cannot map it: " + std::strerror(errno);
        ::close(fd);
        return out;
      }
      Header& live = *reinterpret_cast<Header*>(map);
      live.generation += 1;
      live.crc = header_crc(live);
      out.file.reset(new FlowFile(path, fd, map, h.file_bytes));
      for (unsigned w = 0; w < geometry.workers; ++w) *out.file->mark(w) = WorkMark{};
      out.answers_kept = true;  // each worker's ring and count as the last process left them
      return out;
    }
    ::close(fd);
    if (!why.empty()) {
      SetAside aside = set_aside(path, why);
      if (!aside.error.empty()) {
        out.error = std::move(aside.error);
        return out;
      }
      out.outcome = Outcome::kSetAside;
      out.note = std::move(aside.note);
    }
  } else if (errno != ENOENT) {
    out.error = path + ": cannot open it: " + std::strerror(errno);
    return out;
  }
  const Header want = header_for(geometry, boot, now, seeds);
  const MadeFile made = make_file(path, want.file_bytes, std::as_bytes(std::span(&want, 1)));
  if (made.fd < 0) {
    out.error = made.error;
    return out;
  }
  std::byte* map = map_shared(made.fd, want.file_bytes, Populate::kForWriting);
  if (map == nullptr) {
    out.error = path + ": cannot map it: " + std::strerror(errno);
    ::close(made.fd);
    return out;
  }
  out.file.reset(new FlowFile(path, made.fd, map, want.file_bytes));
  return out;
}

dataplane::FlowSlots FlowFile::slots(unsigned w) const noexcept {
  const Header& h = *reinterpret_cast<const Header*>(map_);
  const Region r = region_of(map_, h, w);
  return {{r.slots, h.slots}, {r.used, h.slots}};
}

std::span<std::byte> FlowFile::contexts(unsigned w) const noexcept {
  const Header& h = *reinterpret_cast<const Header*>(map_);
  return {region_of(map_, h, w).contexts, h.contexts * h.context_bytes};
}

std::span<std::byte> FlowFile::answers(unsigned w) const noexcept {
  const Header& h = *reinterpret_cast<const Header*>(map_);
  return {region_of(map_, h, w).answers, h.answer_bytes};
}

uint64_t* FlowFile::answers_written(unsigned w) const noexcept {
  return region_of(map_, *reinterpret_cast<const Header*>(map_), w).answers_written;
}

std::span<char> FlowFile::heads(unsigned w) const noexcept {
  const Header& h = *reinterpret_cast<const Header*>(map_);
  return {region_of(map_, h, w).heads, h.contexts * h.head_bytes};
}

std::span<uint8_t> FlowFile::stashes(unsigned w) const noexcept {
  const Header& h = *reinterpret_cast<const Header*>(map_);
  return {region_of(map_, h, w).stashes, h.stashes * h.stash_bytes};
}

std::span<dataplane::StashSlot> FlowFile::stash_slots(unsigned w) const noexcept {
  const Header& h = *reinterpret_cast<const Header*>(map_);
  return {region_of(map_, h, w).stash_slots, h.stashes};
}

std::span<dataplane::EditHold> FlowFile::holds(unsigned w) const noexcept {
  const Header& h = *reinterpret_cast<const Header*>(map_);
  return {region_of(map_, h, w).holds, h.holds};
}

dataplane::WorkMark* FlowFile::mark(unsigned w) const noexcept {
  return region_of(map_, *reinterpret_cast<const Header*>(map_), w).mark;
}

dataplane::UndoArea FlowFile::undo(unsigned w) const noexcept {
  return region_of(map_, *reinterpret_cast<const Header*>(map_), w).undo;
}

FlowFile::Seeds FlowFile::seeds() const noexcept {
  const Header& h = *reinterpret_cast<const Header*>(map_);
  Seeds s;
  std::memcpy(s.cookie.data(), h.cookie_seed, sizeof h.cookie_seed);
  s.flow = h.flow_seed;
  s.share = h.share_seed;
  return s;
}

uint64_t FlowFile::generation() const noexcept { return reinterpret_cast<const Header*>(map_)->generation; }

}  // namespace sluice::control

// The workers' flow tables in a file-backed shared mapping in the state
// directory, so that connections outlive the process: after a crash
// (kill -9, an abort) or an upgrade of the same layout, the kernel still
// holds every flow as the workers last wrote it, and a restarted sluiced
// carries on each one whose state is all in its TcpFlow
// (dataplane/flow_carry.h) instead of resetting it. The secrets the flows
// are keyed with (the flow hash's, the SYN cookies', the client shares')
// are kept in it too, so a handshake the SYN proxy began before the
// restart completes after it.
//
// The file (native byte order: read back by this machine only):
//
//   page 0   header: "SLUICEFL", u32 layout, u32 header CRC-32C, the size
//            of a flow, a work mark, a context and a hold, the workers
//            and each one's slots, contexts and holds, the file's size, a generation (one more at every
//            attach), when it was made, the boot it was made in, the seeds
//   then     one region per worker, from a page boundary: its work mark
//            (dataplane/flow_carry.h), its answer store's count of bytes
//            written, its undo area (the flow being changed as it was
//            before: dataplane/change_undo.h), its slots (TcpFlow), its used flags,
//            its parse contexts (the objects, dataplane/parse_context.h;
//            their buffers but the held heads' are the process's), its
//            edit holds, its contexts' held-head buffers, its bind
//            stashes' slots and buffers, its answer
//            store's ring (dataplane/answer_store.h)
//
// Open reads the flows the last process left out of the file and hands
// them to the caller, each with the context (if the context still names it
// as its owner) or hold it borrowed, then gives the workers an empty table on it (the same
// file where the geometry is unchanged, else a new one): every carried flow
// is inserted again under this process's hash, so a table a crash left
// half-shifted, or one of another size or worker count, is read the same.
// A file of another layout, or damaged, is set aside and reported; one made
// before the last reboot is replaced (its connections' state may not have
// reached the disk). Neither can crash the daemon: the header is checked
// whole before any slot is read, and the caller judges every flow
// (carry_verdict) before it takes it on.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "control/mapped_file.h"
#include "dataplane/flow_carry.h"
#include "dataplane/flow_table.h"
#include "dataplane/tcp_flow.h"

namespace sluice::control {

class FlowFile {
 public:
  // Bumped whenever the header, a region's layout, or what a TcpFlow's
  // fields mean changes (a change of their sizes is caught anyway): a
  // binary of another layout never carries the flows, it resets them.
  static constexpr uint32_t kLayout = 7;

  struct Geometry {
    uint32_t workers = 1;
    uint64_t slots = 16;  // per worker: dataplane::FlowTable::capacity_for
    uint64_t contexts = 0;  // per worker
    uint64_t holds = 0;     // per worker
    uint64_t answer_bytes = 0;  // per worker: dataplane::AnswerStore::ring_size
    uint64_t head_bytes = 0;    // per context: dataplane::ContextPool::head_stride (0: none kept)
    uint64_t stashes = 0;       // per worker
    uint64_t stash_bytes = 0;   // per stash: dataplane::BindStash::buffer_bytes
  };
  struct Seeds {
    std::array<uint8_t, 32> cookie{};
    uint64_t flow = 0;
    uint64_t share = 0;
  };

  enum class Outcome : uint8_t {
    kCreated,   // there was none
    kAttached,  // the last process's file: its flows carried, the same file reused
    kRelaid,    // the last process's, of another geometry: its flows carried into a new one
    kRebooted,  // made before the last reboot: replaced, nothing carried
    kSetAside,  // another layout, or damaged (see `note`): set aside, a new one made
  };
  struct Opened {
    std::unique_ptr<FlowFile> file;  // null: no file could be made (see `error`)
    Outcome outcome = Outcome::kCreated;
    std::string note;   // what was wrong with the old file, or what changed
    std::string error;  // why no file could be made
    // The flows the last process left, each once; those its workers' marks
    // named (half-changed when it died) left out and counted.
    std::vector<dataplane::CarriedFlow> carried;
    size_t marked = 0;
    // Marked flows whose change was undone: carried as they were before it
    // (in `carried`), or left out where the change was making them.
    size_t undone = 0;
    size_t duplicates = 0;  // a key in two slots (a crash inside a shift): one kept if they agree, else none
    // The keys of the flows left out (marked, or in two slots that disagree).
    std::vector<dataplane::FlowKey> left_out;
    // Whether each worker's answer store (ring and count) is as the last
    // process left it (the same file reused): only then can a carried flow
    // that refers to an answer in it, in the worker it was in, go on.
    bool answers_kept = false;
  };

  // dir/flows.table for `geometry`; `boot` this boot's id ("" if unknown:
  // nothing is carried), `now` (UTC ns) when a new one is made, `fresh` the
  // seeds a new file gets (an old one's are kept).
  [[nodiscard]] static Opened open(const std::string& dir, const Geometry& geometry, std::string_view boot,
                                   uint64_t now, const Seeds& fresh);

  FlowFile(const FlowFile&) = delete;
  FlowFile& operator=(const FlowFile&) = delete;

  // Worker w's table memory (for dataplane::FlowTable) and work mark.
  [[nodiscard]] dataplane::FlowSlots slots(unsigned w) const noexcept;
  // Worker w's memory for its parse contexts (dataplane::ContextPool's
  // `objects`) and edit holds.
  [[nodiscard]] std::span<std::byte> contexts(unsigned w) const noexcept;
  [[nodiscard]] std::span<dataplane::EditHold> holds(unsigned w) const noexcept;
  // Worker w's memory for its contexts' held-head buffers (ContextPool's
  // `heads`).
  [[nodiscard]] std::span<char> heads(unsigned w) const noexcept;
  // Worker w's bind stashes: their buffers and slots (dataplane::BindStash).
  [[nodiscard]] std::span<uint8_t> stashes(unsigned w) const noexcept;
  [[nodiscard]] std::span<dataplane::StashSlot> stash_slots(unsigned w) const noexcept;
  // Worker w's answer store ring and its count of bytes written
  // (dataplane::AnswerStore), kept in the file so answers outlive the process.
  [[nodiscard]] std::span<std::byte> answers(unsigned w) const noexcept;
  [[nodiscard]] uint64_t* answers_written(unsigned w) const noexcept;
  [[nodiscard]] dataplane::WorkMark* mark(unsigned w) const noexcept;
  // Worker w's undo area (dataplane/change_undo.h).
  [[nodiscard]] dataplane::UndoArea undo(unsigned w) const noexcept;
  [[nodiscard]] Seeds seeds() const noexcept;
  [[nodiscard]] uint64_t generation() const noexcept;
  [[nodiscard]] const std::string& path() const noexcept { return mapping_.path(); }

 private:
  FlowFile(std::string path, int fd, std::byte* map, size_t bytes) noexcept
      : mapping_(std::move(path), fd, map, bytes), map_(map) {}

  Mapping mapping_;
  std::byte* map_;  // mapping_.data()
};

// This boot's id (/proc/sys/kernel/random/boot_id), "" if it cannot be read.
[[nodiscard]] std::string boot_id();

}  // namespace sluice::control

// What a client sent for the origin before the origin's connection exists
// (delayed binding, syn_proxy.h): a worker's fixed pool of buffers, one per
// unbound flow, each holding the bytes the request path forwarded, in the
// origin's numbers from the first one on, until the origin answers the SYN
// sent for them and they go to it.
//
// Nothing in a stash is acknowledged to the client: the origin acknowledges
// it once it has it, as it would any forwarded segment. A stash is an
// optimisation only (without it the client would send the bytes again after
// its retransmission timeout); but a held head, which the appliance does
// acknowledge, may be released into it, so a flow is given a stash when it
// is accepted unbound or not at all (then it is bound at once, as without
// delayed binding). Sized so that it cannot overflow: a held head (the
// context's head limit) and then the window the cookie SYN-ACK offered,
// which nothing widens until the origin answers.
//
// The stashes may live in the flow file (control/flow_file.h): a flow being
// bound at a kill carries on with its bytes, which exist nowhere else once
// a held head was released into them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <type_traits>
#include <vector>

namespace sluice::dataplane {

// Where a stash's bytes start and how many there are: beside the buffers,
// in the flow file too.
struct StashSlot {
  uint32_t start = 0;  // the origin sequence number of the first byte
  uint32_t len = 0;
  uint8_t fin = 0;     // the client's FIN follows the bytes (a bool, kept as a byte)
};
static_assert(std::is_trivially_copyable_v<StashSlot>);

class BindStash {
 public:
  // The window a client is offered while its flow is unbound: what it may
  // send unacknowledged before the origin answers.
  static constexpr uint32_t kWindow = 32 * 1024;

  // `count` buffers of buffer_bytes(max_head_bytes) bytes each, allocated
  // once (and committed only as they are used), or on `buffers` and
  // `slots` where they hold that many (the flow file's).
  BindStash(size_t count, uint32_t max_head_bytes, std::span<uint8_t> buffers = {},
            std::span<StashSlot> slots = {});
  [[nodiscard]] static size_t buffer_bytes(uint32_t max_head_bytes) noexcept {
    return size_t{max_head_bytes} + kWindow;
  }

  [[nodiscard]] int32_t acquire() noexcept;  // -1 if none is free
  void release(int32_t index) noexcept;

  // Appends `bytes` at origin sequence `seq` to stash `index`: only the
  // next bytes (the first append sets where they start), and only if they
  // fit. False if not taken.
  [[nodiscard]] bool append(int32_t index, uint32_t seq, std::span<const uint8_t> bytes) noexcept;
  [[nodiscard]] std::span<const uint8_t> bytes(int32_t index) const noexcept;
  // The client's FIN at origin sequence `seq`, after the stash's bytes: it
  // goes with the last of them. False if it is not right after them.
  [[nodiscard]] bool close(int32_t index, uint32_t seq) noexcept;
  [[nodiscard]] bool closed(int32_t index) const noexcept { return slots_[static_cast<size_t>(index)].fin != 0; }
  // The origin sequence number of the first byte (meaningful once some are in).
  [[nodiscard]] uint32_t start(int32_t index) const noexcept { return slots_[static_cast<size_t>(index)].start; }
  [[nodiscard]] const StashSlot& slot(int32_t index) const noexcept { return slots_[static_cast<size_t>(index)]; }

  [[nodiscard]] size_t free_count() const noexcept { return free_.size(); }
  [[nodiscard]] size_t size() const noexcept { return slots_.size(); }

 private:
  size_t capacity_;
  std::unique_ptr<uint8_t[]> own_buffers_;  // when none are given
  std::vector<StashSlot> own_slots_;
  uint8_t* buffers_;
  std::span<StashSlot> slots_;
  std::vector<int32_t> free_;  // reserved at construction
};

}  // namespace sluice::dataplane

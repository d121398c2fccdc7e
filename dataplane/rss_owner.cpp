// The symmetric Toeplitz hash by folding (see rss_owner.h).
#include "rss_owner.h"

#include <bit>
#include <stdexcept>

namespace sluice::dataplane {
namespace {

// The 32 key bits that start at bit `offset` of the (periodic) key.
constexpr uint32_t key_window(unsigned offset) {
  uint32_t w = 0;
  for (unsigned i = 0; i < 32; ++i) {
    const unsigned bit = (offset + i) % 16;
    const uint8_t byte = kSymmetricRssKey[bit / 8];
    w = (w << 1) | ((byte >> (7 - bit % 8)) & 1u);
  }
  return w;
}

// kFold[half][b]: what byte b contributes as the high (half 0) or low (half
// 1) byte of a 16-bit word. Input bit j adds the key window at j, and with a
// 16-bit period that depends only on j % 16.
struct FoldTables {
  std::array<std::array<uint32_t, 256>, 2> t{};
  constexpr FoldTables() {
    for (unsigned half = 0; half < 2; ++half) {
      for (unsigned b = 0; b < 256; ++b) {
        uint32_t h = 0;
        for (unsigned bit = 0; bit < 8; ++bit) {
          if (b & (0x80u >> bit)) h ^= key_window(half * 8 + bit);
        }
        t[half][b] = h;
      }
    }
  }
};
constexpr FoldTables kFold;

}  // namespace

uint32_t symmetric_toeplitz(const FlowKey& key) noexcept {
  // Both addresses are IPv4-mapped or neither: the mapped prefix's words
  // then cancel, leaving the fold of the two 4-byte addresses.
  uint16_t fold = 0;
  for (size_t i = 0; i < 16; i += 2) {
    fold ^= static_cast<uint16_t>((key.client.bytes[i] ^ key.origin.bytes[i]) << 8 |
                                  (key.client.bytes[i + 1] ^ key.origin.bytes[i + 1]));
  }
  return kFold.t[0][fold >> 8] ^ kFold.t[1][fold & 0xff];
}

RssOwner::RssOwner(std::span<const uint16_t> table) {
  if (table.empty() || table.size() > kMaxEntries || !std::has_single_bit(table.size())) {
    throw std::invalid_argument("an RSS redirection table's size is a power of two up to 512");
  }
  for (size_t i = 0; i < table.size(); ++i) table_[i] = table[i];
  mask_ = static_cast<uint32_t>(table.size() - 1);
}

std::vector<uint16_t> RssOwner::even_table(size_t entries, unsigned queues) {
  std::vector<uint16_t> t(entries);
  for (size_t i = 0; i < entries; ++i) t[i] = static_cast<uint16_t>(i % queues);
  return t;
}

}  // namespace sluice::dataplane

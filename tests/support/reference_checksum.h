// The Internet checksum the slow, obvious way (RFC 1071: 16-bit words,
// folded at every step), for tests to check the data plane's fast one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sluice::test {

inline uint16_t reference_sum(const std::vector<uint8_t>& bytes) {
  uint32_t sum = 0;
  for (size_t i = 0; i < bytes.size(); i += 2) {
    const uint16_t w = static_cast<uint16_t>(bytes[i] << 8 | (i + 1 < bytes.size() ? bytes[i + 1] : 0));
    sum += w;
    sum = (sum & 0xffff) + (sum >> 16);
  }
  return static_cast<uint16_t>(sum);
}

}  // namespace sluice::test

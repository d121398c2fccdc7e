// CRC-32C (Castagnoli): the checksum of each runs-journal record and of a
// bucket snapshot. Table-driven: the control plane checksums at most a
// snapshot's few hundred MB, off the hot path.
#pragma once

#include <cstdint>
#include <string_view>

namespace sluice::control {

[[nodiscard]] uint32_t crc32c(std::string_view bytes) noexcept;

}  // namespace sluice::control

// CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320) of the .hbm header and sections: the
// checksum zlib and Boost's crc_32_type compute, kept here so the runtime needs no library.
#pragma once

#include <array>
#include <cstdint>
#include <span>

namespace qflow::hbm {

constexpr std::array<uint32_t, 256> make_crc32_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    table[i] = c;
  }
  return table;
}
inline constexpr std::array<uint32_t, 256> kCrc32Table = make_crc32_table();

// A running checksum: feed the bytes in pieces, read value() at the end.
class Crc32 {
 public:
  void update(std::span<const uint8_t> bytes) {
    for (uint8_t b : bytes) state_ = kCrc32Table[(state_ ^ b) & 0xFFu] ^ (state_ >> 8);
  }
  uint32_t value() const { return state_ ^ 0xFFFFFFFFu; }

 private:
  uint32_t state_ = 0xFFFFFFFFu;
};

inline uint32_t crc32(std::span<const uint8_t> bytes) {
  Crc32 crc;
  crc.update(bytes);
  return crc.value();
}

}  // namespace qflow::hbm

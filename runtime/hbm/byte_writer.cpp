// ByteWriter: little-endian encoding independent of the host's byte order.
#include "hbm/byte_writer.h"

#include <bit>

namespace qflow::hbm {

void ByteWriter::u16(uint16_t v) {
  for (int i = 0; i < 2; ++i) bytes_.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void ByteWriter::u32(uint32_t v) {
  for (int i = 0; i < 4; ++i) bytes_.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void ByteWriter::u64(uint64_t v) {
  for (int i = 0; i < 8; ++i) bytes_.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void ByteWriter::f32(float v) { u32(std::bit_cast<uint32_t>(v)); }

void ByteWriter::string(std::string_view s) {
  u32(static_cast<uint32_t>(s.size()));
  bytes_.insert(bytes_.end(), s.begin(), s.end());
}

void ByteWriter::blob(std::span<const uint8_t> data) {
  u64(data.size());
  raw(data);
}

void ByteWriter::raw(std::span<const uint8_t> data) {
  bytes_.insert(bytes_.end(), data.begin(), data.end());
}

void store_u16(std::span<uint8_t> out, size_t at, uint16_t v) {
  for (size_t i = 0; i < 2; ++i) out[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

void store_u32(std::span<uint8_t> out, size_t at, uint32_t v) {
  for (size_t i = 0; i < 4; ++i) out[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

void store_u64(std::span<uint8_t> out, size_t at, uint64_t v) {
  for (size_t i = 0; i < 8; ++i) out[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

}  // namespace qflow::hbm

// ByteReader: bounds-checked little-endian decoding with a sticky first error.
#include "hbm/byte_reader.h"

#include <bit>

namespace qflow::hbm {

bool ByteReader::need(size_t n, std::string_view what) {
  if (!ok()) return false;
  if (n <= remaining()) return true;
  fail("need " + std::to_string(n) + " bytes for " + std::string(what) + " at byte " +
       std::to_string(pos_) + ", " + std::to_string(remaining()) + " left");
  return false;
}

uint64_t ByteReader::little_endian(size_t n, std::string_view what) {
  if (!need(n, what)) return 0;
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(bytes_[pos_ + i]) << (8 * i);
  pos_ += n;
  return v;
}

uint8_t ByteReader::u8() { return static_cast<uint8_t>(little_endian(1, "a u8")); }
uint16_t ByteReader::u16() { return static_cast<uint16_t>(little_endian(2, "a u16")); }
uint32_t ByteReader::u32() { return static_cast<uint32_t>(little_endian(4, "a u32")); }
uint64_t ByteReader::u64() { return little_endian(8, "a u64"); }
float ByteReader::f32() { return std::bit_cast<float>(static_cast<uint32_t>(little_endian(4, "an f32"))); }

std::string ByteReader::string() {
  const size_t at = pos_;
  const uint32_t length = u32();
  if (!ok()) return {};
  if (length > remaining()) {
    fail("string length " + std::to_string(length) + " at byte " + std::to_string(at) +
         " exceeds the " + std::to_string(remaining()) + " bytes left");
    return {};
  }
  std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), length);
  pos_ += length;
  return s;
}

std::vector<uint8_t> ByteReader::blob() {
  const size_t at = pos_;
  const uint64_t length = u64();
  if (!ok()) return {};
  if (length > remaining()) {
    fail("blob length " + std::to_string(length) + " at byte " + std::to_string(at) +
         " exceeds the " + std::to_string(remaining()) + " bytes left");
    return {};
  }
  std::vector<uint8_t> data(bytes_.begin() + static_cast<std::ptrdiff_t>(pos_),
                            bytes_.begin() + static_cast<std::ptrdiff_t>(pos_ + length));
  pos_ += static_cast<size_t>(length);
  return data;
}

uint32_t ByteReader::count(size_t min_element_size, std::string_view what) {
  const size_t at = pos_;
  const uint32_t n = u32();
  if (!ok()) return 0;
  // n <= 2^32 and min_element_size is a small constant: the product cannot overflow 64 bits.
  const uint64_t needed = static_cast<uint64_t>(n) * min_element_size;
  if (needed > remaining()) {
    fail("count " + std::to_string(n) + " of " + std::string(what) + " at byte " +
         std::to_string(at) + " needs at least " + std::to_string(needed) + " bytes, " +
         std::to_string(remaining()) + " left");
    return 0;
  }
  return n;
}

void ByteReader::fail(std::string message) {
  if (ok()) error_ = std::move(message);
}

}  // namespace qflow::hbm

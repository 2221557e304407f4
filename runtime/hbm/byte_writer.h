// ByteWriter: appends little-endian scalars, length-prefixed strings and blobs to a buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace qflow::hbm {

// Encodings (docs/hbm-format.md, "Primitive encodings"): integers little-endian two's
// complement, f32 as its IEEE-754 bit pattern, string = u32 length + bytes (no NUL),
// blob = u64 length + bytes. The output depends on the values only, never on the host.
class ByteWriter {
 public:
  void u8(uint8_t v) { bytes_.push_back(v); }
  void u16(uint16_t v);
  void u32(uint32_t v);
  void u64(uint64_t v);
  void i32(int32_t v) { u32(static_cast<uint32_t>(v)); }
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  void f32(float v);
  void string(std::string_view s);
  void blob(std::span<const uint8_t> data);
  void raw(std::span<const uint8_t> data);

  const std::vector<uint8_t>& bytes() const { return bytes_; }
  std::vector<uint8_t> take() { return std::move(bytes_); }

 private:
  std::vector<uint8_t> bytes_;
};

// Little-endian stores into an existing buffer; the caller guarantees the room.
void store_u16(std::span<uint8_t> out, size_t at, uint16_t v);
void store_u32(std::span<uint8_t> out, size_t at, uint32_t v);
void store_u64(std::span<uint8_t> out, size_t at, uint64_t v);

}  // namespace qflow::hbm

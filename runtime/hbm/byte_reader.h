// ByteReader: bounds-checked little-endian decoding with a sticky first error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace qflow::hbm {

// Every read checks the bytes left first. After the first failure the reader is "failed":
// reads return zero/empty values and consume nothing, and only that first message is kept,
// so a decoder may read a whole record and check ok() once, and a bad count can at worst
// make it loop over zero elements. Nothing is ever read past the end of the span.
class ByteReader {
 public:
  explicit ByteReader(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  uint8_t u8();
  uint16_t u16();
  uint32_t u32();
  uint64_t u64();
  int32_t i32() { return static_cast<int32_t>(u32()); }
  int64_t i64() { return static_cast<int64_t>(u64()); }
  float f32();
  std::string string();
  std::vector<uint8_t> blob();

  // An element count (u32) of `what`s that need at least `min_element_size` bytes each; a
  // count the bytes left cannot hold fails here, before anything is allocated for it.
  uint32_t count(size_t min_element_size, std::string_view what);

  // Records `message` unless an earlier failure is already recorded.
  void fail(std::string message);

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  size_t position() const { return pos_; }
  size_t remaining() const { return bytes_.size() - pos_; }

 private:
  // True when `n` more bytes are available; otherwise fails naming `what`.
  bool need(size_t n, std::string_view what);
  uint64_t little_endian(size_t n, std::string_view what);

  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
  std::string error_;
};

}  // namespace qflow::hbm

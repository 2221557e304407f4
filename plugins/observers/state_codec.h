// Little-endian encoding of observer states: writers and a bounds-checked reader.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include <boost/endian/conversion.hpp>

namespace qflow::observer_state {

// States cross machines when a calibration run is sharded, so every field has a fixed
// width and byte order, and doubles travel as their IEEE-754 bit patterns.
inline void put_u32(std::string& out, uint32_t v) {
  unsigned char bytes[4];
  boost::endian::store_little_u32(bytes, v);
  out.append(reinterpret_cast<const char*>(bytes), sizeof bytes);
}
inline void put_u64(std::string& out, uint64_t v) {
  unsigned char bytes[8];
  boost::endian::store_little_u64(bytes, v);
  out.append(reinterpret_cast<const char*>(bytes), sizeof bytes);
}
inline void put_i64(std::string& out, int64_t v) { put_u64(out, static_cast<uint64_t>(v)); }
inline void put_f64(std::string& out, double v) { put_u64(out, std::bit_cast<uint64_t>(v)); }

// Reads fields in order; a read past the end sets failed() and yields zeros, so a caller
// checks once after reading a group of fields.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}

  bool magic(const char (&expected)[5]) {
    if (!take(4)) return false;
    return std::memcmp(bytes_.data() + at_ - 4, expected, 4) == 0;
  }
  uint32_t u32() {
    if (!take(4)) return 0;
    return boost::endian::load_little_u32(at(at_ - 4));
  }
  uint64_t u64() {
    if (!take(8)) return 0;
    return boost::endian::load_little_u64(at(at_ - 8));
  }
  int64_t i64() { return static_cast<int64_t>(u64()); }
  double f64() { return std::bit_cast<double>(u64()); }

  bool failed() const { return failed_; }
  std::size_t remaining() const { return bytes_.size() - at_; }

 private:
  bool take(std::size_t n) {
    if (failed_ || bytes_.size() - at_ < n) {
      failed_ = true;
      return false;
    }
    at_ += n;
    return true;
  }
  const unsigned char* at(std::size_t i) const { return reinterpret_cast<const unsigned char*>(bytes_.data() + i); }

  std::string_view bytes_;
  std::size_t at_ = 0;
  bool failed_ = false;
};

}  // namespace qflow::observer_state

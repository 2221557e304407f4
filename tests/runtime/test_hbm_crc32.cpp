// Tests of the runtime's CRC-32 against the published check values of CRC-32/ISO-HDLC (the
// CRC of zlib, PNG and Ethernet), so .hbm files stay readable by any standard implementation.
#include <doctest/doctest.h>

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "hbm/crc32.h"

using qflow::hbm::Crc32;
using qflow::hbm::crc32;

namespace {

std::span<const uint8_t> bytes_of(std::string_view text) {
  return {reinterpret_cast<const uint8_t*>(text.data()), text.size()};
}

}  // namespace

TEST_CASE("hbm crc32: known check values") {
  CHECK(crc32(bytes_of("")) == 0x00000000u);
  CHECK(crc32(bytes_of("a")) == 0xE8B7BE43u);
  CHECK(crc32(bytes_of("123456789")) == 0xCBF43926u);
  CHECK(crc32(bytes_of("The quick brown fox jumps over the lazy dog")) == 0x414FA339u);
  const std::vector<uint8_t> zeros(32, 0);
  CHECK(crc32(zeros) == 0x190A55ADu);
  const std::vector<uint8_t> ones(32, 0xFF);
  CHECK(crc32(ones) == 0xFF6CAB0Bu);
}

TEST_CASE("hbm crc32: feeding the bytes in pieces gives the checksum of the whole") {
  const std::string_view text = "123456789";
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    Crc32 crc;
    crc.update(bytes_of(text.substr(0, cut)));
    crc.update(bytes_of(text.substr(cut)));
    CHECK(crc.value() == 0xCBF43926u);
  }
}

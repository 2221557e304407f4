// Tests of the .hbm primitive encodings: ByteWriter and the bounds-checked ByteReader.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "hbm/byte_reader.h"
#include "hbm/byte_writer.h"
#include "qflow/core/status.h"

using namespace qflow::hbm;
using qflow::Expected;
using qflow::Status;
using qflow::invalid_input;

TEST_CASE("hbm byte io: scalars are little-endian whatever the host") {
  ByteWriter w;
  w.u8(0x01);
  w.u16(0x0302);
  w.u32(0x07060504);
  w.u64(0x0f0e0d0c0b0a0908ull);
  w.i32(-2);
  w.f32(1.0f);
  const std::vector<uint8_t> expected = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b,
                                         0x0c, 0x0d, 0x0e, 0x0f, 0xfe, 0xff, 0xff, 0xff, 0x00, 0x00, 0x80, 0x3f};
  CHECK(w.bytes() == expected);

  ByteReader r(w.bytes());
  CHECK(r.u8() == 0x01);
  CHECK(r.u16() == 0x0302);
  CHECK(r.u32() == 0x07060504u);
  CHECK(r.u64() == 0x0f0e0d0c0b0a0908ull);
  CHECK(r.i32() == -2);
  CHECK(r.f32() == 1.0f);
  CHECK(r.ok());
  CHECK(r.remaining() == 0);
}

TEST_CASE("hbm byte io: strings, blobs, i64 and float bit patterns round trip") {
  ByteWriter w;
  w.string("conv1");
  w.string("");
  const std::vector<uint8_t> payload = {9, 8, 7};
  w.blob(payload);
  w.i64(-1);
  w.f32(std::numeric_limits<float>::quiet_NaN());
  w.f32(-0.0f);
  CHECK(w.bytes().size() == (4 + 5) + 4 + (8 + 3) + 8 + 4 + 4);
  CHECK(w.bytes()[0] == 5);

  ByteReader r(w.bytes());
  CHECK(r.string() == "conv1");
  CHECK(r.string().empty());
  CHECK(r.blob() == payload);
  CHECK(r.i64() == -1);
  CHECK(std::isnan(r.f32()));
  const float negative_zero = r.f32();
  CHECK(negative_zero == 0.0f);
  CHECK(std::signbit(negative_zero));
  CHECK(r.ok());
}

TEST_CASE("hbm byte io: a short read fails without consuming, and the first error sticks") {
  const std::vector<uint8_t> bytes = {1, 2, 3};
  ByteReader r(bytes);
  CHECK(r.u16() == 0x0201);
  CHECK(r.u32() == 0);
  CHECK_FALSE(r.ok());
  CHECK(r.error() == "need 4 bytes for a u32 at byte 2, 1 left");
  CHECK(r.position() == 2);
  CHECK(r.u8() == 0);  // one byte is left, but the reader has failed
  CHECK(r.position() == 2);
  r.fail("a later problem");
  CHECK(r.error() == "need 4 bytes for a u32 at byte 2, 1 left");
}

TEST_CASE("hbm byte io: string and blob lengths are checked against the bytes left") {
  ByteWriter w;
  w.u32(100);
  w.raw(std::vector<uint8_t>{'a', 'b'});
  ByteReader strings(w.bytes());
  CHECK(strings.string().empty());
  CHECK(strings.error() == "string length 100 at byte 0 exceeds the 2 bytes left");

  ByteWriter b;
  b.u64(std::numeric_limits<uint64_t>::max());
  ByteReader blobs(b.bytes());
  CHECK(blobs.blob().empty());
  CHECK(blobs.error() == "blob length 18446744073709551615 at byte 0 exceeds the 0 bytes left");
}

TEST_CASE("hbm byte io: a count the remaining bytes cannot hold fails before any allocation") {
  ByteWriter w;
  w.u32(0xffffffffu);
  w.u64(0);
  ByteReader r(w.bytes());
  CHECK(r.count(16, "weight references") == 0);
  CHECK(r.error() == "count 4294967295 of weight references at byte 0 needs at least 68719476720 bytes, 8 left");

  ByteWriter ok;
  ok.u32(2);
  ok.u64(0);
  ByteReader fits(ok.bytes());
  CHECK(fits.count(4, "scales") == 2);
  CHECK(fits.ok());
}

TEST_CASE("status: Expected holds a value or an error, never neither") {
  Expected<int> value(3);
  CHECK(value.has_value());
  CHECK(*value == 3);
  CHECK(value.status().is_ok());
  CHECK(value.message().empty());

  Expected<int> error(invalid_input("hbm: broken"));
  CHECK_FALSE(error.has_value());
  CHECK(error.message() == "hbm: broken");
  CHECK_FALSE(error.status().is_ok());

  Expected<int> neither(Status::ok());
  CHECK_FALSE(neither.has_value());
  CHECK(neither.status().code() == qflow::StatusCode::Internal);
  CHECK(neither.message() == "no value and no error");
}

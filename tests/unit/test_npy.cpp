// Unit tests for .npy reading and writing, against files written by NumPy.
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "framework/core/file_io.h"
#include "framework/data/npy.h"

namespace qflow {

namespace {

std::string fixture(const std::string& name) { return std::string(QFLOW_SOURCE_DIR) + "/tests/cli/data/npy/" + name; }

std::string read_bytes(const std::string& path) {
  auto bytes = read_file(path);
  REQUIRE(bytes.has_value());
  return *bytes;
}

// A v1.0 file built by hand, so tests can corrupt individual fields.
std::string npy_with_header(const std::string& dict, std::string_view data) {
  std::string header = dict;
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY\x01";
  out += '\0';
  out += static_cast<char>(header.size() & 0xFF);
  out += static_cast<char>(header.size() >> 8);
  return out + header + std::string(data);
}

}  // namespace

TEST_CASE("npy: reads NumPy files of every supported version") {
  auto f32 = read_npy_file(fixture("f32_2x3.npy"));
  REQUIRE(f32.has_value());
  CHECK(f32->dtype() == DType::Float32);
  CHECK(f32->shape() == Shape{2, 3});
  CHECK(f32->to_doubles() == std::vector<double>{0, 0.25, 0.5, 0.75, 1.0, 1.25});

  auto v2 = read_npy_file(fixture("i16_v2.npy"));
  REQUIRE(v2.has_value());
  CHECK(v2->dtype() == DType::Int16);
  CHECK(v2->to_int64s() == std::vector<int64_t>{1, -2, 3, -4});

  auto v3 = read_npy_file(fixture("u16_v3.npy"));
  REQUIRE(v3.has_value());
  CHECK(v3->dtype() == DType::UInt16);
  CHECK(v3->to_int64s() == std::vector<int64_t>{1, 65535});

  auto flags = read_npy_file(fixture("bool_4.npy"));
  REQUIRE(flags.has_value());
  CHECK(flags->dtype() == DType::Bool);
  CHECK(flags->to_int64s() == std::vector<int64_t>{1, 0, 0, 1});

  auto half = read_npy_file(fixture("f16_3.npy"));
  REQUIRE(half.has_value());
  CHECK(half->dtype() == DType::Float16);
  CHECK(half->to_doubles() == std::vector<double>{1.5, -2.0, 65504.0});

  auto scalar = read_npy_file(fixture("i64_scalar.npy"));
  REQUIRE(scalar.has_value());
  CHECK(scalar->shape().empty());
  CHECK(scalar->to_int64s() == std::vector<int64_t>{-7});

  auto empty = read_npy_file(fixture("u8_empty.npy"));
  REQUIRE(empty.has_value());
  CHECK(empty->shape() == Shape{0, 5});
}

TEST_CASE("npy: writing reproduces NumPy's bytes exactly") {
  for (const char* name : {"f32_2x3.npy", "bool_4.npy", "f16_3.npy", "i64_scalar.npy", "u8_empty.npy"}) {
    CAPTURE(name);
    auto tensor = read_npy_file(fixture(name));
    REQUIRE(tensor.has_value());
    auto bytes = serialize_npy(*tensor);
    REQUIRE(bytes.has_value());
    CHECK(*bytes == read_bytes(fixture(name)));
  }
}

TEST_CASE("npy: write then read round-trips through a file") {
  const auto dir = std::filesystem::temp_directory_path() / "qflow_test_npy";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "t.npy").string();
  Tensor t = Tensor::from_vector<int32_t>({3, 1}, {7, -8, 9});
  REQUIRE(write_npy_file(path, t).is_ok());
  auto back = read_npy_file(path);
  REQUIRE(back.has_value());
  CHECK(back->bitwise_equal(t));
  std::filesystem::remove_all(dir);
}

TEST_CASE("npy: a header too long for version 1.0 is written as 2.0") {
  Shape shape(30000, 1);  // "1, " per dimension: a 90 kB header
  Tensor t(DType::UInt8, shape);
  auto bytes = serialize_npy(t);
  REQUIRE(bytes.has_value());
  CHECK((*bytes)[6] == '\x02');
  CHECK((bytes->size() - 1) % 64 == 0);  // header aligned, then one byte of data
  auto back = parse_npy(*bytes, "long");
  REQUIRE(back.has_value());
  CHECK(back->shape() == shape);
}

TEST_CASE("npy: bad files are refused with messages naming them") {
  auto fortran = read_npy_file(fixture("fortran.npy"));
  REQUIRE_FALSE(fortran.has_value());
  CHECK(fortran.status().message().find("fortran.npy: Fortran-order arrays are not supported") != std::string::npos);

  auto big_endian = read_npy_file(fixture("big_endian.npy"));
  REQUIRE_FALSE(big_endian.has_value());
  CHECK(big_endian.status().code() == StatusCode::Unsupported);
  CHECK(big_endian.status().message().find("dtype '>f4'") != std::string::npos);

  auto missing = read_npy_file(fixture("does_not_exist.npy"));
  CHECK(missing.status().code() == StatusCode::NotFound);

  CHECK(parse_npy("PK\x03\x04 not numpy", "x.npy").status().message() ==
        "x.npy: not a .npy file (the magic string \\x93NUMPY is missing)");

  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }";
  CHECK(parse_npy(npy_with_header(dict, std::string(16, '\0')), "ok.npy").has_value());
  auto shorter = parse_npy(npy_with_header(dict, std::string(12, '\0')), "short.npy");
  CHECK(shorter.status().message() == "short.npy: shape (2, 2) of float needs 16 bytes of data, the file holds 12");

  auto overflow = parse_npy(
      npy_with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", ""), "o.npy");
  CHECK(overflow.status().message() == "o.npy: shape (4294967296, 4294967296) overflows a 64-bit size");

  auto too_big = parse_npy(npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1000,), }", ""),
                           "big.npy", 100);
  CHECK(too_big.status().message() == "big.npy: shape (1000,) needs 4000 bytes, more than the memory limit of 100 bytes (--max-memory)");

  auto huge_dim = parse_npy(
      npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", ""), "d.npy");
  CHECK(huge_dim.status().message().find("does not fit in 64 bits") != std::string::npos);

  auto negative = parse_npy(npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", ""), "n.npy");
  CHECK_FALSE(negative.has_value());

  auto no_shape = parse_npy(npy_with_header("{'descr': '<f4', 'fortran_order': False, }", ""), "s.npy");
  CHECK(no_shape.status().message().find("lacks one of") != std::string::npos);

  std::string truncated_header = npy_with_header(dict, "");
  truncated_header.resize(30);
  CHECK_FALSE(parse_npy(truncated_header, "t.npy").has_value());

  std::string future = npy_with_header(dict, std::string(16, '\0'));
  future[6] = '\x04';
  CHECK(parse_npy(future, "v4.npy").status().code() == StatusCode::Unsupported);

  CHECK(serialize_npy(Tensor(DType::BFloat16, {2})).status().code() == StatusCode::Unsupported);
}

}  // namespace qflow

// Tests of the .bc codec (plugins/backends/bpu/bc_codec.h): round trip, determinism, refused input.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "plugins/backends/bpu/quantized_model.pb.h"
#include "plugins/backends/bpu/bc_codec.h"
#include "tests/runtime/lowered_sample.h"

using namespace qflow;
using qflow::lowered::testing::sample_model;

namespace {

std::string encode_ok(const lowered::Model& m) {
  Expected<std::string> bytes = encode_bc(m);
  REQUIRE_MESSAGE(bytes.has_value(), bytes.status().message());
  return *bytes;
}

std::string decode_error(const std::string& bytes) {
  Expected<lowered::Model> m =
      decode_bc(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  return m ? std::string() : m.status().message();
}

// Re-serializes the sample after `edit` on its protobuf form and returns the decode error.
std::string edited(void (*edit)(bc::Model&)) {
  bc::Model proto;
  REQUIRE(proto.ParseFromString(encode_ok(sample_model())));
  edit(proto);
  return decode_error(proto.SerializeAsString());
}

}  // namespace

TEST_CASE("bc: a lowered model survives the round trip, byte for byte") {
  const lowered::Model model = sample_model();
  const std::string bytes = encode_ok(model);
  Expected<lowered::Model> decoded =
      decode_bc(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  REQUIRE_MESSAGE(decoded.has_value(), decoded.status().message());
  CHECK(*decoded == model);
  CHECK(encode_ok(model) == bytes);
  CHECK(encode_ok(*decoded) == bytes);
}

TEST_CASE("bc: an absent optional output of a CPU op survives the round trip, elsewhere it is refused") {
  const lowered::Model model = lowered::testing::sample_model_with_absent_output();
  const std::string bytes = encode_ok(model);
  Expected<lowered::Model> decoded =
      decode_bc(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  REQUIRE_MESSAGE(decoded.has_value(), decoded.status().message());
  CHECK(*decoded == model);
  CHECK(edited([](bc::Model& m) { m.mutable_segments(1)->mutable_ops(0)->set_outputs(0, -1); }) ==
        "bc: segment 1 (id 1) op 0 (dequantize) output 0 is tensor -1 (the model has 6 tensors)");
}

TEST_CASE("bc: garbage, truncation and hostile values are refused with one line") {
  CHECK(decode_error("this is not a protobuf message at all") ==
        "bc: not a valid quantized model file (protobuf parse failed)");
  CHECK(decode_error("").find("bc: format version 0") == 0);
  const std::string good = encode_ok(sample_model());
  // A prefix ending at a field boundary is a smaller well-formed message (protobuf has no
  // end marker); whatever the outcome, an error is one "bc: " line.
  size_t refused = 0;
  for (size_t n = 0; n < good.size(); ++n) {
    const std::string error = decode_error(good.substr(0, n));
    if (error.empty()) continue;
    ++refused;
    REQUIRE_MESSAGE(error.rfind("bc: ", 0) == 0, "prefix of " << n << " bytes: " << error);
    REQUIRE(error.find('\n') == std::string::npos);
  }
  CHECK(refused > good.size() * 9 / 10);
  std::mt19937 rng(7);
  for (int round = 0; round < 2000; ++round) {
    std::string b = good;
    for (int e = 0; e < 3; ++e) b[rng() % b.size()] = static_cast<char>(rng());
    const std::string error = decode_error(b);
    if (!error.empty()) REQUIRE_MESSAGE(error.rfind("bc: ", 0) == 0, error);
  }

  CHECK(edited([](bc::Model& m) { m.set_format_version(2); }) ==
        "bc: format version 2 is not supported (this reader reads 1)");
  CHECK(edited([](bc::Model& m) { m.mutable_tensors(0)->set_type(8); }) ==
        "bc: tensor 0 'x' has unknown element type 8");
  CHECK(edited([](bc::Model& m) { m.mutable_segments(1)->set_kind(2); }) == "bc: segment 1 (id 1) has unknown kind 2");
  CHECK(edited([](bc::Model& m) { m.set_inputs(0, 17); }) == "bc: model input 0 is tensor 17 (the model has 6 tensors)");
  CHECK(edited([](bc::Model& m) { m.mutable_segments(0)->mutable_ops(1)->set_inputs(0, -2); }) ==
        "bc: segment 0 (id 0) op 1 (conv2d) input 0 is tensor -2 (the model has 6 tensors)");
  CHECK(edited([](bc::Model& m) { m.mutable_segments(0)->mutable_ops(1)->mutable_attributes(1)->set_name("a"); }) ==
        "bc: segment 0 (id 0) op 1 (conv2d) attribute 'a' does not follow 'clamp' (names are sorted and unique)");
  CHECK(edited([](bc::Model& m) { m.mutable_tensors(1)->set_data("xyz"); }) ==
        "bc: tensor 1 'x_q' is not constant but carries data");
  // lowered::validate runs last: an unknown op, a constant of the wrong size.
  CHECK(edited([](bc::Model& m) { m.mutable_segments(0)->mutable_ops(1)->set_type("conv9d"); }).rfind("bc: ", 0) == 0);
  CHECK(edited([](bc::Model& m) { m.mutable_tensors(2)->set_data("12"); }).rfind("bc: ", 0) == 0);
}

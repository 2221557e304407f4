// Tests of the lowered model's .hbm codec: round trip, determinism, and that every kind of
// damage, with or without a valid CRC, is refused with one "hbm: " line and never a crash.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "qflow/runtime/hbm_reader.h"
#include "hbm/writer.h"
#include "qflow/runtime/hbm_codec.h"
#include "tests/runtime/lowered_sample.h"

using namespace qflow;
using qflow::lowered::testing::sample_model;

namespace {

using Bytes = std::vector<uint8_t>;

Bytes encode_ok(const lowered::Model& m) {
  Expected<Bytes> bytes = lowered::encode_hbm(m, "qflow test");
  REQUIRE_MESSAGE(bytes.has_value(), bytes.message());
  return *bytes;
}

hbm::HbmFile file_ok(const lowered::Model& m) {
  Expected<hbm::HbmFile> file = lowered::to_hbm(m, "qflow test");
  REQUIRE_MESSAGE(file.has_value(), file.message());
  return *file;
}

// The decode error, or "" when the bytes decode.
std::string decode_error(const Bytes& bytes) {
  Expected<lowered::Model> m = lowered::decode_hbm(bytes);
  return m ? std::string() : m.message();
}

// Writes `file` (fresh CRCs) after `edit`, and returns the decode error.
std::string edited(const std::function<void(hbm::HbmFile&)>& edit) {
  hbm::HbmFile file = file_ok(sample_model());
  edit(file);
  Expected<Bytes> bytes = hbm::write(file);
  REQUIRE_MESSAGE(bytes.has_value(), bytes.message());
  return decode_error(*bytes);
}

void put32(Bytes& b, size_t at, uint32_t v) {
  for (int k = 0; k < 4; ++k) b[at + k] = static_cast<uint8_t>(v >> (8 * k));
}

bool one_hbm_line(const std::string& message) {
  return message.rfind("hbm: ", 0) == 0 && message.find('\n') == std::string::npos;
}

}  // namespace

TEST_CASE("lowered hbm: a model survives the round trip and encodes deterministically") {
  const lowered::Model model = sample_model();
  const Bytes bytes = encode_ok(model);
  Expected<lowered::Model> decoded = lowered::decode_hbm(bytes);
  REQUIRE_MESSAGE(decoded.has_value(), decoded.message());
  CHECK(*decoded == model);
  CHECK(encode_ok(model) == bytes);
  CHECK(encode_ok(*decoded) == bytes);

  constexpr std::string_view kPlatforms[] = {"nash"};
  Expected<lowered::Model> refused = lowered::decode_hbm(bytes, kPlatforms);
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.message() == "hbm: platform 'bayes' is not supported by this runtime (supported: nash)");
}

TEST_CASE("lowered hbm: an absent optional output of a CPU op survives the round trip") {
  const lowered::Model model = lowered::testing::sample_model_with_absent_output();
  Expected<lowered::Model> decoded = lowered::decode_hbm(encode_ok(model));
  REQUIRE_MESSAGE(decoded.has_value(), decoded.message());
  CHECK(*decoded == model);
}

TEST_CASE("lowered hbm: the container carries descriptors, segments, weights and metadata") {
  const hbm::HbmFile file = file_ok(sample_model());
  CHECK(file.platform == "bayes");
  CHECK(file.toolchain_version == "qflow test");
  CHECK(file.metadata.model_name == "tiny_conv");
  CHECK(file.metadata.properties.at("op_count") == "3");
  CHECK(file.metadata.properties.at("op_count.conv2d") == "1");
  CHECK(file.metadata.properties.at("bpu_segment_count") == "1");
  CHECK(file.metadata.properties.at("cpu_segment_count") == "1");
  REQUIRE(file.inputs.size() == 1);
  CHECK(file.inputs[0].name == "x");
  CHECK(file.inputs[0].dtype == hbm::DType::int8);  // taken quantized on the device
  CHECK(file.inputs[0].layout == hbm::Layout::nchw);
  CHECK(file.inputs[0].shape == std::vector<int64_t>{1, 1, 4, 4});
  CHECK(file.inputs[0].quant == hbm::Quantization{hbm::QuantKind::per_tensor, 0, {1.0f / 32}, {0}});
  REQUIRE(file.outputs.size() == 1);
  CHECK(file.outputs[0].dtype == hbm::DType::float32);
  CHECK(file.outputs[0].quant.kind == hbm::QuantKind::none);
  REQUIRE(file.segments.size() == 2);
  CHECK(file.segments[0].kind == hbm::SegmentKind::bpu);
  CHECK(file.segments[0].reads == std::vector<std::string>{"x"});
  CHECK(file.segments[0].writes == std::vector<std::string>{"y_q"});
  // w at 0 (18 bytes), b at the next multiple of 64.
  CHECK(file.segments[0].weights == std::vector<hbm::WeightRef>{{0, 18}, {64, 8}});
  CHECK(file.segments[1].kind == hbm::SegmentKind::cpu);
  CHECK(file.segments[1].reads == std::vector<std::string>{"y_q"});
  CHECK(file.segments[1].writes == std::vector<std::string>{"y"});
  CHECK(file.segments[1].weights.empty());
  CHECK(file.weights.size() == 72);
  CHECK(file.weights[20] == 0);  // padding
}

TEST_CASE("lowered hbm: an input with a float consumer is described as float32") {
  lowered::Model m = sample_model();
  // y = dequantize(quantize(x)) plus a second output that is x's float copy through the CPU.
  m.tensors.push_back(lowered::testing::tensor("x_copy_q", lowered::ElemType::u8, {1, 1, 4, 4}, {0.5, 128}));
  m.segments[0].ops.insert(m.segments[0].ops.begin() + 1, {"quantize", "x_quant2", {0}, {6}, {}});
  m.tensors.push_back(lowered::testing::tensor("x_copy", lowered::ElemType::f32, {1, 1, 4, 4}));
  m.segments[1].ops.push_back({"dequantize", "x_copy_dequant", {6}, {7}, {}});
  m.outputs.push_back(7);
  const hbm::HbmFile file = file_ok(m);
  CHECK(file.inputs[0].dtype == hbm::DType::float32);  // two quantize ops with different types
  CHECK(file.inputs[0].quant.kind == hbm::QuantKind::none);
  CHECK(file.outputs.size() == 2);
  CHECK(file.outputs[1].layout == hbm::Layout::nchw);
  CHECK(file.segments[0].writes == std::vector<std::string>{"x_copy_q", "y_q"});
  Expected<lowered::Model> back = lowered::decode_hbm(encode_ok(m));
  REQUIRE_MESSAGE(back.has_value(), back.message());
  CHECK(*back == m);
}

TEST_CASE("lowered hbm: the writer refuses an invalid model") {
  lowered::Model m = sample_model();
  m.segments[0].ops[1].type = "conv9d";
  Expected<Bytes> bytes = lowered::encode_hbm(m, "qflow test");
  REQUIRE_FALSE(bytes.has_value());
  CHECK(one_hbm_line(bytes.message()));

  m = sample_model();
  m.tensors[1].data = {1, 2, 3};
  bytes = lowered::encode_hbm(m, "qflow test");
  REQUIRE_FALSE(bytes.has_value());
  CHECK(bytes.message() == "hbm: tensor 'x_q' is not constant but carries data");
}

TEST_CASE("lowered hbm: every truncation and every flipped byte is refused") {
  const Bytes good = encode_ok(sample_model());
  for (size_t n = 0; n < good.size(); ++n) {
    const std::string error = decode_error(Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n)));
    REQUIRE_MESSAGE(one_hbm_line(error), "prefix of " << n << " bytes: " << error);
  }
  for (size_t i = 0; i < good.size(); ++i) {
    Bytes b = good;
    b[i] ^= 0x5a;
    const std::string error = decode_error(b);
    REQUIRE_MESSAGE(one_hbm_line(error), "byte " << i << ": " << error);
  }
}

TEST_CASE("lowered hbm: damage behind a valid CRC is refused") {
  // Segment 1's op stream: count, "dequantize" (4 + 10), "y_dequant" (4 + 9), inputs {4},
  // outputs {5}, no attributes; 51 bytes.
  const hbm::HbmFile sample = file_ok(sample_model());
  REQUIRE(sample.segments[1].op_stream.size() == 51);

  CHECK(edited([](hbm::HbmFile& f) { f.segments[1].op_stream[8] = 'D'; }).find("unknown op") !=
        std::string::npos);
  CHECK(edited([](hbm::HbmFile& f) { put32(f.segments[1].op_stream, 35, 99); }) ==
        "hbm: segment 1 (id 1) op stream: op 0 (dequantize) input 0 is tensor 99 (the model has 6 tensors; -1 "
        "marks an absent input)");
  CHECK(edited([](hbm::HbmFile& f) { put32(f.segments[1].op_stream, 43, 0xffffffff); }) ==
        "hbm: segment 1 (id 1) op stream: op 0 (dequantize) output 0 is tensor -1 (the model has 6 tensors)");
  CHECK(edited([](hbm::HbmFile& f) { put32(f.segments[1].op_stream, 0, 1000000); }).find("count 1000000 of ops") !=
        std::string::npos);
  CHECK(edited([](hbm::HbmFile& f) { put32(f.segments[1].op_stream, 4, 200); }).find("hbm: segment 1 (id 1) op stream: ") == 0);
  CHECK(edited([](hbm::HbmFile& f) { f.segments[1].op_stream.push_back(0); }) ==
        "hbm: segment 1 (id 1) op stream: 1 bytes left over after the encoded ops");
  CHECK(edited([](hbm::HbmFile& f) { f.segments[1].op_stream.pop_back(); }).find("hbm: segment 1 (id 1) op stream: ") == 0);
  // An attribute whose ints count runs past the end, and attributes out of order.
  CHECK(edited([](hbm::HbmFile& f) {
          Bytes& s = f.segments[1].op_stream;
          put32(s, 47, 1);
          const Bytes attr = {1, 0, 0, 0, 'a', 0xff, 0xff, 0xff, 0x0f, 0, 0, 0, 0, 0, 0, 0, 0};
          s.insert(s.end(), attr.begin(), attr.end());
        }).find("count 268435455 of ints") != std::string::npos);
  CHECK(edited([](hbm::HbmFile& f) {
          Bytes& s = f.segments[1].op_stream;
          put32(s, 47, 2);
          for (char name : {'b', 'a'}) {
            const Bytes attr = {1, 0, 0, 0, static_cast<uint8_t>(name), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
            s.insert(s.end(), attr.begin(), attr.end());
          }
        }) == "hbm: segment 1 (id 1) op stream: op 0 (dequantize) attribute 'a' does not follow 'b' (names are sorted "
              "and unique)");

  // The tensor table: tensor 0 is "x", its type byte at 9 and flags at 10.
  CHECK(edited([](hbm::HbmFile& f) { f.tensor_table[9] = 9; }) ==
        "hbm: tensors section: tensor 0 'x' has unknown element type 9");
  CHECK(edited([](hbm::HbmFile& f) { f.tensor_table[10] = 2; }) == "hbm: tensors section: tensor 0 'x' has unknown flags 2");
  CHECK(edited([](hbm::HbmFile& f) { put32(f.tensor_table, f.tensor_table.size() - 12, 6); }) ==
        "hbm: tensors section: model inputs entry 0 is tensor 6 of 6");
  CHECK(edited([](hbm::HbmFile& f) { f.tensor_table.resize(3); }).find("hbm: tensors section: ") == 0);
  CHECK(edited([](hbm::HbmFile& f) { f.tensor_table.clear(); }) ==
        "hbm: the file has no tensors section (it does not hold a lowered model)");
  CHECK(edited([](hbm::HbmFile& f) {
          f.weights.resize(64);
          f.segments[0].weights.pop_back();
        }) == "hbm: tensors section: tensor 3 'b' data (offset 64, size 8) is outside the 64-byte weights section");
  CHECK(edited([](hbm::HbmFile& f) { f.weights[30] = 1; }) ==
        "hbm: tensors section: weights byte 30 is padding between constants but is not zero");
  CHECK(edited([](hbm::HbmFile& f) { f.weights.push_back(0); }) ==
        "hbm: tensors section: the constants end at weights byte 72 but the weights section has 73 bytes");

  // What the container says must agree with the ops.
  CHECK(edited([](hbm::HbmFile& f) { f.segments[0].reads = {"y"}; }) ==
        "hbm: segment 0 (id 0) reads list does not match the tensors its ops read");
  CHECK(edited([](hbm::HbmFile& f) { f.segments[1].writes.push_back("x"); }) ==
        "hbm: segment 1 (id 1) writes list does not match the tensors its ops write");
  CHECK(edited([](hbm::HbmFile& f) { f.segments[0].weights.pop_back(); }) ==
        "hbm: segment 0 (id 0) weight references do not match the constants its ops read");
  CHECK(edited([](hbm::HbmFile& f) { f.inputs[0].shape[0] = 2; }) ==
        "hbm: input 0 'x' does not match its tensor in the tensors section");
  CHECK(edited([](hbm::HbmFile& f) { f.outputs.clear(); }) == "hbm: outputs section lists 0 tensors, the model has 1");
  // lowered::validate runs on what decodes: a segment dropped leaves y unwritten.
  CHECK(one_hbm_line(edited([](hbm::HbmFile& f) { f.segments.pop_back(); })));
}

TEST_CASE("lowered hbm: random damage behind valid CRCs never crashes") {
  const hbm::HbmFile sample = file_ok(sample_model());
  std::mt19937 rng(20261129);
  for (int round = 0; round < 3000; ++round) {
    hbm::HbmFile f = sample;
    Bytes* target = round % 3 == 0 ? &f.tensor_table : &f.segments[static_cast<size_t>(round % 2)].op_stream;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !target->empty(); ++e) {
      const size_t at = rng() % target->size();
      switch (rng() % 4) {
        case 0: (*target)[at] = static_cast<uint8_t>(rng()); break;
        case 1: (*target)[at] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
        case 2: target->resize(at); break;
        default:
          if (at + 4 <= target->size()) put32(*target, at, static_cast<uint32_t>(rng()));
      }
    }
    Expected<Bytes> bytes = hbm::write(f);
    REQUIRE(bytes.has_value());
    Expected<lowered::Model> decoded = lowered::decode_hbm(*bytes);
    if (!decoded) REQUIRE_MESSAGE(one_hbm_line(decoded.message()), decoded.message());
  }
}

TEST_CASE("hbm: the tensors section is kept as bytes, at most once") {
  hbm::HbmFile f = file_ok(sample_model());
  Expected<Bytes> bytes = hbm::write(f);
  REQUIRE(bytes.has_value());
  Expected<hbm::HbmFile> parsed = hbm::parse(*bytes);
  REQUIRE_MESSAGE(parsed.has_value(), parsed.message());
  CHECK(parsed->tensor_table == f.tensor_table);
  CHECK(*parsed == f);
  CHECK(hbm::section_kind_name(7) == "tensors");

  // A second tensors section: rename the CPU segment's section (kind 5 -> 7) and reseal.
  f.unknown_sections.push_back({0x1234, 8, {1, 2, 3}});
  bytes = hbm::write(f);
  REQUIRE(bytes.has_value());
  Bytes b = *bytes;
  const size_t entry = 96 + 5 * 32;  // metadata, inputs, outputs, tensors, bpu, cpu
  REQUIRE(b[entry] == 5);
  b[entry] = 7;
  // Header CRC over the header (CRC field zero) and the table.
  {
    std::vector<uint8_t> covered(b.begin(), b.begin() + 96 + 8 * 32);
    for (int k = 0; k < 4; ++k) covered[92 + k] = 0;
    uint32_t crc = 0xffffffffu;
    for (uint8_t byte : covered) {
      crc ^= byte;
      for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
    }
    put32(b, 92, ~crc);
  }
  CHECK(decode_error(b) == "hbm: section 5 (tensors) repeats the tensors section (section 3)");
}

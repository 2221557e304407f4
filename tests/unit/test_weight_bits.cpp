// Weight grids of 2 to 16 bits: the symmetric grid, its container, and the [quantization] key.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "framework/quant/quantization_settings.h"
#include "framework/quant/qdq_builder.h"

using namespace qflow;

namespace {

// 4 output channels of 64 weights, a different spread each.
Tensor random_weight() {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(4 * 64);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = normal(rng) * static_cast<float>(1 + i / 64);
  return Tensor::from_vector<float>({4, 64}, values);
}

}  // namespace

TEST_CASE("weight-bits: 4-bit weights take at most 15 values per channel and the largest maps to +-7") {
  const Tensor w = random_weight();
  auto q = quantize_weight(w, 0, DType::Int8, false, 4);
  REQUIRE_MESSAGE(q.has_value(), q.status().message());
  CHECK(q->qmax == 7.0);
  CHECK(q->values.dtype() == DType::Int8);
  for (int64_t c = 0; c < 4; ++c) {
    std::set<int> distinct;
    float max_abs = 0.0f;
    int at_max = 0;
    for (int64_t i = 0; i < 64; ++i) {
      const int v = q->values.data<int8_t>()[c * 64 + i];
      CHECK(v >= -7);
      CHECK(v <= 7);
      distinct.insert(v);
      const float x = w.data<float>()[c * 64 + i];
      if (std::fabs(x) > max_abs) max_abs = std::fabs(x), at_max = v;
    }
    CHECK(distinct.size() <= 15);
    CHECK(std::abs(at_max) == 7);
    CHECK(q->scale[static_cast<std::size_t>(c)] == static_cast<float>(max_abs / 7.0));
  }
}

TEST_CASE("weight-bits: the grid of b bits is +-(2^(b-1)-1) in int8 up to 8 bits, int16 above") {
  CHECK(weight_qmax(DType::Int8, false, 2) == 1.0);
  CHECK(weight_qmax(DType::Int8, false, 8) == 127.0);
  CHECK(weight_qmax(DType::Int8, true, 8) == 64.0);  // reduce-range still bounds 8-bit weights
  CHECK(weight_qmax(DType::Int8, true, 4) == 7.0);
  CHECK(weight_qmax(DType::Int16, false, 12) == 2047.0);
  auto q12 = quantize_weight(random_weight(), 0, DType::Int16, false, 12);
  REQUIRE(q12.has_value());
  int max_q = 0;
  for (int64_t i = 0; i < q12->values.numel(); ++i) max_q = std::max(max_q, std::abs(int{q12->values.data<int16_t>()[i]}));
  CHECK(max_q == 2047);
  // 12 bits do not fit an int8 container, 1 bit is no symmetric grid.
  CHECK_FALSE(quantize_weight(random_weight(), 0, DType::Int8, false, 12).has_value());
  CHECK_FALSE(quantize_weight(random_weight(), 0, DType::Int8, false, 1).has_value());
}

TEST_CASE("weight-bits: resolution picks the container; a weight-dtype below it means its full range") {
  QuantConfig config;
  REQUIRE(set_quantization_key(config.model, "weight-bits", int64_t{4}).is_ok());
  REQUIRE(set_quantization_key(config.op_types["Gemm"], "weight-bits", int64_t{12}).is_ok());
  REQUIRE(set_quantization_key(config.nodes["fc"], "weight-dtype", std::string("int16")).is_ok());
  const QuantSpec conv = config.resolve("c1", "Conv");
  CHECK(conv.weight_bits == 4);
  CHECK(conv.weight_dtype == DType::Int8);
  CHECK(weight_qmax(conv) == 7.0);
  const QuantSpec gemm = config.resolve("g1", "Gemm");
  CHECK(gemm.weight_bits == 12);
  CHECK(gemm.weight_dtype == DType::Int16);
  const QuantSpec fc = config.resolve("fc", "Gemm");
  CHECK(fc.weight_bits == 0);
  CHECK(weight_qmax(fc) == 32767.0);
  CHECK(format_quantization(config).find("weight-bits = 4\n") != std::string::npos);
}

TEST_CASE("weight-bits: out-of-range and contradictory values are refused with the allowed range") {
  QuantOverride entry;
  Status low = set_quantization_key(entry, "weight-bits", int64_t{1});
  CHECK(low.message() == "'weight-bits' must be an integer from 2 to 16");
  CHECK_FALSE(set_quantization_key(entry, "weight-bits", int64_t{17}).is_ok());
  CHECK_FALSE(set_quantization_key(entry, "weight-bits", std::string("4")).is_ok());
  REQUIRE(set_quantization_key(entry, "weight-dtype", std::string("int8")).is_ok());
  Status wide = set_quantization_key(entry, "weight-bits", int64_t{12});
  CHECK(wide.message() == "'weight-bits' = 12 does not fit weight-dtype int8 (2 to 8 bits)");
}

// The vector loops of QuantizeLinear and DynamicQuantizeLinear against their scalar definitions.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "framework/interpreter/kernels/quant_util.h"
#include "framework/interpreter/kernels/quantize_run.h"

using namespace qflow;

namespace {

// Values that stress rounding and saturation: exact halves, huge, tiny, signed zeros, NaN, Inf.
std::vector<float> hard_values(std::mt19937& rng, std::size_t n) {
  const float specials[] = {0.0f, -0.0f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 127.5f, 128.5f, -128.5f, 255.5f,
                            32767.5f, -32768.5f, 65535.5f, 1e30f, -1e30f, 1e-40f, -1e-40f,
                            std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::max(),
                            std::numeric_limits<float>::lowest()};
  std::uniform_real_distribution<float> wide(-70000.0f, 70000.0f), narrow(-300.0f, 300.0f);
  std::uniform_int_distribution<int> pick(0, 3);
  std::vector<float> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    switch (pick(rng)) {
      case 0: out[i] = specials[rng() % std::size(specials)]; break;
      case 1: out[i] = wide(rng); break;
      case 2: out[i] = std::nearbyint(narrow(rng) * 2.0f) / 2.0f; break;  // many exact halves
      default: out[i] = narrow(rng); break;
    }
  }
  return out;
}

template <typename Q>
void check_type(std::mt19937& rng) {
  const float scales[] = {1.0f, 0.5f, 0.0123f, 3.7f, 1e-6f, 2.0f};
  for (std::size_t n : {0u, 1u, 7u, 8u, 9u, 31u, 32u, 33u, 64u, 100u, 1001u}) {
    for (float scale : scales) {
      const int32_t lo = std::numeric_limits<Q>::lowest(), hi = std::numeric_limits<Q>::max();
      for (int32_t zp : {lo, 0, hi, static_cast<int32_t>(lo + (hi - lo) / 3)}) {
        const std::vector<float> in = hard_values(rng, n);
        std::vector<Q> fast(n), scalar(n);
        quant_detail::quantize_float_run<Q>(in.data(), fast.data(), static_cast<int64_t>(n), scale, zp);
        for (std::size_t i = 0; i < n; ++i) scalar[i] = quant_detail::saturate_round<Q>(in[i] / scale, zp);
        for (std::size_t i = 0; i < n; ++i)
          if (fast[i] != scalar[i])
            FAIL_CHECK("x=" << in[i] << " scale=" << scale << " zp=" << zp << ": " << +fast[i] << " vs " << +scalar[i]);
        CHECK(fast == scalar);
      }
    }
  }
}

}  // namespace

TEST_CASE("QuantizeLinear's float loop gives the scalar definition's bytes for every output type") {
  std::mt19937 rng(20261130);
  check_type<int8_t>(rng);
  check_type<uint8_t>(rng);
  check_type<int16_t>(rng);
  check_type<uint16_t>(rng);
}

TEST_CASE("DynamicQuantizeLinear's range loop skips NaN and agrees with a scalar min and max") {
  std::mt19937 rng(20261202);
  for (std::size_t n : {0u, 1u, 7u, 8u, 9u, 17u, 1001u}) {
    for (int trial = 0; trial < 8; ++trial) {
      const std::vector<float> in = hard_values(rng, n);
      float lo = 0.0f, hi = 0.0f;
      quant_detail::float_range_run(in.data(), static_cast<int64_t>(n), lo, hi);
      float want_lo = 0.0f, want_hi = 0.0f;
      for (float v : in) {
        if (std::isnan(v)) continue;
        want_lo = std::min(want_lo, v);
        want_hi = std::max(want_hi, v);
      }
      CHECK(lo == want_lo);
      CHECK(hi == want_hi);
    }
  }
  const std::vector<float> only_nan(20, std::numeric_limits<float>::quiet_NaN());
  float lo = -1.0f, hi = 2.0f;
  quant_detail::float_range_run(only_nan.data(), 20, lo, hi);
  CHECK(lo == -1.0f);
  CHECK(hi == 2.0f);
}

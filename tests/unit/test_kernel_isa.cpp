// The instruction-set cap (QFLOW_ISA, --isa) on the interpreter: every cap this CPU has runs
// the Fashion-MNIST fixture; caps from avx2 up give the same bits, the portable cap differs
// only by the rounding of the fused multiply-adds it does without (docs/performance.md).
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "framework/data/dataset.h"
#include "framework/interpreter/executor.h"
#include "framework/interpreter/kernel_isa.h"
#include "framework/interpreter/kernels/activation.h"
#include "framework/interpreter/kernels/sgemm.h"
#include "framework/onnx/onnx_import.h"
#include "framework/pipeline/pass_samples.h"
#include "qflow/runtime/integer_gemm.h"
#include "qflow/runtime/isa_cap.h"

namespace qflow {
namespace {

// Restores QFLOW_ISA's cap however the test case ends.
struct CapGuard {
  ~CapGuard() { reset_kernel_isa_cap(); }
};

std::vector<std::string> caps_this_cpu_has() {
  std::vector<std::string> names;
  for (const isa::Level l : {isa::Level::portable, isa::Level::avx2, isa::Level::avxvnni, isa::Level::avx512})
    if (isa::cpu_has(l)) names.emplace_back(isa::level_name(l));
  return names;
}

// NaN, the infinities and -0 at fixed places of a test vector of at least 303 values.
void put_special_values(std::vector<float>& data) {
  data[7] = std::numeric_limits<float>::quiet_NaN();
  data[300] = std::numeric_limits<float>::infinity();
  data[301] = -std::numeric_limits<float>::infinity();
  data[302] = -0.0f;
}

// Runs `program` over `data` (a multiple of 25 values) under every cap this CPU has, as one
// row and as rows of 25 (the tails through the scalar loop), and compares the bytes with `want`.
void check_every_cap(const Epilogue& program, const std::vector<float>& data, const std::vector<float>& want) {
  const auto n = static_cast<int64_t>(data.size());
  for (const std::string& cap : caps_this_cpu_has()) {
    CAPTURE(cap);
    REQUIRE(set_kernel_isa_cap(cap, "--isa").is_ok());
    std::vector<float> got = data;
    activation::finish_rows(&program, got.data(), 1, n, n, -1, nullptr);
    CHECK(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0);
    got = data;
    activation::finish_rows(&program, got.data(), n / 25, 25, 25, -1, nullptr);
    CHECK(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0);
  }
}

}  // namespace

TEST_CASE("isa cap: names, refusals and what each cap selects") {
  CapGuard guard;
  CHECK(set_kernel_isa_cap("sse9", "--isa").message() ==
        "--isa=sse9: unknown instruction set; expected portable, avx2, avxvnni, avx512 or native");
  for (const isa::Level l : {isa::Level::avx2, isa::Level::avxvnni, isa::Level::avx512})
    if (!isa::cpu_has(l)) {
      const Status s = set_kernel_isa_cap(isa::level_name(l), "QFLOW_ISA");
      CHECK(s.message() == std::string("QFLOW_ISA=") + isa::level_name(l) + ": this CPU lacks the instructions of " +
                               isa::level_name(l) + " (it has: " + isa::cpu_levels() + ")");
    }
  REQUIRE(set_kernel_isa_cap("portable", "--isa").is_ok());
  CHECK(sgemm_isa() == SgemmIsa::Portable);
  CHECK(fx::fast::best_isa() == fx::fast::Isa::Portable);
  CHECK(kernel_isa_summary() == "cap portable: float sgemm portable, depthwise portable; integer portable");
  if (isa::cpu_has(isa::Level::avx2)) {
    REQUIRE(set_kernel_isa_cap("avx2", "--isa").is_ok());
    CHECK(sgemm_isa() == SgemmIsa::Avx2);
    CHECK(fx::fast::best_isa() == fx::fast::Isa::Avx2);  // no VNNI under avx2
  }
  REQUIRE(set_kernel_isa_cap("native", "--isa").is_ok());
  CHECK(isa::cap() == isa::Level::native);
  CHECK(kernel_isa_summary().rfind("cap native: ", 0) == 0);
}

TEST_CASE("isa cap: the activation loops give the same bits on the baseline and under every cap") {
  CapGuard guard;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> d(-4.0f, 4.0f);
  const int64_t rows = 3, n = 37, ld = 40;
  std::vector<float> data(static_cast<std::size_t>(rows * ld)), bias(rows);
  for (float& v : data) v = d(rng);
  for (float& v : bias) v = d(rng);
  data[5] = std::numeric_limits<float>::quiet_NaN();
  // The fused loop (BatchNorm then Clip), and the stage-by-stage one (HardSwish as a diamond
  // then a Mul) with its eight-lane clipping stage.
  EpilogueStage bn{EpilogueStage::Kind::BatchNorm}, clip{EpilogueStage::Kind::Clip}, diamond{EpilogueStage::Kind::HardSwishDiamond},
      mul{EpilogueStage::Kind::Mul};
  bn.mean = {0.5f, -1.0f, 0.25f}, bn.factor = {1.5f, 0.75f, 3.0f}, bn.bias = {0.1f, 0.2f, -0.3f};
  clip.lo = -1.0f, clip.hi = 2.5f;
  diamond.constant = 3.0f, diamond.lo = 0.0f, diamond.hi = 6.0f, diamond.divisor = 6.0f;
  mul.constant = 1.7f;
  const Epilogue fused{{bn, clip}, 3}, staged{{diamond, mul}, 0};
  auto run = [&](const Epilogue& e) {
    std::vector<float> out = data, clipped(data.size());
    activation::finish_rows(&e, out.data(), rows, n, ld, 0, bias.data());
    activation::clip_floats(data.data(), clipped.data(), static_cast<int64_t>(data.size()), -0.5f, 0.5f);
    out.insert(out.end(), clipped.begin(), clipped.end());
    return out;
  };
  REQUIRE(set_kernel_isa_cap("portable", "--isa").is_ok());
  const std::vector<float> want_fused = run(fused), want_staged = run(staged);
  for (const std::string& cap : caps_this_cpu_has()) {
    CAPTURE(cap);
    REQUIRE(set_kernel_isa_cap(cap, "--isa").is_ok());
    const std::vector<float> got_fused = run(fused), got_staged = run(staged);
    CHECK(std::memcmp(got_fused.data(), want_fused.data(), want_fused.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(got_staged.data(), want_staged.data(), want_staged.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("isa cap: fake quant by fused multiply-adds gives the division's bits") {
  CapGuard guard;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> scales(1e-4f, 0.5f);
  std::uniform_int_distribution<int> integers(-40000, 40000), ulps(-6, 6);
  std::uniform_int_distribution<uint32_t> any_bits;
  // Values on and a few ulps around (k + 0.5) * s, where a quotient off by one ulp rounds to
  // another integer, any float at all (subnormals, huge values), NaN, the infinities, zeros;
  // int8 and int16 ranges; scales inside the fused range, at its edges and outside it.
  const int64_t n = 4000;
  const std::vector<float> fixed = {0.125f, 0x1p-60f, 0x1p60f, 0x1.8p-61f, 0x1p61f, 3e-8f};
  for (int trial = 0; trial < 40; ++trial) {
    CAPTURE(trial);
    EpilogueStage stage{EpilogueStage::Kind::FakeQuant};
    stage.constant = trial < static_cast<int>(fixed.size()) ? fixed[static_cast<std::size_t>(trial)] : scales(rng);
    stage.lo = trial % 2 ? -128.0f : -32768.0f;
    stage.hi = trial % 2 ? 127.0f : 32767.0f;
    if (trial % 5 == 0) stage.lo = 0.0f, stage.hi = 255.0f;  // uint8, zero point 0
    std::vector<float> data(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      float v = (static_cast<float>(integers(rng)) + 0.5f) * stage.constant;
      const auto bits = static_cast<int32_t>(std::bit_cast<uint32_t>(v));
      v = std::bit_cast<float>(static_cast<uint32_t>(bits + ulps(rng)));
      if (i % 3 == 0) v = std::bit_cast<float>(any_bits(rng));
      data[static_cast<std::size_t>(i)] = v;
    }
    put_special_values(data);
    data[303] = std::numeric_limits<float>::max();
    data[304] = std::numeric_limits<float>::denorm_min();
    std::vector<float> want = data;
    for (float& v : want) v = activation::fake_quant(v, stage.constant, stage.lo, stage.hi);
    check_every_cap(Epilogue{{stage}, 0}, data, want);
  }
}

TEST_CASE("isa cap: x * FakeQuant(HardSigmoid(x)) by fused multiply-adds gives the division's bits") {
  CapGuard guard;
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> scales(1e-5f, 0.05f), values(-8.0f, 8.0f);
  std::uniform_int_distribution<int> integers(0, 40000), ulps(-6, 6);
  std::uniform_int_distribution<uint32_t> any_bits;
  // Gates on and a few ulps around (k + 0.5) * s (inputs solved back through alpha and beta),
  // inputs anywhere, NaN, the infinities, zeros; int8, uint8 and int16 ranges; scales inside
  // the fused range, at its edges and outside it.
  const int64_t n = 4000;
  const std::vector<float> fixed = {1.0f / 255.0f, 0x1p-60f, 0x1p60f, 0x1.8p-61f, 1.0f / 32767.0f};
  for (int trial = 0; trial < 30; ++trial) {
    CAPTURE(trial);
    EpilogueStage stage{EpilogueStage::Kind::HardSigmoidProductQuantized};
    stage.constant = trial < static_cast<int>(fixed.size()) ? fixed[static_cast<std::size_t>(trial)] : scales(rng);
    stage.alpha = trial % 2 ? 0.2 : 1.0 / 6.0;
    stage.beta = 0.5;
    stage.lo = trial % 3 == 0 ? 0.0f : trial % 3 == 1 ? -128.0f : -32768.0f;
    stage.hi = trial % 3 == 0 ? 255.0f : trial % 3 == 1 ? 127.0f : 32767.0f;
    const auto alpha = static_cast<float>(stage.alpha), beta = static_cast<float>(stage.beta);
    std::vector<float> data(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const float gate = (static_cast<float>(integers(rng) % 256) + 0.5f) * stage.constant;
      float v = (gate - beta) / alpha;
      const auto bits = static_cast<int32_t>(std::bit_cast<uint32_t>(v));
      v = std::bit_cast<float>(static_cast<uint32_t>(bits + ulps(rng)));
      if (i % 3 == 0) v = values(rng);
      if (i % 7 == 0) v = std::bit_cast<float>(any_bits(rng));
      data[static_cast<std::size_t>(i)] = v;
    }
    put_special_values(data);
    data[303] = -3.0f;  // a gate of exactly 0 (-0 for some alpha)
    std::vector<float> want = data;
    for (float& v : want)
      v = v * activation::fake_quant(activation::hard_sigmoid(v, alpha, beta), stage.constant, stage.lo, stage.hi);
    check_every_cap(Epilogue{{stage}, 0}, data, want);
  }
}

TEST_CASE("isa cap: the Fashion-MNIST fixture on every cap this CPU has") {
  CapGuard guard;
  const std::string dir = std::string(QFLOW_SOURCE_DIR) + "/models/fashion_mnist/";
  auto model = import_onnx_file(dir + "fashion_mnist.onnx");
  REQUIRE_MESSAGE(model.has_value(), model.status().message());
  DataSpec spec;
  spec.path = dir + "calib_200.npy";
  auto dataset = open_dataset(spec);
  REQUIRE_MESSAGE(dataset.has_value(), dataset.status().message());
  const DatasetPassSamples samples(*dataset, *model);
  REQUIRE(samples.count() == 200);

  // All outputs of all samples, concatenated, under the cap in force.
  auto run_all = [&] {
    auto ex = Executor::create(*model);
    REQUIRE_MESSAGE(ex.has_value(), ex.status().message());
    std::vector<float> all;
    for (int64_t i = 0; i < samples.count(); ++i) {
      auto feeds = samples.sample(i);
      REQUIRE(feeds.has_value());
      auto out = (*ex)->run(*feeds);
      REQUIRE_MESSAGE(out.has_value(), out.status().message());
      for (const auto& [name, tensor] : *out)
        all.insert(all.end(), tensor.data<float>(), tensor.data<float>() + tensor.numel());
    }
    return all;
  };
  REQUIRE(set_kernel_isa_cap("native", "--isa").is_ok());
  const std::vector<float> native = run_all();
  float largest = 0.0f;
  for (float v : native) largest = std::max(largest, std::abs(v));
  for (const std::string& cap : caps_this_cpu_has()) {
    CAPTURE(cap);
    REQUIRE(set_kernel_isa_cap(cap, "--isa").is_ok());
    const std::vector<float> got = run_all();
    REQUIRE(got.size() == native.size());
    const bool fused = sgemm_isa() != SgemmIsa::Portable;
    if (fused == (sgemm_isa_supported(SgemmIsa::Avx2))) {
      // The same multiply-add chains as native (or native is portable itself): the same bits.
      CHECK(std::equal(got.begin(), got.end(), native.begin(), [](float a, float b) {
        return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
      }));
    } else {
      // Portable under an FMA native: each product rounded before its add. The logits stay
      // within 1e-5 of the largest one.
      float worst = 0.0f;
      for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - native[i]));
      MESSAGE("portable cap: largest difference " << worst << " of logits up to " << largest);
      CHECK(worst <= 1e-5f * largest);
    }
  }
}

}  // namespace qflow

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

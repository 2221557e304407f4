// Writes the lowered-model fixtures of the CLI tests into DIR: the sample model of
// tests/runtime/lowered_sample.h as tiny.hbm and tiny.bc, inputs, the executor's outputs,
// and damaged files.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "framework/core/file_io.h"
#include "framework/data/npy.h"
#include "plugins/backends/bpu/bc_codec.h"
#include "qflow/runtime/executor.h"
#include "qflow/runtime/hbm_codec.h"
#include "tests/runtime/lowered_sample.h"

using namespace qflow;

namespace {

int fail(const std::string& message) {
  std::fprintf(stderr, "make_lowered_models: %s\n", message.c_str());
  return 1;
}

Tensor floats(Shape shape, const std::vector<float>& values) { return Tensor::from_vector<float>(std::move(shape), values); }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return fail("usage: make_lowered_models DIR");
  const std::string dir = argv[1];
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return fail("cannot create " + dir + ": " + ec.message());
  const lowered::Model model = lowered::testing::sample_model();

  Expected<std::vector<uint8_t>> hbm_bytes = lowered::encode_hbm(model, "qflow test");
  if (!hbm_bytes) return fail(hbm_bytes.status().message());
  Expected<std::string> bc_bytes = encode_bc(model);
  if (!bc_bytes) return fail(bc_bytes.status().message());
  const std::string hbm(hbm_bytes->begin(), hbm_bytes->end());
  Expected<lowered::Executor> exec = lowered::Executor::create(model);
  if (!exec) return fail(exec.status().message());

  // Three samples, each a multiple of the input scale 1/32 inside the int8 range.
  std::vector<float> x3;
  for (int i = 0; i < 48; ++i) x3.push_back(static_cast<float>((i * 53) % 240 - 120) / 32.0f);
  std::vector<float> y3;
  for (int s = 0; s < 3; ++s) {
    std::vector<std::vector<float>> out;
    if (Status st = exec->run({std::span<const float>(x3.data() + 16 * s, 16)}, out); !st) return fail(st.message());
    y3.insert(y3.end(), out[0].begin(), out[0].end());
  }
  const std::vector<float> x(x3.begin(), x3.begin() + 16);
  const std::vector<float> y(y3.begin(), y3.begin() + 32);
  std::vector<int8_t> xq;
  for (float v : x) xq.push_back(static_cast<int8_t>(v * 32.0f));

  Tensor x_f64(DType::Float64, {1, 1, 4, 4});
  for (int i = 0; i < 16; ++i) x_f64.data<double>()[i] = x[static_cast<size_t>(i)];

  const struct {
    const char* name;
    std::string bytes;
  } files[] = {
      {"tiny.hbm", hbm},
      {"tiny.bc", *bc_bytes},
      {"truncated.hbm", hbm.substr(0, hbm.size() - 10)},
      {"garbage.bc", "this is not a lowered model"},
  };
  for (const auto& f : files) {
    if (Status s = write_file_atomic(dir + "/" + f.name, f.bytes); !s.is_ok()) return fail(s.message());
  }
  const struct {
    const char* name;
    Tensor tensor;
  } arrays[] = {
      {"x.npy", floats({1, 1, 4, 4}, x)},
      {"x3.npy", floats({3, 1, 4, 4}, x3)},
      {"x_wide.npy", floats({1, 1, 4, 5}, std::vector<float>(20, 0.0f))},
      {"xq.npy", Tensor::from_vector<int8_t>({1, 1, 4, 4}, xq)},
      {"x_f64.npy", x_f64},
      {"y_expected.npy", floats({1, 2, 4, 4}, y)},
      {"y3_expected.npy", floats({3, 2, 4, 4}, y3)},
  };
  for (const auto& a : arrays) {
    if (Status s = write_npy_file(dir + "/" + a.name, a.tensor); !s.is_ok()) return fail(s.message());
  }
  return 0;
}

// Tests of the runtime C API (qflow/runtime.h) on a hand-built lowered model.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "qflow/runtime.h"
#include "qflow/runtime/executor.h"
#include "qflow/runtime/hbm_codec.h"
#include "tests/runtime/lowered_sample.h"

using namespace qflow;
using qflow::lowered::testing::sample_model;

namespace {

std::vector<uint8_t> sample_bytes() {
  Expected<std::vector<uint8_t>> bytes = lowered::encode_hbm(sample_model(), "qflow test");
  REQUIRE_MESSAGE(bytes.has_value(), bytes.message());
  return *bytes;
}

// Inputs that are exact multiples of the input scale 1/32 inside the int8 range.
std::vector<float> sample_input() {
  std::vector<float> x;
  for (int i = 0; i < 16; ++i) x.push_back(static_cast<float>((i * 37) % 200 - 100) / 32.0f);
  return x;
}

struct Handle {
  qflow_rt_model* model = nullptr;
  ~Handle() { qflow_rt_free(model); }
};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("capi: load from memory, query the inputs and outputs, run like the executor") {
  const std::vector<uint8_t> bytes = sample_bytes();
  Handle h;
  REQUIRE_MESSAGE(qflow_rt_load_memory(bytes.data(), bytes.size(), &h.model) == QFLOW_RT_OK, qflow_rt_last_error());
  CHECK(std::string(qflow_rt_last_error()).empty());
  CHECK(std::string(qflow_rt_platform(h.model)) == "bayes");
  REQUIRE(qflow_rt_input_count(h.model) == 1);
  REQUIRE(qflow_rt_output_count(h.model) == 1);

  qflow_rt_tensor_info in{};
  REQUIRE(qflow_rt_input_info(h.model, 0, &in) == QFLOW_RT_OK);
  CHECK(std::string(in.name) == "x");
  REQUIRE(in.rank == 4);
  CHECK(std::vector<int64_t>(in.shape, in.shape + 4) == std::vector<int64_t>{1, 1, 4, 4});
  CHECK(in.element_count == 16);
  CHECK(in.quantized_dtype == QFLOW_RT_INT8);
  CHECK(in.scale == 1.0f / 32);
  CHECK(in.zero_point == 0);
  qflow_rt_tensor_info out{};
  REQUIRE(qflow_rt_output_info(h.model, 0, &out) == QFLOW_RT_OK);
  CHECK(std::string(out.name) == "y");
  CHECK(out.element_count == 32);
  // The raw form: the int8 y_q the dequantize reads.
  CHECK(out.quantized_dtype == QFLOW_RT_INT8);
  CHECK(out.scale == 0.1f);
  CHECK(out.zero_point == 3);

  const std::vector<float> x = sample_input();
  std::vector<float> y(32, -1.0f);
  const float* inputs[] = {x.data()};
  float* outputs[] = {y.data()};
  REQUIRE_MESSAGE(qflow_rt_run(h.model, inputs, outputs) == QFLOW_RT_OK, qflow_rt_last_error());

  Expected<lowered::Executor> exec = lowered::Executor::create(sample_model());
  REQUIRE_MESSAGE(exec.has_value(), exec.message());
  std::vector<std::vector<float>> expected;
  REQUIRE(exec->run({std::span<const float>(x)}, expected).is_ok());
  REQUIRE(expected.size() == 1);
  CHECK(same_bits(y, expected[0]));

  // The same input given quantized: x * 32 exactly.
  std::vector<int8_t> xq;
  for (float v : x) xq.push_back(static_cast<int8_t>(v * 32.0f));
  std::vector<float> yq(32, -1.0f);
  const void* qinputs[] = {xq.data()};
  float* qoutputs[] = {yq.data()};
  REQUIRE_MESSAGE(qflow_rt_run_quantized(h.model, qinputs, qoutputs) == QFLOW_RT_OK, qflow_rt_last_error());
  CHECK(same_bits(yq, expected[0]));
}

TEST_CASE("capi: load from a file") {
  const std::vector<uint8_t> bytes = sample_bytes();
  const std::filesystem::path path = std::filesystem::temp_directory_path() / "qflow_capi_test_model.hbm";
  {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  Handle h;
  REQUIRE_MESSAGE(qflow_rt_load_file(path.c_str(), &h.model) == QFLOW_RT_OK, qflow_rt_last_error());
  CHECK(qflow_rt_input_count(h.model) == 1);
  std::filesystem::remove(path);

  qflow_rt_model* missing = reinterpret_cast<qflow_rt_model*>(1);
  CHECK(qflow_rt_load_file("/no/such/file.hbm", &missing) == QFLOW_RT_ERROR_IO);
  CHECK(missing == nullptr);
  CHECK(std::string(qflow_rt_last_error()) == "qflow_rt: cannot open '/no/such/file.hbm'");
}

TEST_CASE("capi: bad files, null pointers and bad indices are errors with a message") {
  qflow_rt_model* m = nullptr;
  CHECK(qflow_rt_load_memory("garbage!", 8, &m) == QFLOW_RT_ERROR_BAD_FORMAT);
  CHECK(m == nullptr);
  CHECK(std::string(qflow_rt_last_error()) ==
        "hbm: bad magic: not a .hbm file (expected \"QFHBM\" and three zero bytes)");
  std::vector<uint8_t> bytes = sample_bytes();
  bytes[bytes.size() / 2] ^= 1;
  CHECK(qflow_rt_load_memory(bytes.data(), bytes.size(), &m) == QFLOW_RT_ERROR_BAD_FORMAT);
  CHECK(std::string(qflow_rt_last_error()).rfind("hbm: ", 0) == 0);
  CHECK(qflow_rt_load_memory(nullptr, 10, &m) == QFLOW_RT_ERROR_NULL_POINTER);
  CHECK(std::string(qflow_rt_last_error()) == "qflow_rt: data is NULL");
  CHECK(qflow_rt_load_memory(bytes.data(), bytes.size(), nullptr) == QFLOW_RT_ERROR_NULL_POINTER);
  CHECK(qflow_rt_load_file(nullptr, &m) == QFLOW_RT_ERROR_NULL_POINTER);

  bytes = sample_bytes();
  Handle h;
  REQUIRE(qflow_rt_load_memory(bytes.data(), bytes.size(), &h.model) == QFLOW_RT_OK);
  qflow_rt_tensor_info info{};
  CHECK(qflow_rt_input_info(h.model, 1, &info) == QFLOW_RT_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(qflow_rt_last_error()) == "qflow_rt: input index 1 is out of range (the model has 1 inputs)");
  CHECK(qflow_rt_output_info(h.model, 0, nullptr) == QFLOW_RT_ERROR_NULL_POINTER);
  CHECK(qflow_rt_output_info(nullptr, 0, &info) == QFLOW_RT_ERROR_NULL_POINTER);
  CHECK(qflow_rt_run(nullptr, nullptr, nullptr) == QFLOW_RT_ERROR_NULL_POINTER);
  CHECK(std::string(qflow_rt_last_error()) == "qflow_rt: model is NULL");
  std::vector<float> y(32);
  float* outputs[] = {y.data()};
  CHECK(qflow_rt_run(h.model, nullptr, outputs) == QFLOW_RT_ERROR_NULL_POINTER);
  CHECK(std::string(qflow_rt_last_error()) == "qflow_rt: inputs is NULL");
  const float* null_input[] = {nullptr};
  CHECK(qflow_rt_run(h.model, null_input, outputs) == QFLOW_RT_ERROR_NULL_POINTER);
  CHECK(std::string(qflow_rt_last_error()) == "qflow_rt: input buffer 0 is NULL");
  const std::vector<float> x = sample_input();
  const float* inputs[] = {x.data()};
  float* null_output[] = {nullptr};
  CHECK(qflow_rt_run_quantized(h.model, reinterpret_cast<const void* const*>(inputs), null_output) == QFLOW_RT_ERROR_NULL_POINTER);
  CHECK(std::string(qflow_rt_last_error()) == "qflow_rt: output buffer 0 is NULL");
  CHECK(qflow_rt_input_count(nullptr) == 0);
  CHECK(std::string(qflow_rt_platform(nullptr)).empty());
  qflow_rt_free(nullptr);
  // A success clears the message.
  CHECK(qflow_rt_run(h.model, inputs, outputs) == QFLOW_RT_OK);
  CHECK(std::string(qflow_rt_last_error()).empty());
}

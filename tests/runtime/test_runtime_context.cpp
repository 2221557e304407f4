// Tests of the runtime C API's contexts, raw outputs and status codes (qflow/runtime.h) on the
// hand-built sample model: every code a caller can provoke, with its message.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "qflow/runtime.h"
#include "qflow/runtime/executor.h"
#include "qflow/runtime/hbm_codec.h"
#include "tests/runtime/lowered_sample.h"

using namespace qflow;
using qflow::lowered::testing::sample_model;
using qflow::lowered::testing::sample_model_with_absent_output;

namespace {

std::vector<uint8_t> bytes_of(const lowered::Model& m) {
  Expected<std::vector<uint8_t>> bytes = lowered::encode_hbm(m, "qflow test");
  REQUIRE_MESSAGE(bytes.has_value(), bytes.message());
  return *bytes;
}

std::vector<float> sample_input() {
  std::vector<float> x;
  for (int i = 0; i < 16; ++i) x.push_back(static_cast<float>((i * 37) % 200 - 100) / 32.0f);
  return x;
}

qflow_rt_model* load(const lowered::Model& m) {
  const std::vector<uint8_t> bytes = bytes_of(m);
  qflow_rt_model* model = nullptr;
  REQUIRE_MESSAGE(qflow_rt_load_memory(bytes.data(), bytes.size(), &model) == QFLOW_RT_OK, qflow_rt_last_error());
  return model;
}

std::string last() { return qflow_rt_last_error(); }

}  // namespace

TEST_CASE("context: runs like qflow_rt_run, gives raw outputs, outlives its model handle") {
  qflow_rt_model* model = load(sample_model());
  const std::vector<float> x = sample_input();
  std::vector<float> expected(32);
  const float* ins[] = {x.data()};
  float* outs[] = {expected.data()};
  REQUIRE(qflow_rt_run(model, ins, outs) == QFLOW_RT_OK);

  qflow_rt_context* ctx = nullptr;
  REQUIRE(qflow_rt_context_create(model, &ctx) == QFLOW_RT_OK);
  qflow_rt_free(model);  // the context keeps the model alive
  REQUIRE_MESSAGE(qflow_rt_context_set_input(ctx, 0, QFLOW_RT_FLOAT32, x.data(), x.size() * sizeof(float)) ==
                      QFLOW_RT_OK,
                  last());
  REQUIRE_MESSAGE(qflow_rt_context_run(ctx) == QFLOW_RT_OK, last());
  std::vector<float> y(32, -1.0f);
  REQUIRE(qflow_rt_context_get_output(ctx, 0, QFLOW_RT_FLOAT32, y.data(), y.size() * sizeof(float)) == QFLOW_RT_OK);
  CHECK(std::memcmp(y.data(), expected.data(), y.size() * sizeof(float)) == 0);

  // Raw: the int8 y_q with scale 0.1 and zero point 3; dequantized it gives y bit for bit.
  std::vector<int8_t> raw(32);
  REQUIRE_MESSAGE(qflow_rt_context_get_output(ctx, 0, QFLOW_RT_INT8, raw.data(), raw.size()) == QFLOW_RT_OK, last());
  for (size_t i = 0; i < raw.size(); ++i)
    CHECK(static_cast<float>(0.1 * (raw[i] - 3)) == y[i]);

  // The input given quantized (x * 32 exactly) gives the same results.
  std::vector<int8_t> xq;
  for (float v : x) xq.push_back(static_cast<int8_t>(v * 32.0f));
  REQUIRE(qflow_rt_context_set_input(ctx, 0, QFLOW_RT_INT8, xq.data(), xq.size()) == QFLOW_RT_OK);
  REQUIRE(qflow_rt_context_run(ctx) == QFLOW_RT_OK);
  std::vector<float> yq(32);
  REQUIRE(qflow_rt_context_get_output(ctx, 0, QFLOW_RT_FLOAT32, yq.data(), yq.size() * sizeof(float)) == QFLOW_RT_OK);
  CHECK(std::memcmp(yq.data(), expected.data(), y.size() * sizeof(float)) == 0);
  qflow_rt_context_free(ctx);
}

TEST_CASE("context: an output computed in float has no raw form") {
  qflow_rt_model* model = load(sample_model_with_absent_output());
  REQUIRE(qflow_rt_output_count(model) == 2);
  qflow_rt_tensor_info info{};
  REQUIRE(qflow_rt_output_info(model, 1, &info) == QFLOW_RT_OK);
  CHECK(info.quantized_dtype == QFLOW_RT_FLOAT32);
  CHECK(info.scale == 1.0f);
  qflow_rt_context* ctx = nullptr;
  REQUIRE(qflow_rt_context_create(model, &ctx) == QFLOW_RT_OK);
  const std::vector<float> x = sample_input();
  REQUIRE(qflow_rt_context_set_input(ctx, 0, QFLOW_RT_FLOAT32, x.data(), 64) == QFLOW_RT_OK);
  REQUIRE(qflow_rt_context_run(ctx) == QFLOW_RT_OK);
  std::vector<int8_t> raw(18);
  CHECK(qflow_rt_context_get_output(ctx, 1, QFLOW_RT_INT8, raw.data(), raw.size()) == QFLOW_RT_ERROR_WRONG_DTYPE);
  CHECK(last() == "qflow_rt: output 1 'pooled' gives FLOAT32 only (it is computed in float), not INT8");
  std::vector<float> pooled(18);
  CHECK(qflow_rt_context_get_output(ctx, 1, QFLOW_RT_FLOAT32, pooled.data(), 72) == QFLOW_RT_OK);
  qflow_rt_context_free(ctx);
  qflow_rt_free(model);
}

TEST_CASE("context: contexts of one model run in parallel and agree with one thread") {
  qflow_rt_model* model = load(sample_model());
  const std::vector<float> x = sample_input();
  std::vector<float> expected(32);
  const float* ins[] = {x.data()};
  float* outs[] = {expected.data()};
  REQUIRE(qflow_rt_run(model, ins, outs) == QFLOW_RT_OK);
  std::atomic<int> mismatches{0}, failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      qflow_rt_context* ctx = nullptr;
      if (qflow_rt_context_create(model, &ctx) != QFLOW_RT_OK) {
        ++failures;
        return;
      }
      std::vector<float> y(32);
      for (int i = 0; i < 200; ++i) {
        if (qflow_rt_context_set_input(ctx, 0, QFLOW_RT_FLOAT32, x.data(), 64) != QFLOW_RT_OK ||
            qflow_rt_context_run(ctx) != QFLOW_RT_OK ||
            qflow_rt_context_get_output(ctx, 0, QFLOW_RT_FLOAT32, y.data(), 128) != QFLOW_RT_OK)
          ++failures;
        else if (std::memcmp(y.data(), expected.data(), 128) != 0)
          ++mismatches;
      }
      qflow_rt_context_free(ctx);
    });
  for (std::thread& t : threads) t.join();
  CHECK(failures == 0);
  CHECK(mismatches == 0);
  qflow_rt_free(model);
}

TEST_CASE("status codes: every one a caller can provoke, with its message") {
  for (int code = 0; code <= QFLOW_RT_ERROR_INTERNAL; ++code)
    CHECK(std::string(qflow_rt_status_string(code)) != "unknown status");
  CHECK(std::string(qflow_rt_status_string(QFLOW_RT_OK)) == "ok");
  CHECK(std::string(qflow_rt_status_string(QFLOW_RT_ERROR_OUT_OF_MEMORY)) == "out of memory");
  CHECK(std::string(qflow_rt_status_string(QFLOW_RT_ERROR_INTERNAL)) == "internal error");
  CHECK(std::string(qflow_rt_status_string(99)) == "unknown status");
  CHECK(qflow_rt_dtype_size(QFLOW_RT_INT16) == 2);
  CHECK(qflow_rt_dtype_size(static_cast<qflow_rt_dtype>(0)) == 0);

  // IO, BAD_FORMAT, UNSUPPORTED_VERSION
  qflow_rt_model* m = nullptr;
  CHECK(qflow_rt_load_file("/no/such/dir/x.hbm", &m) == QFLOW_RT_ERROR_IO);
  std::vector<uint8_t> bytes = bytes_of(sample_model());
  std::vector<uint8_t> bad = bytes;
  bad[bad.size() / 2] ^= 1;  // a checksum (or, in padding, the layout check) fails
  CHECK(qflow_rt_load_memory(bad.data(), bad.size(), &m) == QFLOW_RT_ERROR_BAD_FORMAT);
  CHECK(last().rfind("hbm: ", 0) == 0);
  bad = bytes;
  bad[8] = 9;  // format major version 9
  CHECK(qflow_rt_load_memory(bad.data(), bad.size(), &m) == QFLOW_RT_ERROR_UNSUPPORTED_VERSION);
  CHECK(last().find("format version 9.") != std::string::npos);
  bad.resize(20);
  bad[8] = 1;
  CHECK(qflow_rt_load_memory(bad.data(), bad.size(), &m) == QFLOW_RT_ERROR_BAD_FORMAT);
  CHECK(m == nullptr);

  REQUIRE(qflow_rt_load_memory(bytes.data(), bytes.size(), &m) == QFLOW_RT_OK);
  qflow_rt_context* ctx = nullptr;
  // NULL_POINTER
  CHECK(qflow_rt_context_create(m, nullptr) == QFLOW_RT_ERROR_NULL_POINTER);
  CHECK(qflow_rt_context_create(nullptr, &ctx) == QFLOW_RT_ERROR_NULL_POINTER);
  CHECK(last() == "qflow_rt: model is NULL");
  CHECK(qflow_rt_context_run(nullptr) == QFLOW_RT_ERROR_NULL_POINTER);
  CHECK(last() == "qflow_rt: context is NULL");
  REQUIRE(qflow_rt_context_create(m, &ctx) == QFLOW_RT_OK);
  CHECK(qflow_rt_context_set_input(ctx, 0, QFLOW_RT_FLOAT32, nullptr, 64) == QFLOW_RT_ERROR_NULL_POINTER);
  // NOT_READY: no input set, no result yet
  CHECK(qflow_rt_context_run(ctx) == QFLOW_RT_ERROR_NOT_READY);
  CHECK(last() == "qflow_rt: input 0 'x' was not set (qflow_rt_context_set_input)");
  std::vector<float> y(32);
  CHECK(qflow_rt_context_get_output(ctx, 0, QFLOW_RT_FLOAT32, y.data(), 128) == QFLOW_RT_ERROR_NOT_READY);
  // INVALID_ARGUMENT: indices, dtype values
  const std::vector<float> x = sample_input();
  CHECK(qflow_rt_context_set_input(ctx, 1, QFLOW_RT_FLOAT32, x.data(), 64) == QFLOW_RT_ERROR_INVALID_ARGUMENT);
  CHECK(last() == "qflow_rt: input index 1 is out of range (the model has 1 inputs)");
  CHECK(qflow_rt_context_set_input(ctx, 0, static_cast<qflow_rt_dtype>(42), x.data(), 64) ==
        QFLOW_RT_ERROR_INVALID_ARGUMENT);
  CHECK(qflow_rt_context_get_output(ctx, 3, QFLOW_RT_FLOAT32, y.data(), 128) == QFLOW_RT_ERROR_INVALID_ARGUMENT);
  // WRONG_DTYPE
  std::vector<uint16_t> wide(16);
  CHECK(qflow_rt_context_set_input(ctx, 0, QFLOW_RT_UINT16, wide.data(), 32) == QFLOW_RT_ERROR_WRONG_DTYPE);
  CHECK(last() == "qflow_rt: input 0 'x' takes FLOAT32 or INT8, not UINT16");
  // SHAPE_MISMATCH
  CHECK(qflow_rt_context_set_input(ctx, 0, QFLOW_RT_FLOAT32, x.data(), 60) == QFLOW_RT_ERROR_SHAPE_MISMATCH);
  CHECK(last() == "qflow_rt: input 0 'x' takes 64 bytes (16 FLOAT32), got 60");
  REQUIRE(qflow_rt_context_set_input(ctx, 0, QFLOW_RT_FLOAT32, x.data(), 64) == QFLOW_RT_OK);
  REQUIRE(qflow_rt_context_run(ctx) == QFLOW_RT_OK);
  CHECK(last().empty());
  CHECK(qflow_rt_context_get_output(ctx, 0, QFLOW_RT_INT8, y.data(), 128) == QFLOW_RT_ERROR_SHAPE_MISMATCH);
  CHECK(qflow_rt_context_get_output(ctx, 0, QFLOW_RT_INT16, y.data(), 64) == QFLOW_RT_ERROR_WRONG_DTYPE);
  CHECK(last() == "qflow_rt: output 0 'y' gives FLOAT32 or its raw INT8, not INT16");

  // BUSY: another thread inside the same context. Runs of the tiny model are short, so the
  // second thread tries until it lands inside one (bounded by a deadline).
  {
    std::atomic<bool> stop{false};
    std::thread runner([&] {
      while (!stop) (void)qflow_rt_context_run(ctx);
    });
    bool seen = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!seen && std::chrono::steady_clock::now() < deadline)
      seen = qflow_rt_context_set_input(ctx, 0, QFLOW_RT_FLOAT32, x.data(), 64) == QFLOW_RT_ERROR_BUSY;
    stop = true;
    runner.join();
    CHECK(seen);
    if (seen) CHECK(last() == "qflow_rt: the context is in use by another thread (one context per thread)");
  }

  // INVALID_HANDLE: freed handles are recognized, never dereferenced.
  qflow_rt_context_free(ctx);
  CHECK(qflow_rt_context_run(ctx) == QFLOW_RT_ERROR_INVALID_HANDLE);
  CHECK(last() == "qflow_rt: context is not a live context handle (freed already, or never created)");
  qflow_rt_context_free(ctx);  // twice: ignored, reported
  CHECK(last() == "qflow_rt: qflow_rt_context_free: not a live context handle (freed twice?)");
  qflow_rt_free(m);
  qflow_rt_tensor_info info{};
  CHECK(qflow_rt_input_info(m, 0, &info) == QFLOW_RT_ERROR_INVALID_HANDLE);
  CHECK(qflow_rt_input_count(m) == 0);
  CHECK(qflow_rt_context_create(m, &ctx) == QFLOW_RT_ERROR_INVALID_HANDLE);
  CHECK(ctx == nullptr);
  const float* ins[] = {x.data()};
  float* outs[] = {y.data()};
  CHECK(qflow_rt_run(m, ins, outs) == QFLOW_RT_ERROR_INVALID_HANDLE);
  // A context passed as a model is not a live model.
  qflow_rt_model* other = load(sample_model());
  REQUIRE(qflow_rt_context_create(other, &ctx) == QFLOW_RT_OK);
  CHECK(qflow_rt_input_count(reinterpret_cast<const qflow_rt_model*>(ctx)) == 0);
  qflow_rt_context_free(ctx);
  qflow_rt_free(other);
}

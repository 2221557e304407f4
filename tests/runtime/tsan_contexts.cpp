// One model, many threads, under ThreadSanitizer (the runtime's sources compiled with
// -fsanitize=thread into this program; runtime/CMakeLists.txt). Each model (the hand-built
// sample, then every .hbm named on the command line) is run once on one thread for reference;
// then THREADS threads, each on its own qflow_rt_context, run it RUNS times, and two more
// threads use the one-call qflow_rt_run on the shared model handle. Every float and raw output
// must equal the reference bit for bit, and TSan must report no race (TSAN_OPTIONS
// halt_on_error=1 turns a report into a failure).
//   qflow_runtime_tsan [--threads N] [--runs R] [MODEL.hbm ...]
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "qflow/runtime.h"
#include "qflow/runtime/hbm_codec.h"
#include "tests/runtime/lowered_sample.h"

namespace {

struct Results {
  std::vector<std::vector<float>> floats;
  std::vector<std::vector<uint8_t>> raw;  // bytes of the raw form, empty without one
};

struct Io {
  std::vector<qflow_rt_tensor_info> in, out;
  std::vector<std::vector<float>> inputs;
};

Io describe(const qflow_rt_model* model) {
  Io io;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (size_t i = 0; i < qflow_rt_input_count(model); ++i) {
    qflow_rt_tensor_info info{};
    qflow_rt_input_info(model, i, &info);
    io.in.push_back(info);
    std::vector<float> x(info.element_count);
    for (float& v : x) v = dist(rng);
    io.inputs.push_back(std::move(x));
  }
  for (size_t o = 0; o < qflow_rt_output_count(model); ++o) {
    qflow_rt_tensor_info info{};
    qflow_rt_output_info(model, o, &info);
    io.out.push_back(info);
  }
  return io;
}

bool run_context(qflow_rt_context* ctx, const Io& io, Results& r) {
  for (size_t i = 0; i < io.in.size(); ++i)
    if (qflow_rt_context_set_input(ctx, i, QFLOW_RT_FLOAT32, io.inputs[i].data(), io.inputs[i].size() * 4) != QFLOW_RT_OK)
      return false;
  if (qflow_rt_context_run(ctx) != QFLOW_RT_OK) return false;
  r.floats.resize(io.out.size());
  r.raw.resize(io.out.size());
  for (size_t o = 0; o < io.out.size(); ++o) {
    r.floats[o].resize(io.out[o].element_count);
    if (qflow_rt_context_get_output(ctx, o, QFLOW_RT_FLOAT32, r.floats[o].data(), r.floats[o].size() * 4) != QFLOW_RT_OK)
      return false;
    if (io.out[o].quantized_dtype == QFLOW_RT_FLOAT32) continue;
    r.raw[o].resize(io.out[o].element_count * qflow_rt_dtype_size(io.out[o].quantized_dtype));
    if (qflow_rt_context_get_output(ctx, o, io.out[o].quantized_dtype, r.raw[o].data(), r.raw[o].size()) != QFLOW_RT_OK)
      return false;
  }
  return true;
}

bool same(const Results& a, const Results& b) {
  if (a.floats.size() != b.floats.size()) return false;
  for (size_t o = 0; o < a.floats.size(); ++o)
    if (a.floats[o].size() != b.floats[o].size() ||
        std::memcmp(a.floats[o].data(), b.floats[o].data(), a.floats[o].size() * sizeof(float)) != 0 ||
        a.raw[o] != b.raw[o])
      return false;
  return true;
}

// 0 when every thread matched the reference.
int check(const char* label, qflow_rt_model* model, int threads, int runs) {
  const Io io = describe(model);
  qflow_rt_context* ctx = nullptr;
  Results reference;
  if (qflow_rt_context_create(model, &ctx) != QFLOW_RT_OK || !run_context(ctx, io, reference)) {
    std::fprintf(stderr, "%s: reference run failed: %s\n", label, qflow_rt_last_error());
    return 1;
  }
  qflow_rt_context_free(ctx);
  std::atomic<int> failures{0}, mismatches{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      qflow_rt_context* own = nullptr;
      if (qflow_rt_context_create(model, &own) != QFLOW_RT_OK) {
        ++failures;
        return;
      }
      Results r;
      for (int k = 0; k < runs; ++k) {
        if (!run_context(own, io, r)) ++failures;
        else if (!same(r, reference)) ++mismatches;
      }
      qflow_rt_context_free(own);
    });
  for (int t = 0; t < 2; ++t)  // the one-call API on the shared handle, at the same time
    pool.emplace_back([&] {
      std::vector<const float*> ins;
      for (const std::vector<float>& x : io.inputs) ins.push_back(x.data());
      std::vector<std::vector<float>> outs(io.out.size());
      std::vector<float*> targets;
      for (size_t o = 0; o < io.out.size(); ++o) {
        outs[o].resize(io.out[o].element_count);
        targets.push_back(outs[o].data());
      }
      for (int k = 0; k < runs; ++k) {
        if (qflow_rt_run(model, ins.data(), targets.data()) != QFLOW_RT_OK) {
          ++failures;
          continue;
        }
        for (size_t o = 0; o < outs.size(); ++o)
          if (std::memcmp(outs[o].data(), reference.floats[o].data(), outs[o].size() * sizeof(float)) != 0) ++mismatches;
      }
    });
  for (std::thread& t : pool) t.join();
  std::printf("%s: %d context threads + 2 qflow_rt_run threads x %d runs: %d failures, %d differ from one thread\n",
              label, threads, runs, failures.load(), mismatches.load());
  return failures || mismatches ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 4, runs = 20;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (a == "--runs" && i + 1 < argc) runs = std::atoi(argv[++i]);
    else files.push_back(a);
  }
  int status = 0;
  {
    qflow::Expected<std::vector<uint8_t>> bytes =
        qflow::lowered::encode_hbm(qflow::lowered::testing::sample_model(), "qflow tsan test");
    qflow_rt_model* model = nullptr;
    if (!bytes || qflow_rt_load_memory(bytes->data(), bytes->size(), &model) != QFLOW_RT_OK) {
      std::fprintf(stderr, "sample model: %s\n", qflow_rt_last_error());
      return 1;
    }
    status |= check("sample", model, threads, runs * 10);
    qflow_rt_free(model);
  }
  for (const std::string& f : files) {
    qflow_rt_model* model = nullptr;
    if (qflow_rt_load_file(f.c_str(), &model) != QFLOW_RT_OK) {
      std::fprintf(stderr, "%s: %s\n", f.c_str(), qflow_rt_last_error());
      return 1;
    }
    status |= check(f.c_str(), model, threads, runs);
    qflow_rt_free(model);
  }
  return status;
}

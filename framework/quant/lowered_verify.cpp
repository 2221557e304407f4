// verify: one pass over the samples, each run by the PTQ model, the .bc simulator and the .hbm runtime.
#include "framework/quant/lowered_verify.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "framework/core/json_writer.h"
#include "framework/core/thread_pool.h"
#include "framework/data/input_feeds.h"
#include "framework/quant/output_cosine.h"
#include "framework/runtime/executor.h"
#include "qflow/runtime.h"
#include "runtime/lowered/executor.h"

namespace qflow {

namespace {

struct RtModelDeleter {
  void operator()(qflow_rt_model* model) const { qflow_rt_free(model); }
};
using RtModel = std::unique_ptr<qflow_rt_model, RtModelDeleter>;

// The three results of one sample, each output flattened.
struct SampleOutputs {
  std::vector<std::vector<float>> ptq, bc, hbm;
};

double max_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0.0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  return worst;
}

std::vector<float> sample_floats(const Tensor& sample) {
  if (sample.dtype() == DType::Float32) return {sample.data<float>(), sample.data<float>() + sample.numel()};
  std::vector<float> out;
  for (double v : sample.to_doubles()) out.push_back(static_cast<float>(v));
  return out;
}

}  // namespace

bool LoweredVerification::bit_identical() const {
  return std::all_of(outputs.begin(), outputs.end(),
                     [](const LoweredOutputCheck& o) { return o.exact_matches == o.compared; });
}

Expected<LoweredVerification> verify_lowered(const Model& ptq_model, const lowered::Model& bc_model,
                                             std::span<const uint8_t> hbm_bytes, const Dataset& dataset, int threads,
                                             int64_t limit) {
  Expected<InputBinding> binding = bind_inputs(*ptq_model.graph, dataset);
  if (!binding) return binding.status().with_context("verify");
  // The lowered program's inputs in its own order, by name.
  std::vector<std::string> bc_inputs;
  for (int32_t index : bc_model.inputs) {
    const std::string& name = bc_model.tensors[static_cast<size_t>(index)].name;
    if (std::none_of(binding->begin(), binding->end(), [&](const InputFeed& f) { return f.input == name; }))
      return invalid_input("verify: the .bc reads input '" + name + "', which the PTQ model does not have");
    bc_inputs.push_back(name);
  }
  const auto& outputs = ptq_model.graph->outputs;
  if (outputs.size() != bc_model.outputs.size())
    return invalid_input("verify: the PTQ model has " + std::to_string(outputs.size()) + " outputs, the .bc has " +
                         std::to_string(bc_model.outputs.size()));

  QFLOW_ASSIGN_OR_RETURN(std::unique_ptr<Executor> ptq, Executor::create(ptq_model));
  auto bc = lowered::Executor::create(bc_model);
  if (!bc) return invalid_input("verify: .bc: " + bc.message());
  threads = std::max(1, threads);
  std::vector<RtModel> hbm;
  for (int i = 0; i < threads; ++i) {
    qflow_rt_model* handle = nullptr;
    if (qflow_rt_load_memory(hbm_bytes.data(), hbm_bytes.size(), &handle) != QFLOW_RT_OK)
      return invalid_input(std::string("verify: .hbm: ") + qflow_rt_last_error());
    hbm.emplace_back(handle);
  }
  const size_t output_count = outputs.size();
  std::vector<size_t> hbm_sizes(output_count);
  for (size_t o = 0; o < output_count; ++o) {
    qflow_rt_tensor_info info{};
    if (qflow_rt_output_info(hbm[0].get(), o, &info) != QFLOW_RT_OK)
      return invalid_input(std::string("verify: .hbm: ") + qflow_rt_last_error());
    hbm_sizes[o] = info.element_count;
  }

  LoweredVerification result;
  for (size_t o = 0; o < output_count; ++o) {
    LoweredOutputCheck check;
    check.name = outputs[o]->name();
    check.bc_cosine_min = check.hbm_cosine_min = 1.0;
    result.outputs.push_back(check);
  }
  std::vector<double> bc_cosine_sum(output_count, 0.0), hbm_cosine_sum(output_count, 0.0);

  auto run_one = [&](const Feeds& sample, qflow_rt_model* handle) -> Expected<SampleOutputs> {
    SampleOutputs out;
    QFLOW_ASSIGN_OR_RETURN(auto ptq_out, ptq->run(sample));
    for (const Value* value : outputs) {
      const Tensor& t = ptq_out.at(value->name());
      std::vector<float> flat;
      for (double v : t.to_doubles()) flat.push_back(static_cast<float>(v));
      out.ptq.push_back(std::move(flat));
    }
    std::vector<std::vector<float>> x;
    std::vector<std::span<const float>> spans;
    std::vector<const float*> feeds;
    for (const std::string& name : bc_inputs) x.push_back(sample_floats(sample.at(name)));
    for (const std::vector<float>& v : x) {
      spans.emplace_back(v);
      feeds.push_back(v.data());
    }
    lowered::Status bc_status = bc->run(spans, out.bc);
    if (!bc_status) return invalid_input(".bc simulator: " + bc_status.message());
    out.hbm.resize(output_count);
    std::vector<float*> targets;
    for (size_t o = 0; o < output_count; ++o) {
      out.hbm[o].resize(hbm_sizes[o]);
      targets.push_back(out.hbm[o].data());
    }
    if (qflow_rt_run(handle, feeds.data(), targets.data()) != QFLOW_RT_OK)
      return invalid_input(std::string(".hbm runtime: ") + qflow_rt_last_error());
    return out;
  };

  ThreadPool pool(threads);
  std::vector<std::pair<int64_t, Feeds>> batch;
  auto flush = [&]() -> Status {
    std::vector<Expected<SampleOutputs>> done(batch.size(), internal_error("sample not run"));
    pool.parallel_for(static_cast<int64_t>(batch.size()), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        done[static_cast<size_t>(i)] = run_one(batch[static_cast<size_t>(i)].second, hbm[static_cast<size_t>(i)].get());
    });
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!done[i]) return done[i].status().with_context("verify: " + sample_location(dataset, batch[i].first));
      const SampleOutputs& s = *done[i];
      for (size_t o = 0; o < output_count; ++o) {
        LoweredOutputCheck& check = result.outputs[o];
        if (s.ptq[o].size() != s.bc[o].size() || s.bc[o].size() != s.hbm[o].size())
          return invalid_input("verify: output '" + check.name + "' has " + std::to_string(s.ptq[o].size()) +
                               " elements in the PTQ model, " + std::to_string(s.bc[o].size()) + " in the .bc and " +
                               std::to_string(s.hbm[o].size()) + " in the .hbm");
        check.elements = static_cast<int64_t>(s.ptq[o].size());
        const double bc_cos = cosine_similarity(s.ptq[o], s.bc[o]);
        const double hbm_cos = cosine_similarity(s.ptq[o], s.hbm[o]);
        bc_cosine_sum[o] += bc_cos;
        hbm_cosine_sum[o] += hbm_cos;
        check.bc_cosine_min = std::min(check.bc_cosine_min, bc_cos);
        check.hbm_cosine_min = std::min(check.hbm_cosine_min, hbm_cos);
        check.bc_max_abs_error = std::max(check.bc_max_abs_error, max_abs_difference(s.ptq[o], s.bc[o]));
        check.hbm_max_abs_error = std::max(check.hbm_max_abs_error, max_abs_difference(s.ptq[o], s.hbm[o]));
        for (size_t k = 0; k < s.bc[o].size(); ++k) {
          // Bitwise: NaN == NaN and -0 != +0 here, as a device comparison would see them.
          uint32_t a = 0, b = 0;
          std::memcpy(&a, &s.bc[o][k], 4);
          std::memcpy(&b, &s.hbm[o][k], 4);
          check.exact_matches += a == b ? 1 : 0;
        }
        check.compared += static_cast<int64_t>(s.bc[o].size());
      }
      ++result.samples;
    }
    batch.clear();
    return Status::ok();
  };
  const int64_t end = limit > 0 ? std::min(limit, dataset.count) : dataset.count;
  QFLOW_RETURN_IF_ERROR(for_each_feed_in(dataset, *binding, 0, end, [&](int64_t index, const Feeds& sample) -> Status {
    batch.emplace_back(index, sample);
    return batch.size() >= static_cast<size_t>(threads) ? flush() : Status::ok();
  }));
  QFLOW_RETURN_IF_ERROR(flush());
  if (result.samples == 0) return invalid_input("verify: the dataset has no samples");
  for (size_t o = 0; o < output_count; ++o) {
    result.outputs[o].bc_cosine_mean = bc_cosine_sum[o] / static_cast<double>(result.samples);
    result.outputs[o].hbm_cosine_mean = hbm_cosine_sum[o] / static_cast<double>(result.samples);
  }
  return result;
}

std::string verification_text(const LoweredVerification& result) {
  std::string text = "samples: " + std::to_string(result.samples) + "\n";
  text += "output                           cos(bc,ptq) mean / min   max|bc-ptq|   cos(hbm,ptq) mean / min  "
          "max|hbm-ptq|  hbm == bc\n";
  for (const LoweredOutputCheck& o : result.outputs) {
    char line[512];
    const double rate = o.compared ? 100.0 * static_cast<double>(o.exact_matches) / static_cast<double>(o.compared) : 0;
    std::snprintf(line, sizeof line, "%-32s %.6f / %.6f    %-12.6g  %.6f / %.6f     %-12.6g  %.4f%% (%lld/%lld)\n",
                  o.name.c_str(), o.bc_cosine_mean, o.bc_cosine_min, o.bc_max_abs_error, o.hbm_cosine_mean,
                  o.hbm_cosine_min, o.hbm_max_abs_error, rate, static_cast<long long>(o.exact_matches),
                  static_cast<long long>(o.compared));
    text += line;
  }
  text += result.bit_identical() ? "the .hbm runtime is bit-identical to the .bc simulator on every sample\n"
                                 : "the .hbm runtime DIFFERS from the .bc simulator\n";
  return text;
}

Expected<std::string> verification_json(const LoweredVerification& result) {
  JsonWriter json;
  json.begin_object();
  json.field("samples", result.samples);
  json.field("bit_identical", result.bit_identical());
  json.key("outputs").begin_array();
  for (const LoweredOutputCheck& o : result.outputs) {
    json.begin_object();
    json.field("name", o.name);
    json.field("elements", o.elements);
    json.field("bc_cosine_mean", o.bc_cosine_mean);
    json.field("bc_cosine_min", o.bc_cosine_min);
    json.field("bc_max_abs_error", o.bc_max_abs_error);
    json.field("hbm_cosine_mean", o.hbm_cosine_mean);
    json.field("hbm_cosine_min", o.hbm_cosine_min);
    json.field("hbm_max_abs_error", o.hbm_max_abs_error);
    json.field("exact_matches", o.exact_matches);
    json.field("compared", o.compared);
    json.end_object();
  }
  json.end_array();
  json.end_object();
  return json.finish();
}

}  // namespace qflow

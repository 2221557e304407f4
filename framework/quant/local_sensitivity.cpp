// Local sensitivity: a hook on the float run quantizes each probe's outputs as they appear and
// reruns each weight probe's node alone with its quantized weight on the inputs it just read.
#include "framework/quant/local_sensitivity.h"

#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>

#include "framework/quant/layer_compare.h"
#include "framework/interpreter/executor.h"
#include "qflow/interpreter.h"
#include "qflow/quant/quant_math.h"

namespace qflow {

namespace {

// x quantized with `p` and dequantized (QuantizeLinear then DequantizeLinear, then the Clip
// of a narrowed grid; per tensor or per channel along p.axis).
std::vector<float> fake_quantized(const Tensor& t, const QuantParams& p) {
  const QuantRange range = grid_range(p);  // the narrowed grid's Clip included
  const float* x = t.data<float>();
  int64_t inner = 1, channels = 1;
  if (p.scale.size() > 1 && p.axis >= 0 && p.axis < t.rank()) {
    channels = t.dim(p.axis);
    for (int64_t a = p.axis + 1; a < t.rank(); ++a) inner *= t.dim(a);
  }
  std::vector<float> out(static_cast<std::size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) {
    const auto c = static_cast<std::size_t>(channels > 1 ? (i / inner) % channels : 0);
    const double s = p.scale[c];
    const auto zp = static_cast<double>(p.zero_point[c]);
    const double q = std::clamp(round_half_even(static_cast<double>(x[i]) / s) + zp, static_cast<double>(range.min),
                                static_cast<double>(range.max));
    out[static_cast<std::size_t>(i)] = static_cast<float>((q - zp) * s);
  }
  return out;
}

}  // namespace

Expected<std::vector<LocalCosines>> local_cosines(const Executor& float_exec, const std::vector<LocalProbe>& probes,
                                                  const std::vector<Feeds>& samples, ThreadPool& pool,
                                                  ProgressBar* progress) {
  const Model& model = float_exec.model();
  const Graph& graph = *model.graph;
  // Which probes each value concerns: as a probe's output (activations, weight probe result)
  // and as an input a weight probe's node reads.
  std::unordered_map<std::string, std::vector<std::size_t>> output_of, read_by;
  for (std::size_t p = 0; p < probes.size(); ++p) {
    const Node& node = *probes[p].node;
    for (const Value* out : node.outputs())
      if (out) output_of[out->name()].push_back(p);
    if (probes[p].weight)
      for (const Value* in : node.inputs())
        if (in && !graph.is_initializer(in)) read_by[in->name()].push_back(p);
  }

  struct SampleResult {
    std::vector<ErrorSums> weight, activation;
    std::vector<bool> weight_measured;
    Status status = Status::ok();
  };
  std::vector<SampleResult> results(samples.size());
  pool.parallel_for(static_cast<int64_t>(samples.size()), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      SampleResult& r = results[static_cast<std::size_t>(i)];
      const Feeds& sample = samples[static_cast<std::size_t>(i)];
      r.weight.assign(probes.size(), ErrorSums{});
      r.activation.assign(probes.size(), ErrorSums{});
      r.weight_measured.assign(probes.size(), false);
      // Inputs of weight probes seen so far, kept until their last probe ran.
      std::unordered_map<std::string, std::pair<Tensor, std::size_t>> kept;
      auto keep_input = [&](const std::string& name, const Tensor& t) {
        if (auto it = read_by.find(name); it != read_by.end()) kept[name] = {t, it->second.size()};
      };
      for (const auto& [name, t] : sample) keep_input(name, t);
      auto result = float_exec.run(sample, [&](const Value& value, const Tensor& t) -> Status {
        if (auto it = output_of.find(value.name()); it != output_of.end() && t.dtype() == DType::Float32) {
          for (std::size_t p : it->second) {
            const LocalProbe& probe = probes[p];
            if (auto q = probe.activations.find(value.name()); q != probe.activations.end())
              r.activation[p].add(t.data<float>(), fake_quantized(t, q->second).data(), t.numel());
            if (!probe.weight || probe.node->output(0) != &value) continue;
            std::vector<const Tensor*> inputs;
            bool complete = true;
            for (std::size_t k = 0; k < probe.node->inputs().size(); ++k) {
              const Value* in = probe.node->input(k);
              if (!in) inputs.push_back(nullptr);
              else if (k == 1) inputs.push_back(&*probe.weight);
              else if (const Tensor* c = graph.initializer(in)) inputs.push_back(c);
              else if (auto found = kept.find(in->name()); found != kept.end()) inputs.push_back(&found->second.first);
              else complete = false;
            }
            if (complete) {
              QFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> twin, evaluate_node(*probe.node, inputs, model.opset(probe.node->domain())));
              if (!twin.empty() && twin[0].dtype() == DType::Float32 && twin[0].numel() == t.numel()) {
                r.weight[p].add(t.data<float>(), twin[0].data<float>(), t.numel());
                r.weight_measured[p] = true;
              }
            }
            for (const Value* in : probe.node->inputs())
              if (auto found = in ? kept.find(in->name()) : kept.end(); found != kept.end() && --found->second.second == 0)
                kept.erase(found);
          }
        }
        keep_input(value.name(), t);
        return Status::ok();
      });
      if (!result) r.status = result.status();
      if (progress) progress->advance(1);
    }
  });
  std::vector<LocalCosines> out(probes.size());
  std::vector<double> weight_sum(probes.size(), 0.0), activation_sum(probes.size(), 0.0);
  std::vector<int64_t> weight_count(probes.size(), 0);
  for (std::size_t s = 0; s < results.size(); ++s) {
    if (!results[s].status.is_ok()) return results[s].status.with_context("local sensitivity: sample " + std::to_string(s));
    for (std::size_t p = 0; p < probes.size(); ++p) {
      activation_sum[p] += error_metrics(results[s].activation[p]).cosine;
      if (results[s].weight_measured[p]) {
        weight_sum[p] += error_metrics(results[s].weight[p]).cosine;
        ++weight_count[p];
      }
    }
  }
  const auto n = static_cast<double>(std::max<std::size_t>(1, samples.size()));
  for (std::size_t p = 0; p < probes.size(); ++p) {
    out[p].activation = activation_sum[p] / n;
    if (weight_count[p] > 0) out[p].weight = weight_sum[p] / static_cast<double>(weight_count[p]);
  }
  return out;
}

}  // namespace qflow

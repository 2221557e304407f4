// Empirical bias correction: duplicate nodes with fake-quantized weights beside the originals.
#include "framework/quant/bias_correction.h"

#include "framework/data/input_feeds.h"
#include "framework/quant/qdq_builder.h"
#include "framework/interpreter/executor.h"

namespace qflow {

namespace {

struct Probe {
  std::string node;
  std::string float_output;
  std::string quant_output;
  int64_t channels = 0;
};

}  // namespace

Expected<std::map<std::string, std::vector<double>>> measure_bias_shift(const Model& float_model,
                                                                         const QuantConfig* config,
                                                                         const Dataset& dataset) {
  const QuantConfig defaults;
  const QuantConfig& cfg = config ? *config : defaults;
  // A private copy the probes are added to.
  Model model = float_model.copy();
  Graph& graph = *model.graph;
  QFLOW_ASSIGN_OR_RETURN(std::vector<Node*> order, graph.topological_order());
  // Shifts are keyed by node name: nodes without a unique name are left uncorrected.
  std::map<std::string, int> name_count;
  for (const Node* node : order) ++name_count[node->name()];
  std::vector<Probe> probes;
  for (Node* node : order) {
    if (node->name().empty() || name_count[node->name()] != 1) continue;
    const QuantSpec spec = cfg.resolve(node->name(), node->op_type());
    const Tensor* w = quantizable_weight(graph, *node, spec);
    if (!w || !bias_correction_applies(graph, *node, *w) || !node->output(0)) continue;
    QFLOW_ASSIGN_OR_RETURN(int64_t axis, weight_channel_axis(*node, *w));
    auto quantized = quantize_weight(*w, spec.per_channel ? axis : -1, spec.weight_dtype, spec.reduce_range, spec.weight_bits);
    if (!quantized) return quantized.status().with_context(node->op_type() + " '" + node->name() + "'");
    Value* w_dq = graph.create_unique_value(node->input(1)->name() + "_bias_correction");
    graph.set_initializer(w_dq, dequantize_weight(*quantized));
    std::vector<Value*> inputs = node->inputs();
    inputs[1] = w_dq;
    Value* out = graph.create_unique_value(node->output(0)->name() + "_bias_correction");
    Node* twin = graph.add_node(node->op_type(), inputs, {out}, node->name() + "_bias_correction", node->domain());
    for (const Attribute& a : node->attributes()) twin->set_attribute(a);
    probes.push_back({node->name(), node->output(0)->name(), out->name(), output_channels(*node, *w)});
  }
  std::map<std::string, std::vector<double>> shifts;
  if (probes.empty()) return shifts;

  Expected<InputBinding> binding = bind_inputs(graph, dataset);
  if (!binding) return binding.status().with_context("bias correction");
  ExecutorOptions options;
  for (const Probe& p : probes) {
    options.extra_outputs.push_back(p.float_output);
    options.extra_outputs.push_back(p.quant_output);
  }
  QFLOW_ASSIGN_OR_RETURN(std::unique_ptr<Executor> executor, Executor::create(model, options));
  std::vector<std::vector<double>> sums(probes.size());
  std::vector<int64_t> counts(probes.size(), 0);
  for (std::size_t i = 0; i < probes.size(); ++i) sums[i].assign(static_cast<std::size_t>(probes[i].channels), 0.0);
  QFLOW_RETURN_IF_ERROR(for_each_feed_in(dataset, *binding, 0, dataset.count, [&](int64_t, const Feeds& feeds) -> Status {
    QFLOW_ASSIGN_OR_RETURN(auto outputs, executor->run(feeds));
    for (std::size_t i = 0; i < probes.size(); ++i) {
      const Tensor& y = outputs.at(probes[i].float_output);
      const Tensor& yq = outputs.at(probes[i].quant_output);
      const int64_t channels = probes[i].channels;
      if (y.dtype() != DType::Float32 || y.rank() < 2 || y.dim(1) != channels || yq.shape() != y.shape())
        return internal_error("bias correction: node '" + probes[i].node + "' output " + shape_to_string(y.shape()) +
                              " has no channel axis of " + std::to_string(channels));
      int64_t inner = 1;
      for (int64_t d = 2; d < y.rank(); ++d) inner *= y.dim(d);
      const float* a = y.data<float>();
      const float* b = yq.data<float>();
      for (int64_t k = 0; k < y.numel(); ++k)
        sums[i][static_cast<std::size_t>((k / inner) % channels)] += static_cast<double>(b[k]) - static_cast<double>(a[k]);
      counts[i] += y.numel() / channels;
    }
    return Status::ok();
  }));
  for (std::size_t i = 0; i < probes.size(); ++i) {
    std::vector<double> mean = sums[i];
    for (double& m : mean) m = counts[i] > 0 ? m / static_cast<double>(counts[i]) : 0.0;
    shifts[probes[i].node] = std::move(mean);
  }
  return shifts;
}

}  // namespace qflow

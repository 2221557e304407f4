// First-order BPU cost: MACs from static shapes, compute-bound time from the platform's figures.
#include "bpu_cost.h"

#include <string>
#include <vector>

namespace qflow {

namespace {

// Symbolic dimensions (a batch "N") count as 1, so MACs are per sample, as `qflow inspect`
// counts them; a value without a declared rank has no shape.
std::optional<Shape> shape_of(const Graph& graph, const Value* value) {
  if (!value) return std::nullopt;
  if (const Tensor* t = graph.initializer(value)) return t->shape();
  if (!value->type || !value->type->shape) return std::nullopt;
  Shape shape;
  for (const Dim& d : *value->type->shape) shape.push_back(d.value.value_or(1));
  return shape;
}

int64_t product(const Shape& shape, std::size_t from = 0) {
  int64_t p = 1;
  for (std::size_t i = from; i < shape.size(); ++i) p *= shape[i];
  return p;
}

}  // namespace

std::optional<int64_t> node_macs(const Graph& graph, const Node& node) {
  if (!node.domain().empty() && node.domain() != "ai.onnx") return 0;
  const std::string& op = node.op_type();
  if (op == "Conv" || op == "ConvTranspose") {
    const std::optional<Shape> w = shape_of(graph, node.input(1));
    if (!w || w->size() < 3) return std::nullopt;
    if (op == "Conv") {
      // Every output element sums C/group x kernel products: weight [M, C/group, k...].
      const std::optional<Shape> y = shape_of(graph, node.output(0));
      if (!y) return std::nullopt;
      return product(*y) * product(*w, 1);
    }
    // Every input element scatters into M/group x kernel outputs: weight [C, M/group, k...].
    const std::optional<Shape> x = shape_of(graph, node.input(0));
    if (!x) return std::nullopt;
    return product(*x) * product(*w, 1);
  }
  if (op == "Gemm" || op == "MatMul") {
    const std::optional<Shape> a = shape_of(graph, node.input(0));
    const std::optional<Shape> y = shape_of(graph, node.output(0));
    if (!a || !y || a->empty()) return std::nullopt;
    // The reduced axis: A's last (Gemm with transA: its first).
    const int64_t k = (op == "Gemm" && node.attr_int("transA", 0) != 0) ? a->front() : a->back();
    return product(*y) * k;
  }
  return 0;
}

std::optional<int64_t> value_elements(const Graph& graph, const Value* value, std::vector<std::string>* symbolic) {
  if (!value) return std::nullopt;
  if (const Tensor* t = graph.initializer(value)) return product(t->shape());
  if (!value->type || !value->type->shape) return std::nullopt;
  int64_t n = 1;
  for (const Dim& d : *value->type->shape) {
    if (!d.value && symbolic) symbolic->push_back(d.param.empty() ? "?" : d.param);
    n *= d.value.value_or(1);
  }
  return n;
}

double bytes_per_cycle(const BpuCost& cost) {
  return cost.frequency_mhz > 0.0 ? cost.bandwidth_gbps * 1e9 / (cost.frequency_mhz * 1e6) : 0.0;
}

LayerCycles layer_cycles(const BpuCost& cost, int64_t macs, int64_t bytes) {
  LayerCycles c;
  if (cost.macs_per_cycle > 0) c.compute = static_cast<double>(macs) / static_cast<double>(cost.macs_per_cycle);
  const double per_cycle = bytes_per_cycle(cost);
  if (per_cycle > 0.0) c.memory = static_cast<double>(bytes) / per_cycle;
  return c;
}

double compute_milliseconds(const BpuCost& cost, int64_t macs) {
  const double macs_per_second = static_cast<double>(cost.macs_per_cycle) * cost.frequency_mhz * 1e6;
  return macs_per_second > 0.0 ? static_cast<double>(macs) / macs_per_second * 1e3 : 0.0;
}

}  // namespace qflow

// FlushDenormals: subnormal float32/float64 initializers to signed zero (see the header).
#include "flush_denormals.h"

#include <cmath>
#include <cstdint>

namespace qflow {

namespace {

template <typename T>
int64_t count_subnormal(const Tensor& t) {
  int64_t n = 0;
  for (const T x : t.span<T>()) n += std::fpclassify(x) == FP_SUBNORMAL ? 1 : 0;
  return n;
}

int64_t subnormals(const Tensor& t) {
  if (t.dtype() == DType::Float32) return count_subnormal<float>(t);
  if (t.dtype() == DType::Float64) return count_subnormal<double>(t);
  return 0;
}

template <typename T>
Tensor flushed(const Tensor& t) {
  Tensor out = t.clone();
  for (T& x : out.span<T>())
    if (std::fpclassify(x) == FP_SUBNORMAL) x = std::copysign(T(0), x);
  return out;
}

template <typename Visit>
void for_each_graph(Graph& graph, const Visit& visit) {
  visit(graph);
  for (const auto& node : graph.nodes())
    for (const Attribute& a : node->attributes()) {
      if (a.g) for_each_graph(*a.g, visit);
      for (const auto& g : a.graphs)
        if (g) for_each_graph(*g, visit);
    }
}

}  // namespace

ComponentInfo FlushDenormals::info() {
  ComponentInfo info;
  info.kind = ComponentKind::Pass;
  info.name = "flush-denormals";
  info.summary = "Set subnormal float32/float64 constants to zero (they make x86 float arithmetic tens of times slower)";
  return info;
}

Expected<std::unique_ptr<Pass>> FlushDenormals::create(const Options& options) {
  (void)options;
  return std::unique_ptr<Pass>(std::make_unique<FlushDenormals>());
}

bool FlushDenormals::matches(const Model& model) const {
  if (!model.graph) return false;
  bool found = false;
  for_each_graph(*model.graph, [&](Graph& graph) {
    for (const Value* v : graph.initializer_order()) found = found || subnormals(*graph.initializer(v)) > 0;
  });
  return found;
}

Expected<PassResult> FlushDenormals::run_impl(Model& model) {
  PassResult result;
  result.counters["values-flushed"] = 0;
  result.counters["initializers-changed"] = 0;
  for_each_graph(*model.graph, [&](Graph& graph) {
    for (Value* v : graph.initializer_order()) {
      const Tensor& t = *graph.initializer(v);
      const int64_t n = subnormals(t);
      if (n == 0) continue;
      graph.set_initializer(v, t.dtype() == DType::Float32 ? flushed<float>(t) : flushed<double>(t));
      result.counters["values-flushed"] += n;
      ++result.counters["initializers-changed"];
    }
  });
  result.changed = result.counters["initializers-changed"] > 0;
  return result;
}

}  // namespace qflow

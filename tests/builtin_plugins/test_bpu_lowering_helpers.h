// Building small PTQ (QDQ) graphs the way the quantize stage writes them, running them with
// the host interpreter, and running lowered models with the executor: shared by the lowering tests.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "plugins/backends/bpu/lowering.h"
#include "qflow/interpreter.h"
#include "qflow/runtime/fixed_point.h"
#include "qflow/runtime/executor.h"
#include "test_bpu_helpers.h"

namespace qflow::lowering_test {

// A QDQ graph under construction: activations get Q/DQ pairs, weights integer initializers
// behind a DequantizeLinear, biases int32 with scale s_in * s_w[c].
struct QdqGraph {
  Model model;
  Graph& g;
  std::map<std::string, double> scales;  // float activation -> scale

  explicit QdqGraph(int64_t opset = 13) : g(*model.graph) {
    model.opset_imports = {{"", opset}};
    g.name = "lowering_test";
  }

  // Q/DQ after float value `x`; consumers read the returned DQ output.
  Value* qdq(Value* x, double scale, int64_t zp = 0, DType type = DType::Int8) {
    Value* s = g.get_or_create_value(x->name() + "_scale");
    g.set_initializer(s, Tensor::scalar<float>(static_cast<float>(scale)));
    Value* z = g.get_or_create_value(x->name() + "_zero_point");
    Tensor zt(type, {});
    switch (type) {
      case DType::Int8: zt.data<int8_t>()[0] = static_cast<int8_t>(zp); break;
      case DType::UInt8: zt.data<uint8_t>()[0] = static_cast<uint8_t>(zp); break;
      case DType::Int16: zt.data<int16_t>()[0] = static_cast<int16_t>(zp); break;
      default: zt.data<uint16_t>()[0] = static_cast<uint16_t>(zp); break;
    }
    g.set_initializer(z, zt);
    Value* q = g.get_or_create_value(x->name() + "_quantized");
    g.add_node("QuantizeLinear", {x, s, z}, {q}, x->name() + "_QuantizeLinear");
    Value* dq = g.get_or_create_value(x->name() + "_dequantized");
    g.add_node("DequantizeLinear", {q, s, z}, {dq}, x->name() + "_DequantizeLinear");
    scales[x->name()] = static_cast<float>(scale);
    return dq;
  }

  Value* input(const std::string& name, const Shape& shape, double scale, int64_t zp = 0, DType type = DType::Int8) {
    return qdq(float_input(name, shape), scale, zp, type);
  }
  // A graph input read as float (no Q/DQ after it).
  Value* float_input(const std::string& name, const Shape& shape) {
    Value* x = g.get_or_create_value(name);
    bpu_test::set_shape(x, shape);
    g.inputs.push_back(x);
    return x;
  }

  // Integer weight behind a DequantizeLinear (per channel along `axis` when several scales).
  Value* weight(const std::string& name, const Shape& shape, const std::vector<int8_t>& values,
                const std::vector<float>& scale, int64_t axis) {
    Value* w = g.get_or_create_value(name + "_quantized");
    g.set_initializer(w, Tensor::from_vector<int8_t>(shape, values));
    Value* s = g.get_or_create_value(name + "_scale");
    Value* z = g.get_or_create_value(name + "_zero_point");
    const auto n = static_cast<int64_t>(scale.size());
    g.set_initializer(s, n > 1 ? Tensor::from_vector<float>({n}, scale) : Tensor::scalar<float>(scale[0]));
    g.set_initializer(z, n > 1 ? Tensor(DType::Int8, {n}) : Tensor(DType::Int8, {}));
    Value* dq = g.get_or_create_value(name + "_dequantized");
    Node* node = g.add_node("DequantizeLinear", {w, s, z}, {dq}, name + "_DequantizeLinear");
    if (n > 1) node->set_attribute(Attribute::make_int("axis", axis));
    return dq;
  }

  Value* bias(const std::string& name, const std::vector<int32_t>& values, const std::vector<float>& scale) {
    Value* b = g.get_or_create_value(name + "_quantized");
    const auto c = static_cast<int64_t>(values.size());
    g.set_initializer(b, Tensor::from_vector<int32_t>({c}, values));
    Value* s = g.get_or_create_value(name + "_scale");
    Value* z = g.get_or_create_value(name + "_zero_point");
    const auto n = static_cast<int64_t>(scale.size());
    g.set_initializer(s, n > 1 ? Tensor::from_vector<float>({n}, scale) : Tensor::scalar<float>(scale[0]));
    g.set_initializer(z, n > 1 ? Tensor(DType::Int32, {n}) : Tensor(DType::Int32, {}));
    Value* dq = g.get_or_create_value(name + "_dequantized");
    Node* node = g.add_node("DequantizeLinear", {b, s, z}, {dq}, name + "_DequantizeLinear");
    if (n > 1) node->set_attribute(Attribute::make_int("axis", 0));
    return dq;
  }

  // A node with one float output of the given shape.
  Value* op(const std::string& type, const std::string& name, const std::vector<Value*>& inputs, const Shape& shape,
            std::vector<Attribute> attributes = {}, const std::string& domain = "") {
    Value* y = g.get_or_create_value(name + "_out");
    bpu_test::set_shape(y, shape);
    Node* node = g.add_node(type, inputs, {y}, name, domain);
    for (Attribute& a : attributes) node->set_attribute(std::move(a));
    return y;
  }

  // Marks `y` (a float output with its Q/DQ) as the graph output, named by its DQ output.
  void output(Value* dq) { g.outputs.push_back(dq); }

  Value* constant(const std::string& name, Tensor t) {
    Value* v = g.get_or_create_value(name);
    g.set_initializer(v, std::move(t));
    return v;
  }
};

inline double scale_of(const QdqGraph& q, const std::string& value) { return q.scales.at(value); }

// The QDQ model run node by node with the host interpreter.
inline std::vector<std::vector<float>> run_reference(const Model& model, const std::vector<std::vector<float>>& inputs) {
  const Graph& g = *model.graph;
  std::map<const Value*, Tensor> values;
  for (const Value* v : g.initializer_order()) values[v] = *g.initializer(v);
  for (std::size_t i = 0; i < g.inputs.size(); ++i)
    values[g.inputs[i]] = Tensor::from_vector<float>(*g.inputs[i]->type->static_shape(), inputs[i]);
  auto order = g.topological_order();
  REQUIRE(order.has_value());
  for (const Node* node : order.value()) {
    std::vector<const Tensor*> in;
    for (const Value* v : node->inputs()) in.push_back(v ? &values.at(v) : nullptr);
    auto out = evaluate_node(*node, in, model.opset(node->domain()));
    REQUIRE_MESSAGE(out.has_value(), node->name() << ": " << out.status().message());
    for (std::size_t k = 0; k < node->outputs().size(); ++k)
      if (node->output(k)) values[node->output(k)] = out.value()[k];
  }
  std::vector<std::vector<float>> result;
  for (const Value* o : g.outputs) {
    const Tensor& t = values.at(o);
    result.emplace_back(t.data<float>(), t.data<float>() + t.numel());
  }
  return result;
}

inline std::vector<std::vector<float>> run_lowered(const lowered::Model& model, const std::vector<std::vector<float>>& inputs) {
  auto executor = lowered::Executor::create(model);
  REQUIRE_MESSAGE(executor.has_value(), executor.message());
  std::vector<std::span<const float>> spans;
  for (const auto& v : inputs) spans.emplace_back(v.data(), v.size());
  std::vector<std::vector<float>> outputs;
  const Status status = executor->run(spans, outputs);
  REQUIRE_MESSAGE(status.is_ok(), status.message());
  return outputs;
}

inline lowered::Model lower(const Model& model, const BpuBackend& backend) {
  auto lowered = lower_ptq_model(model, backend);
  REQUIRE_MESSAGE(lowered.has_value(), lowered.status().message());
  return lowered.value();
}

inline std::string lower_error(const Model& model, const BpuBackend& backend) {
  auto lowered = lower_ptq_model(model, backend);
  REQUIRE_FALSE(lowered.has_value());
  return lowered.status().message();
}

// "quantize conv2d dequantize | cpu.Conv": the op types per segment.
inline std::string op_list(const lowered::Model& model) {
  std::string out;
  for (const lowered::Segment& s : model.segments) {
    if (!out.empty()) out += " | ";
    out += s.kind == lowered::SegmentKind::bpu ? "bpu:" : "cpu:";
    for (const lowered::Op& op : s.ops) out += " " + op.type;
  }
  return out;
}

inline const lowered::Op* find_op(const lowered::Model& model, const std::string& type) {
  for (const lowered::Segment& s : model.segments)
    for (const lowered::Op& op : s.ops)
      if (op.type == type) return &op;
  return nullptr;
}

inline std::vector<int64_t> ints(const lowered::Op& op, const std::string& name) {
  for (const lowered::Attribute& a : op.attributes)
    if (a.name == name) return a.ints;
  FAIL("attribute " << name << " missing in " << op.type);
  return {};
}

// Deterministic pseudo-random floats in [lo, hi).
inline std::vector<float> ramp(std::size_t n, float lo, float hi, uint32_t seed = 1) {
  std::vector<float> out(n);
  uint32_t state = seed * 2654435761u + 12345u;
  for (float& v : out) {
    state = state * 1664525u + 1013904223u;
    v = lo + (hi - lo) * static_cast<float>(state >> 8) / static_cast<float>(1u << 24);
  }
  return out;
}

inline std::vector<int8_t> int8_ramp(std::size_t n, uint32_t seed = 7) {
  std::vector<int8_t> out(n);
  uint32_t state = seed;
  for (int8_t& v : out) {
    state = state * 1664525u + 1013904223u;
    v = static_cast<int8_t>(static_cast<int32_t>((state >> 16) % 255u) - 127);
  }
  return out;
}

// Every output element within `lsb` output quantization steps of the reference
// (QFLOW_DEBUG_LOWERING=1 prints the first values of each output).
// x -> Conv 3x3 "c1" -> Conv 9x9 "big" -> Conv 1x1 "c3": bernoulli2 runs Conv kernels up to
// 7x7, so "big" falls back to the CPU there; nash runs all three.
inline QdqGraph big_kernel_model() {
  QdqGraph q;
  Value* x = q.input("x", {1, 1, 12, 12}, 0.0437);
  Value* y1 = q.op("Conv", "c1", {x, q.weight("w1", {2, 1, 3, 3}, int8_ramp(18, 1), {0.0071f, 0.0053f}, 0)}, {1, 2, 12, 12},
                   {Attribute::make_ints("pads", {1, 1, 1, 1})});
  Value* y2 = q.op("Conv", "big", {q.qdq(y1, 0.0611), q.weight("w2", {2, 2, 9, 9}, int8_ramp(324, 2), {0.00093f, 0.00117f}, 0)},
                   {1, 2, 12, 12}, {Attribute::make_ints("pads", {4, 4, 4, 4})});
  Value* y3 = q.op("Conv", "c3", {q.qdq(y2, 0.0813), q.weight("w3", {1, 2, 1, 1}, {60, -50}, {0.0103f}, -1)}, {1, 1, 12, 12});
  q.output(q.qdq(y3, 0.0973));
  return q;
}

inline void check_close(const std::vector<std::vector<float>>& got, const std::vector<std::vector<float>>& want,
                        double step, double lsb = 1.0) {
  REQUIRE(got.size() == want.size());
  for (std::size_t o = 0; o < got.size(); ++o) {
    REQUIRE(got[o].size() == want[o].size());
    double worst = 0.0;
    for (std::size_t i = 0; i < got[o].size(); ++i) worst = std::max(worst, std::fabs(double(got[o][i]) - double(want[o][i])));
    if (std::getenv("QFLOW_DEBUG_LOWERING"))
      for (std::size_t i = 0; i < got[o].size() && i < 16; ++i) MESSAGE(i << ": " << got[o][i] << " vs " << want[o][i]);
    CHECK_MESSAGE(worst <= lsb * step * (1.0 + 1e-5), "output " << o << ": max |diff| " << worst << " > " << lsb << " x " << step);
  }
}

}  // namespace qflow::lowering_test

// Lowering of the table-driven ops: elementwise functions as lookup tables (fx::build_*_lut),
// Softmax and LayerNormalization over the last axis (fx::make_softmax_params,
// fx::make_layernorm_params).
#include <cmath>

#include "lowering_context.h"

namespace qflow::lowering {

namespace {

constexpr int kSegmentBits16 = 7;  // 16-bit inputs: 513 entries, linear interpolation

int64_t last_axis(const Lowerer& l, const Node& node, int64_t fallback) {
  const auto rank = static_cast<int64_t>(l.shape(node.input(0)).size());
  int64_t axis = node.attr_int("axis", fallback);
  if (axis < 0) axis += rank;
  return axis == rank - 1 ? axis : -1;
}

std::string gelu_approximation(const Node& node) {
  return node.domain() == "com.microsoft" ? std::string("none") : node.attr_string("approximate", "none");
}

Status build_table(const Lowerer& l, const Node& node, fx::Lut& lut) {
  const fx::QParams in = qparams_of(*l.quant(node.input(0)));
  const fx::QParams out = qparams_of(*l.quant(node.output(0)));
  const int bits = fx::is_16bit(in.type) ? kSegmentBits16 : 0;
  const std::string& op = node.op_type();
  if (op == "Sigmoid") return fx::build_sigmoid_lut(in, out, bits, lut);
  if (op == "Tanh") return fx::build_tanh_lut(in, out, bits, lut);
  if (op == "HardSigmoid")
    return fx::build_hard_sigmoid_lut(in, out, node.attr_float("alpha", 0.2f), node.attr_float("beta", 0.5f), bits, lut);
  if (op == "HardSwish") return fx::build_hard_swish_lut(in, out, bits, lut);
  if (op == "Exp") return fx::build_exp_lut(in, out, bits, lut);
  if (op == "Reciprocal") return fx::build_reciprocal_lut(in, out, bits, lut);
  if (op == "LeakyRelu") {
    const double alpha = node.attr_float("alpha", 0.01f);
    return fx::build_lut([alpha](double x) { return x >= 0.0 ? x : alpha * x; }, in, out, bits, lut);
  }
  if (op == "Gelu") {
    if (gelu_approximation(node) == "tanh")
      return fx::build_lut(
          [](double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }, in,
          out, bits, lut);
    return fx::build_gelu_lut(in, out, bits, lut);
  }
  return invalid_input("no table for " + op);
}

// LayerNormalization's gamma and beta as doubles of the row length.
bool layernorm_affine(const Lowerer& l, const Node& node, std::vector<double>& gamma, std::vector<double>& beta) {
  const Shape x = l.shape(node.input(0));
  if (x.empty()) return false;
  const auto row = static_cast<std::size_t>(x.back());
  const Tensor* g = l.constant(node.input(1));
  if (!g || !is_float(g->dtype())) return false;
  gamma = g->to_doubles();
  beta.assign(row, 0.0);
  if (node.input(2)) {
    const Tensor* b = l.constant(node.input(2));
    if (!b || !is_float(b->dtype())) return false;
    beta = b->to_doubles();
  }
  if (gamma.size() == 1) gamma.assign(row, gamma.front());
  if (beta.size() == 1) beta.assign(row, beta.front());
  return gamma.size() == row && beta.size() == row;
}

}  // namespace

std::string gap_table(const Lowerer& l, const Node& node) {
  if (!l.quant(node.input(0)) || l.constant(node.input(0))) return no_lowering(node, "with an input that is not a quantized activation");
  const std::string& op = node.op_type();
  if (op == "Softmax") {
    if (last_axis(l, node, l.opset() >= 13 ? -1 : 1) < 0) return no_lowering(node, "over an axis other than the last");
    fx::SoftmaxParams p;
    if (Status s = fx::make_softmax_params(qparams_of(*l.quant(node.input(0))), qparams_of(*l.quant(node.output(0))), p); !s.is_ok())
      return no_lowering(node, "(" + s.message() + ")");
    return {};
  }
  if (op == "LayerNormalization") {
    // Its output multiplier s_gamma * 2^-12 / s_out, s_gamma = max|gamma| / 32767, is no shift.
    if (l.platform.power_of_two_scales) return no_lowering(node, "on a power-of-two platform");
    if (last_axis(l, node, -1) < 0) return no_lowering(node, "over axes other than the last");
    for (std::size_t i = 1; i < node.outputs().size(); ++i)
      if (node.output(i) && !node.output(i)->uses().empty()) return no_lowering(node, "with its Mean / InvStdDev outputs in use");
    std::vector<double> gamma, beta;
    if (!layernorm_affine(l, node, gamma, beta)) return no_lowering(node, "with a scale or bias that is not a float constant of the row length");
    fx::LayerNormParams p;
    if (Status s = fx::make_layernorm_params(qparams_of(*l.quant(node.input(0))), qparams_of(*l.quant(node.output(0))), gamma,
                                                 beta, node.attr_float("epsilon", 1e-5f), p);
        !s.is_ok())
      return no_lowering(node, "(" + s.message() + ")");
    return {};
  }
  if (op == "Gelu" && gelu_approximation(node) != "none" && gelu_approximation(node) != "tanh")
    return no_lowering(node, "with approximate = " + gelu_approximation(node));
  fx::Lut lut;
  if (Status s = build_table(l, node, lut); !s.is_ok()) return no_lowering(node, "(" + s.message() + ")");
  return {};
}

Status lower_table(Lowerer& l, const Node& node) {
  const fx::QParams in = qparams_of(*l.quant(node.input(0)));
  const fx::QParams out = qparams_of(*l.quant(node.output(0)));
  QFLOW_ASSIGN_OR_RETURN(int32_t x, l.read_quantized(node.input(0)));
  const std::string& op = node.op_type();
  if (op == "Softmax") {
    fx::SoftmaxParams p;
    if (Status s = fx::make_softmax_params(in, out, p); !s.is_ok()) return l.node_error(node, s.message());
    const int32_t table = l.int32_constant(node.output(0)->name() + "_exp_table", p.exp_table);
    const int32_t y = l.write_quantized(node.output(0));
    lowered::Op lop = make_op("softmax", node, {x, table}, {y});
    set_ints(lop, "segment_bits", {p.segment_bits});
    if (l.platform.power_of_two_scales && p.output_multiplier.mantissa != (int32_t{1} << 30))
      return l.node_error(node, "output scale " + std::to_string(out.scale) + " is not a power of two (" + l.platform.name +
                                    " needs power-of-two scales)");
    set_multiplier(lop, "output_multiplier", p.output_multiplier);
    l.emit(std::move(lop));
    return Status::ok();
  }
  if (op == "LayerNormalization") {
    std::vector<double> gamma, beta;
    layernorm_affine(l, node, gamma, beta);
    fx::LayerNormParams p;
    if (Status s = fx::make_layernorm_params(in, out, gamma, beta, node.attr_float("epsilon", 1e-5f), p); !s.is_ok())
      return l.node_error(node, s.message());
    const int32_t g = l.int32_constant(node.output(0)->name() + "_gamma", p.gamma);
    const int32_t b = l.int32_constant(node.output(0)->name() + "_beta", p.beta);
    const int32_t y = l.write_quantized(node.output(0));
    lowered::Op lop = make_op("layernorm", node, {x, g, b}, {y});
    set_ints(lop, "epsilon", {p.epsilon});
    set_multiplier(lop, "output_multiplier", p.output_multiplier);
    l.emit(std::move(lop));
    return Status::ok();
  }
  fx::Lut lut;
  if (Status s = build_table(l, node, lut); !s.is_ok()) return l.node_error(node, s.message());
  const int32_t table = l.int32_constant(node.output(0)->name() + "_table", lut.entries);
  const int32_t y = l.write_quantized(node.output(0));
  lowered::Op lop = make_op("lut", node, {x, table}, {y});
  set_ints(lop, "segment_bits", {lut.segment_bits});
  l.emit(std::move(lop));
  return Status::ok();
}

}  // namespace qflow::lowering

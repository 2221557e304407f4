// Lowering of Add / Sub / Mul (rescaling parameters of fx::make_add_params / make_mul_params),
// standalone Relu / Clip (requantize with a clamp), Concat and the identity-like ops.
#include <algorithm>
#include <limits>

#include "lowering_context.h"

namespace qflow::lowering {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::string quantized_inputs_gap(const Lowerer& l, const Node& node, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    const Value* in = node.input(i);
    if (!in) return no_lowering(node, "with a missing input");
    if (l.constant(in)) return no_lowering(node, "with constant input '" + in->name() + "'");
    if (!l.quant(in)) return no_lowering(node, "with input '" + in->name() + "' that is not quantized");
  }
  return {};
}

// Power-of-two platforms shift only: every multiplier must be 2^-k (mantissa 2^30).
Status check_shift_only(const Lowerer& l, const Node& node, fx::Multiplier m, const std::string& what) {
  if (l.platform.power_of_two_scales && m.mantissa != 0 && m.mantissa != (int32_t{1} << 30))
    return l.node_error(node, what + " " + std::to_string(fx::multiplier_value(m)) + " is not a power of two (" +
                                  l.platform.name + " needs power-of-two scales)");
  return Status::ok();
}

}  // namespace

std::string gap_eltwise(const Lowerer& l, const Node& node) {
  const std::string& op = node.op_type();
  if (op == "Add" || op == "Sub" || op == "Mul") {
    if (std::string gap = quantized_inputs_gap(l, node, 2); !gap.empty()) return gap;
    const fx::QParams a = qparams_of(*l.quant(node.input(0))), b = qparams_of(*l.quant(node.input(1)));
    const fx::QParams y = qparams_of(*l.quant(node.output(0)));
    if (op == "Mul") {
      fx::MulParams p;
      if (fx::Status s = fx::make_mul_params(a, b, y, p); !s.ok()) return no_lowering(node, "(" + s.message + ")");
    } else {
      fx::AddParams p;
      if (fx::Status s = fx::make_add_params(a, b, y, op == "Sub", p); !s.ok()) return no_lowering(node, "(" + s.message + ")");
    }
    return {};
  }
  if (op == "Relu" || op == "Clip") {
    double lo = 0.0, hi = 0.0;
    if (!activation_bounds(l, node, lo, hi)) return no_lowering(node, "with bounds that are not constant scalars");
    return quantized_inputs_gap(l, node, 1);
  }
  if (op == "Concat") {
    for (const Value* in : node.inputs())
      if (!in || l.constant(in) || !l.quant(in)) return no_lowering(node, "with a constant or unquantized input");
    return {};
  }
  // Identity, Dropout (inference): a copy, requantized when the quantization changes.
  for (std::size_t i = 1; i < node.outputs().size(); ++i)
    if (node.output(i) && !node.output(i)->uses().empty()) return no_lowering(node, "with its mask output in use");
  return quantized_inputs_gap(l, node, 1);
}

Status lower_eltwise(Lowerer& l, const Node& node) {
  const std::string& op = node.op_type();
  const Value* out = node.output(0);
  const ActivationQuant& yq = *l.quant(out);
  if (op == "Add" || op == "Sub" || op == "Mul") {
    const fx::QParams a = qparams_of(*l.quant(node.input(0))), b = qparams_of(*l.quant(node.input(1)));
    QFLOW_ASSIGN_OR_RETURN(int32_t xa, l.read_quantized(node.input(0)));
    QFLOW_ASSIGN_OR_RETURN(int32_t xb, l.read_quantized(node.input(1)));
    const int32_t y = l.write_quantized(out);
    lowered::Op lop = make_op(op == "Add" ? "add" : op == "Sub" ? "sub" : "mul", node, {xa, xb}, {y});
    if (op == "Mul") {
      fx::MulParams p;
      if (fx::Status s = fx::make_mul_params(a, b, qparams_of(yq), p); !s.ok()) return l.node_error(node, s.message);
      QFLOW_RETURN_IF_ERROR(check_shift_only(l, node, p.multiplier, "multiplier"));
      set_multiplier(lop, "multiplier", p.multiplier);
    } else {
      fx::AddParams p;
      if (fx::Status s = fx::make_add_params(a, b, qparams_of(yq), op == "Sub", p); !s.ok()) return l.node_error(node, s.message);
      QFLOW_RETURN_IF_ERROR(check_shift_only(l, node, p.a_multiplier, "input A multiplier"));
      QFLOW_RETURN_IF_ERROR(check_shift_only(l, node, p.b_multiplier, "input B multiplier"));
      QFLOW_RETURN_IF_ERROR(check_shift_only(l, node, p.output_multiplier, "output multiplier"));
      set_ints(lop, "left_shift", {p.left_shift});
      set_multiplier(lop, "a_multiplier", p.a_multiplier);
      set_multiplier(lop, "b_multiplier", p.b_multiplier);
      set_multiplier(lop, "output_multiplier", p.output_multiplier);
    }
    set_clamp(lop, clamp_of(yq, -kInf, kInf), yq);
    l.emit(std::move(lop));
    return Status::ok();
  }
  if (op == "Relu" || op == "Clip") {
    double lo = 0.0, hi = 0.0;
    activation_bounds(l, node, lo, hi);
    QFLOW_ASSIGN_OR_RETURN(int32_t x, l.read_quantized(node.input(0)));
    const int32_t y = l.write_quantized(out);
    return emit_requantize(l, node, x, *l.quant(node.input(0)), y, yq, lo, hi);
  }
  if (op == "Concat") {
    std::vector<int32_t> inputs;
    for (const Value* in : node.inputs()) {
      QFLOW_ASSIGN_OR_RETURN(int32_t x, l.read_quantized(in));
      inputs.push_back(x);
    }
    const int64_t rank = static_cast<int64_t>(l.shape(out).size());
    int64_t axis = node.attr_int("axis", 0);
    if (axis < 0) axis += rank;
    const int32_t y = l.write_quantized(out);
    lowered::Op lop = make_op("concat", node, std::move(inputs), {y});
    set_ints(lop, "axis", {axis});
    l.emit(std::move(lop));
    return Status::ok();
  }
  // Identity-like.
  const ActivationQuant& xq = *l.quant(node.input(0));
  QFLOW_ASSIGN_OR_RETURN(int32_t x, l.read_quantized(node.input(0)));
  const int32_t y = l.write_quantized(out);
  if (same_quant(xq, yq)) {
    l.emit(make_op("reshape", node, {x}, {y}));
    return Status::ok();
  }
  return emit_requantize(l, node, x, xq, y, yq, -kInf, kInf);
}

}  // namespace qflow::lowering

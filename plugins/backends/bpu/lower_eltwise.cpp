// Lowering of Add / Sub / Mul (rescaling parameters of fx::make_add_params / make_mul_params),
// standalone Relu / Clip (requantize with a clamp), Concat and the identity-like ops.
#include <algorithm>
#include <cmath>
#include <limits>

#include <boost/endian/conversion.hpp>

#include "lowering_context.h"

namespace qflow::lowering {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A float constant operand of Add / Sub / Mul, quantized symmetrically to the other
// operand's width: scale max|c| / qmax (a power of two at or above it on power-of-two
// platforms). A scalar is represented exactly.
struct ConstantOperand {
  ActivationQuant quant;
  std::vector<int32_t> values;
  Shape shape;
};

bool float_constant(const Lowerer& l, const Value* v) {
  const Tensor* t = l.constant(v);
  return t && is_float(t->dtype()) && t->numel() > 0;
}

ConstantOperand quantize_operand(const Lowerer& l, const Tensor& t, lowered::ElemType other) {
  ConstantOperand c;
  const bool wide = other == lowered::ElemType::i16 || other == lowered::ElemType::u16;
  c.quant.type = wide ? lowered::ElemType::i16 : lowered::ElemType::i8;
  const double qmax = wide ? 32767.0 : 127.0;
  const std::vector<double> values = t.to_doubles();
  double peak = 0.0;
  for (double v : values) peak = std::max(peak, std::fabs(v));
  double scale = peak > 0.0 ? peak / qmax : 1.0;
  if (l.platform.power_of_two_scales) scale = std::exp2(std::ceil(std::log2(scale)));
  c.quant.scale = scale;
  c.quant.zero_point = 0;
  for (double v : values) c.values.push_back(fx::quantize(v, qparams_of(c.quant)));
  c.shape = t.shape();
  return c;
}

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
    // One operand may be a float constant (quantized here); the other is an activation.
    const bool const_a = float_constant(l, node.input(0)), const_b = float_constant(l, node.input(1));
    if (const_a && const_b) return no_lowering(node, "of two constants");
    const Value* act = const_a ? node.input(1) : node.input(0);
    if (!act || l.constant(act) || !l.quant(act)) return no_lowering(node, "with an input that is not a quantized activation");
    if (!const_a && !const_b)
      if (std::string gap = quantized_inputs_gap(l, node, 2); !gap.empty()) return gap;
    auto operand = [&](const Value* v) {
      return float_constant(l, v) ? qparams_of(quantize_operand(l, *l.constant(v), l.quant(act)->type).quant) : qparams_of(*l.quant(v));
    };
    const fx::QParams a = operand(node.input(0)), b = operand(node.input(1));
    const fx::QParams y = qparams_of(*l.quant(node.output(0)));
    if (op == "Mul") {
      fx::MulParams p;
      if (Status s = fx::make_mul_params(a, b, y, p); !s.is_ok()) return no_lowering(node, "(" + s.message() + ")");
    } else {
      fx::AddParams p;
      if (Status s = fx::make_add_params(a, b, y, op == "Sub", p); !s.is_ok()) return no_lowering(node, "(" + s.message() + ")");
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
    const Value* act = float_constant(l, node.input(0)) ? node.input(1) : node.input(0);
    fx::QParams params[2];
    int32_t operands[2] = {-1, -1};
    for (std::size_t i = 0; i < 2; ++i) {
      const Value* v = node.input(i);
      if (float_constant(l, v)) {
        const ConstantOperand c = quantize_operand(l, *l.constant(v), l.quant(act)->type);
        params[i] = qparams_of(c.quant);
        lowered::Tensor t;
        t.name = v->name() + "_quantized";
        t.type = c.quant.type;
        t.shape = c.shape;
        t.quant = quant_of(c.quant);
        t.constant = true;
        for (int32_t q : c.values) {
          if (c.quant.type == lowered::ElemType::i8) {
            t.data.push_back(static_cast<uint8_t>(static_cast<int8_t>(q)));
          } else {
            uint8_t bytes[2];  // lowered tensors are little-endian
            boost::endian::store_little_u16(bytes, static_cast<uint16_t>(static_cast<int16_t>(q)));
            t.data.insert(t.data.end(), bytes, bytes + 2);
          }
        }
        operands[i] = l.add_tensor(std::move(t));
      } else {
        params[i] = qparams_of(*l.quant(v));
        QFLOW_ASSIGN_OR_RETURN(operands[i], l.read_quantized(v));
      }
    }
    const fx::QParams a = params[0], b = params[1];
    const int32_t xa = operands[0], xb = operands[1];
    const int32_t y = l.write_quantized(out);
    lowered::Op lop = make_op(op == "Add" ? "add" : op == "Sub" ? "sub" : "mul", node, {xa, xb}, {y});
    if (op == "Mul") {
      fx::MulParams p;
      if (Status s = fx::make_mul_params(a, b, qparams_of(yq), p); !s.is_ok()) return l.node_error(node, s.message());
      QFLOW_RETURN_IF_ERROR(check_shift_only(l, node, p.multiplier, "multiplier"));
      set_multiplier(lop, "multiplier", p.multiplier);
    } else {
      fx::AddParams p;
      if (Status s = fx::make_add_params(a, b, qparams_of(yq), op == "Sub", p); !s.is_ok()) return l.node_error(node, s.message());
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

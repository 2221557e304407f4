// Lowering of Conv, ConvTranspose, Gemm and MatMul: conv2d, conv_transpose2d and matmul with
// per-channel multipliers s_in * s_w[c] / s_out and a fused Relu / Clip as the clamp.
#include <algorithm>
#include <cmath>
#include <limits>

#include "lowering_context.h"

namespace qflow::lowering {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::string join(const Shape& s) { return shape_to_string(s); }

// Weight of a linear node: an int8 / int16 constant behind a DequantizeLinear.
std::string weight_gap(const Lowerer& l, const Node& node, const Value* w, std::size_t rank) {
  const QuantizedConstant* c = l.quantized_constant(w);
  if (!c) return no_lowering(node, "with weight '" + (w ? w->name() : std::string()) + "' that is not a quantized constant");
  if (c->values.dtype() != DType::Int8 && c->values.dtype() != DType::Int16)
    return no_lowering(node, "with a " + std::string(dtype_name(c->values.dtype())) + " weight");
  if (static_cast<std::size_t>(c->values.rank()) != rank)
    return no_lowering(node, "with weight of shape " + join(c->values.shape()));
  return {};
}

std::string bias_gap(const Lowerer& l, const Node& node, const Value* b, int64_t channels) {
  if (!b) return {};
  const QuantizedConstant* c = l.quantized_constant(b);
  if (!c || c->values.dtype() != DType::Int32 || c->values.rank() != 1 || c->values.dim(0) != channels)
    return no_lowering(node, "with bias '" + b->name() + "' that is not an int32 constant of " + std::to_string(channels) + " values");
  return {};
}

std::string input_gap(const Lowerer& l, const Node& node, const Value* x, const QuantizedConstant* w) {
  const ActivationQuant* q = l.quant(x);
  if (!q) return no_lowering(node, "with input '" + (x ? x->name() : std::string()) + "' that is not quantized");
  if (w) {
    const fx::QType wt = w->values.dtype() == DType::Int16 ? fx::QType::Int16 : fx::QType::Int8;
    if (Status s = fx::check_type_pair(qtype_of(q->type), wt); !s.is_ok()) return no_lowering(node, "(" + s.message() + ")");
  }
  return {};
}

// Per-output-channel multipliers: `scale_of(c)` is s_w of channel c.
Expected<std::vector<fx::Multiplier>> channel_multipliers(Lowerer& l, const Node& node, double s_in, const QuantizedConstant& w,
                                                          int64_t channels, int64_t scale_period, double s_out) {
  std::vector<fx::Multiplier> out;
  const int64_t n = w.scales.size() == 1 ? 1 : channels;
  for (int64_t c = 0; c < n; ++c) {
    const double s_w = w.scales[static_cast<std::size_t>(w.scales.size() == 1 ? 0 : c % scale_period)];
    // The PTQ model's float32 scales are the reference: s_in and s_w as stored, product in double.
    QFLOW_ASSIGN_OR_RETURN(fx::Multiplier m, l.multiplier(node, s_in * s_w / s_out, "multiplier of channel " + std::to_string(c)));
    out.push_back(m);
  }
  return out;
}

// The bias must have been quantized with scale s_in * s_w[c] (what the kernels assume).
Status check_bias_scale(const Lowerer& l, const Node& node, const Value* b, double s_in, const QuantizedConstant& w,
                        int64_t channels, int64_t scale_period) {
  if (!b) return Status::ok();
  const QuantizedConstant& bias = *l.quantized_constant(b);
  for (int64_t c = 0; c < channels; ++c) {
    const double s_b = bias.scales[static_cast<std::size_t>(bias.scales.size() == 1 ? 0 : c)];
    const double s_w = w.scales[static_cast<std::size_t>(w.scales.size() == 1 ? 0 : c % scale_period)];
    const double expected = static_cast<double>(static_cast<float>(s_in * s_w));
    if (std::fabs(s_b - expected) > 1e-6 * expected)
      return l.node_error(node, "bias '" + b->name() + "' channel " + std::to_string(c) + " has scale " + std::to_string(s_b) +
                                    ", not input scale * weight scale = " + std::to_string(expected));
  }
  return Status::ok();
}

struct Output {
  const Value* value = nullptr;
  ActivationQuant quant;
  double lo = -kInf, hi = kInf;
};

// The op's output: its own, or the fused Relu / Clip's with that node's bounds.
Output output_of(const Lowerer& l, const Node& node) {
  Output out;
  out.value = node.output(0);
  if (auto it = l.fused_activation.find(&node); it != l.fused_activation.end()) {
    out.value = it->second->output(0);
    activation_bounds(l, *it->second, out.lo, out.hi);
    // The PTQ model saturates the skipped intermediate to its own range first: keep that
    // bound too (a calibrator may have clipped it below the Relu / Clip bounds).
    const ActivationQuant& mid = *l.quant(node.output(0));
    const fx::Range r = fx::range_of(qtype_of(mid.type));
    out.lo = std::max(out.lo, mid.scale * (r.min - mid.zero_point));
    out.hi = std::min(out.hi, mid.scale * (r.max - mid.zero_point));
  }
  out.quant = *l.quant(out.value);
  return out;
}

std::string conv_gap(const Lowerer& l, const Node& node) {
  const bool transpose = node.op_type() == "ConvTranspose";
  const Shape x = l.shape(node.input(0));
  if (x.size() != 4) return no_lowering(node, "with input rank " + std::to_string(x.size()) + " (2-D images only)");
  if (std::string gap = weight_gap(l, node, node.input(1), 4); !gap.empty()) return gap;
  const QuantizedConstant& w = *l.quantized_constant(node.input(1));
  if (std::string gap = input_gap(l, node, node.input(0), &w); !gap.empty()) return gap;
  const std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID") return no_lowering(node, "with auto_pad " + auto_pad);
  if (transpose && node.find_attribute("output_shape")) return no_lowering(node, "with an output_shape attribute");
  const int64_t group = node.attr_int("group", 1);
  const int64_t out_channels = transpose ? w.values.dim(1) * group : w.values.dim(0);
  const int64_t period = transpose ? w.values.dim(1) : out_channels;
  if (w.scales.size() != 1 && static_cast<int64_t>(w.scales.size()) != period)
    return no_lowering(node, "with " + std::to_string(w.scales.size()) + " weight scales");
  if (std::string gap = bias_gap(l, node, node.input(2), out_channels); !gap.empty()) return gap;
  const Shape y = l.shape(node.output(0));
  if (y.size() != 4 || y[1] != out_channels) return no_lowering(node, "with output shape " + join(y));
  return {};
}

Status lower_conv(Lowerer& l, const Node& node) {
  const bool transpose = node.op_type() == "ConvTranspose";
  const QuantizedConstant& w = *l.quantized_constant(node.input(1));
  const ActivationQuant& in = *l.quant(node.input(0));
  const Output out = output_of(l, node);
  const int64_t group = node.attr_int("group", 1);
  const int64_t out_channels = transpose ? w.values.dim(1) * group : w.values.dim(0);
  const int64_t period = transpose ? w.values.dim(1) : out_channels;
  QFLOW_RETURN_IF_ERROR(check_bias_scale(l, node, node.input(2), in.scale, w, out_channels, period));
  QFLOW_ASSIGN_OR_RETURN(std::vector<fx::Multiplier> ms,
                         channel_multipliers(l, node, in.scale, w, out_channels, period, out.quant.scale));
  QFLOW_ASSIGN_OR_RETURN(int32_t x, l.read_quantized(node.input(0)));
  QFLOW_ASSIGN_OR_RETURN(int32_t wt, l.integer_constant(node.input(1)));
  int32_t b = -1;
  if (node.input(2)) {
    QFLOW_ASSIGN_OR_RETURN(b, l.integer_constant(node.input(2)));
  }
  const int32_t y = l.write_quantized(out.value, out.quant);
  lowered::Op op = make_op(transpose ? "conv_transpose2d" : "conv2d", node, {x, wt, b}, {y});
  const std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  set_ints(op, "group", {group});
  set_ints(op, "strides", node.attr_ints("strides", {1, 1}));
  set_ints(op, "pads", auto_pad == "VALID" ? std::vector<int64_t>{0, 0, 0, 0} : node.attr_ints("pads", {0, 0, 0, 0}));
  set_ints(op, "dilations", node.attr_ints("dilations", {1, 1}));
  if (transpose) set_ints(op, "output_padding", node.attr_ints("output_padding", {0, 0}));
  set_multipliers(op, "multiplier", ms);
  set_clamp(op, clamp_of(out.quant, out.lo, out.hi), out.quant);
  if (l.fused_activation.count(&node)) op.name += "+" + l.fused_activation.at(&node)->name();
  l.emit(std::move(op));
  return Status::ok();
}

std::string matmul_gap(const Lowerer& l, const Node& node) {
  const bool gemm = node.op_type() == "Gemm";
  if (gemm) {
    if (node.attr_int("transA", 0) != 0) return no_lowering(node, "with transA = 1");
    if (node.attr_float("alpha", 1.0f) != 1.0f) return no_lowering(node, "with alpha != 1");
    if (node.attr_float("beta", 1.0f) != 1.0f && node.input(2)) return no_lowering(node, "with beta != 1");
  }
  const Shape a = l.shape(node.input(0));
  if (a.size() < 2 || (gemm && a.size() != 2)) return no_lowering(node, "with input of shape " + join(a));
  const Value* bv = node.input(1);
  if (l.quantized_constant(bv)) {
    if (std::string gap = weight_gap(l, node, bv, 2); !gap.empty()) return gap;
    const QuantizedConstant& w = *l.quantized_constant(bv);
    if (std::string gap = input_gap(l, node, node.input(0), &w); !gap.empty()) return gap;
    const bool transposed = gemm && node.attr_int("transB", 0) != 0;
    const int64_t k = transposed ? w.values.dim(1) : w.values.dim(0);
    const int64_t n = transposed ? w.values.dim(0) : w.values.dim(1);
    if (k != a.back()) return no_lowering(node, "with weight of shape " + join(w.values.shape()));
    if (w.scales.size() != 1 && static_cast<int64_t>(w.scales.size()) != n)
      return no_lowering(node, "with " + std::to_string(w.scales.size()) + " weight scales");
    return gemm ? bias_gap(l, node, node.input(2), n) : std::string();
  }
  if (gemm) return no_lowering(node, "with an activation as B");
  if (!l.quant(bv)) return no_lowering(node, "with input '" + (bv ? bv->name() : std::string()) + "' that is not quantized");
  if (std::string gap = input_gap(l, node, node.input(0), nullptr); !gap.empty()) return gap;
  const Shape b = l.shape(bv);
  if (b.size() != a.size() || !std::equal(a.begin(), a.end() - 2, b.begin()) || b[b.size() - 2] != a.back())
    return no_lowering(node, "of shapes " + join(a) + " and " + join(b) + " (B needs A's leading dimensions)");
  if (Status s = fx::check_type_pair(qtype_of(l.quant(node.input(0))->type), qtype_of(l.quant(bv)->type)); !s.is_ok())
    return no_lowering(node, "(" + s.message() + ")");
  return {};
}

Status lower_matmul(Lowerer& l, const Node& node) {
  const bool gemm = node.op_type() == "Gemm";
  const ActivationQuant& in = *l.quant(node.input(0));
  const Output out = output_of(l, node);
  const Value* bv = node.input(1);
  QFLOW_ASSIGN_OR_RETURN(int32_t a, l.read_quantized(node.input(0)));
  const bool transposed = gemm && node.attr_int("transB", 0) != 0;
  std::vector<fx::Multiplier> ms;
  int32_t b = -1, bias = -1;
  if (const QuantizedConstant* w = l.quantized_constant(bv)) {
    const int64_t n = transposed ? w->values.dim(0) : w->values.dim(1);
    const Value* bias_value = gemm ? node.input(2) : nullptr;
    QFLOW_RETURN_IF_ERROR(check_bias_scale(l, node, bias_value, in.scale, *w, n, n));
    QFLOW_ASSIGN_OR_RETURN(ms, channel_multipliers(l, node, in.scale, *w, n, n, out.quant.scale));
    QFLOW_ASSIGN_OR_RETURN(b, l.integer_constant(bv));
    if (bias_value) {
      QFLOW_ASSIGN_OR_RETURN(bias, l.integer_constant(bias_value));
    }
  } else {
    QFLOW_ASSIGN_OR_RETURN(fx::Multiplier m, l.multiplier(node, in.scale * l.quant(bv)->scale / out.quant.scale, "multiplier"));
    ms.push_back(m);
    QFLOW_ASSIGN_OR_RETURN(b, l.read_quantized(bv));
  }
  const int32_t y = l.write_quantized(out.value, out.quant);
  lowered::Op op = make_op("matmul", node, {a, b, bias}, {y});
  set_ints(op, "b_transposed", {transposed ? 1 : 0});
  set_multipliers(op, "multiplier", ms);
  set_clamp(op, clamp_of(out.quant, out.lo, out.hi), out.quant);
  if (l.fused_activation.count(&node)) op.name += "+" + l.fused_activation.at(&node)->name();
  l.emit(std::move(op));
  return Status::ok();
}

}  // namespace

std::string gap_linear(const Lowerer& l, const Node& node) {
  if (node.op_type() == "Conv" || node.op_type() == "ConvTranspose") return conv_gap(l, node);
  return matmul_gap(l, node);
}

Status lower_linear(Lowerer& l, const Node& node) {
  if (node.op_type() == "Conv" || node.op_type() == "ConvTranspose") return lower_conv(l, node);
  return lower_matmul(l, node);
}

}  // namespace qflow::lowering

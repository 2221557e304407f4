// QDQ model builder: activation Q/DQ pairs, quantized weights and int32 biases.
#include "framework/quant/qdq_builder.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "framework/quant/opset_upgrade.h"
#include "framework/quant/scale_alignment.h"
#include "framework/interpreter/kernel_registry.h"
#include "qflow/quant/quant_math.h"

namespace qflow {

namespace {

constexpr int64_t kPerAxisOpset = 13;
constexpr int64_t k16BitOpset = 21;

bool is_graph_input(const Graph& graph, const Value* value) {
  return std::find(graph.inputs.begin(), graph.inputs.end(), value) != graph.inputs.end();
}
bool is_graph_output(const Graph& graph, const Value* value) {
  return std::find(graph.outputs.begin(), graph.outputs.end(), value) != graph.outputs.end();
}

void collect_ops(const Graph& graph, std::set<std::string>& ops) {
  for (const auto& node : graph.nodes()) {
    if (node->domain().empty() || node->domain() == "ai.onnx") ops.insert(node->op_type());
    for (const Attribute& a : node->attributes()) {
      if (a.g) collect_ops(*a.g, ops);
      for (const auto& g : a.graphs)
        if (g) collect_ops(*g, ops);
    }
  }
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

Tensor scale_tensor(const std::vector<float>& scale, bool per_axis) {
  if (!per_axis) return Tensor::scalar<float>(scale.front());
  return Tensor::from_vector<float>({static_cast<int64_t>(scale.size())}, scale);
}

Tensor zero_point_tensor(DType dtype, const std::vector<int64_t>& zero_point, bool per_axis) {
  Tensor t(dtype, per_axis ? Shape{static_cast<int64_t>(zero_point.size())} : Shape{});
  for (std::size_t i = 0; i < zero_point.size() && static_cast<int64_t>(i) < t.numel(); ++i) {
    switch (dtype) {
      case DType::Int8: t.data<int8_t>()[i] = static_cast<int8_t>(zero_point[i]); break;
      case DType::UInt8: t.data<uint8_t>()[i] = static_cast<uint8_t>(zero_point[i]); break;
      case DType::Int16: t.data<int16_t>()[i] = static_cast<int16_t>(zero_point[i]); break;
      case DType::UInt16: t.data<uint16_t>()[i] = static_cast<uint16_t>(zero_point[i]); break;
      case DType::Int32: t.data<int32_t>()[i] = static_cast<int32_t>(zero_point[i]); break;
      default: break;
    }
  }
  return t;
}

ValueType typed_like(const Value* value, DType dtype) {
  ValueType type;
  type.dtype = dtype;
  if (value && value->type) type.shape = value->type->shape;
  return type;
}

// Adds `scale` and `zero_point` initializers named after `base`; returns them.
std::pair<Value*, Value*> add_params(Graph& graph, const std::string& base, const std::vector<float>& scale,
                                     DType dtype, const std::vector<int64_t>& zero_point, bool per_axis) {
  Value* s = graph.create_unique_value(base + "_scale");
  graph.set_initializer(s, scale_tensor(scale, per_axis));
  Value* zp = graph.create_unique_value(base + "_zero_point");
  graph.set_initializer(zp, zero_point_tensor(dtype, zero_point, per_axis));
  return {s, zp};
}

class NodeNames {
 public:
  explicit NodeNames(const Graph& graph) {
    for (const auto& node : graph.nodes()) used_.insert(node->name());
  }
  std::string make(const std::string& hint) {
    std::string name = hint;
    for (int i = 1; used_.count(name); ++i) name = hint + "_" + std::to_string(i);
    used_.insert(name);
    return name;
  }

 private:
  std::set<std::string> used_;
};

Node* add_dequantize(Graph& graph, NodeNames& names, const std::string& base, Value* q, Value* scale, Value* zp,
                     int64_t axis, Value* out) {
  Node* dq = graph.add_node("DequantizeLinear", {q, scale, zp}, {out}, names.make(base + "_DequantizeLinear"));
  if (axis >= 0) dq->set_attribute(Attribute::make_int("axis", axis));
  return dq;
}

Status check_params(const std::string& name, const QuantParams& q) {
  const std::string what = "calibration table: tensor '" + name + "'";
  if (quant_range(q.dtype).max == 0)
    return invalid_input(what + ": " + std::string(dtype_name(q.dtype)) + " is not a quantized type");
  if (q.scale.empty() || q.scale.size() != q.zero_point.size())
    return invalid_input(what + ": " + std::to_string(q.scale.size()) + " scales and " +
                         std::to_string(q.zero_point.size()) + " zero points");
  if (q.scale.size() > 1 && q.axis < 0) return invalid_input(what + ": several scales but no axis");
  if (q.bits != 0 && (q.bits < 2 || q.bits >= quant_bits(q.dtype)))
    return invalid_input(what + ": a grid of " + std::to_string(q.bits) + " bits does not narrow " +
                         std::string(dtype_name(q.dtype)) + " (2 to " + std::to_string(quant_bits(q.dtype) - 1) + ")");
  if (q.bits != 0 && q.scale.size() > 1)
    return unsupported(what + ": a " + std::to_string(q.bits) + "-bit grid needs per-tensor parameters, not " +
                       std::to_string(q.scale.size()) + " scales");
  const QuantRange range = grid_range(q);
  for (std::size_t i = 0; i < q.scale.size(); ++i) {
    if (!(q.scale[i] > 0.0f) || !std::isfinite(q.scale[i]))
      return invalid_input(what + ": scale " + std::to_string(q.scale[i]) + " is not a finite positive number");
    if (q.zero_point[i] < range.min || q.zero_point[i] > range.max)
      return invalid_input(what + ": zero point " + std::to_string(q.zero_point[i]) + " is outside " +
                           std::string(dtype_name(q.dtype)));
  }
  return Status::ok();
}

// The constant 1-D float32 bias of a Conv/ConvTranspose/Gemm, or null.
const Tensor* constant_bias(const Graph& graph, const Node& node, int64_t channels) {
  if (node.op_type() == "MatMul") return nullptr;
  const Value* b = node.input(2);
  if (!b || is_graph_input(graph, b)) return nullptr;
  const Tensor* t = graph.initializer(b);
  if (!t || t->dtype() != DType::Float32 || t->rank() != 1 || t->dim(0) != channels) return nullptr;
  return t;
}

struct WeightPlan {
  Node* node = nullptr;
  QuantizedWeight weight;
  DType dtype = DType::Int8;
};

// Raises the weight scale of every channel whose bias, at scale s_in * s_w[c], would need more
// than 2^30 in int32 (PP-OCR rec has depthwise channels with weights near 1e-15 and a real
// bias), and quantizes that channel's weights again. 2^30 leaves the accumulator room for
// 65 536 products of int8 values; the raised channel's weights round to (near) 0, which they
// were worth anyway next to the bias.
void fit_bias_in_int32(const Tensor& w_float, QuantizedWeight& weight, const std::vector<float>& bias, double s_in) {
  constexpr double kBiasLimit = 0x1p30;
  const auto w_channels = static_cast<int64_t>(weight.scale.size());
  std::vector<double> needed(weight.scale.size(), 0.0);
  for (std::size_t c = 0; c < bias.size(); ++c) {
    const auto k = static_cast<std::size_t>(static_cast<int64_t>(c) % w_channels);
    needed[k] = std::max(needed[k], std::fabs(static_cast<double>(bias[c])) / (s_in * kBiasLimit));
  }
  const bool is8 = weight.values.dtype() == DType::Int8;
  const double qmax = weight.qmax;
  int64_t outer = 1, inner = w_float.numel();
  if (weight.axis >= 0) {
    outer = 1;
    for (int64_t d = 0; d < weight.axis; ++d) outer *= w_float.dim(d);
    inner = 1;
    for (int64_t d = weight.axis + 1; d < w_float.rank(); ++d) inner *= w_float.dim(d);
  }
  for (int64_t c = 0; c < w_channels; ++c) {
    const auto k = static_cast<std::size_t>(c);
    if (!(needed[k] > static_cast<double>(weight.scale[k]))) continue;
    weight.scale[k] = static_cast<float>(needed[k]);
    const double s = weight.scale[k];
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t at = (o * w_channels + c) * inner + i;
        const double q = std::clamp(round_half_even(static_cast<double>(w_float.data<float>()[at]) / s), -qmax, qmax);
        if (is8) weight.values.data<int8_t>()[at] = static_cast<int8_t>(q);
        else weight.values.data<int16_t>()[at] = static_cast<int16_t>(q);
      }
  }
}

Status quantize_node_weights(Graph& graph, NodeNames& names, const WeightPlan& plan, const QuantTable& table,
                             const std::set<std::string>& quantized_acts, const QdqOptions& options) {
  Node& node = *plan.node;
  Value* w_value = node.input(1);
  const Tensor& w_float = *graph.initializer(w_value);
  const int64_t channels = output_channels(node, w_float);

  // The bias in float (corrected when asked) and the quantized input's scale, first: a bias
  // that int32 at scale s_in * s_w cannot hold raises that channel's weight scale.
  const Tensor* bias = node.op_type() == "MatMul" ? nullptr : constant_bias(graph, node, channels);
  Value* b_value = node.op_type() == "MatMul" ? nullptr : node.input(2);
  std::vector<double> b(static_cast<std::size_t>(channels), 0.0);
  if (bias)
    for (int64_t c = 0; c < channels; ++c) b[static_cast<std::size_t>(c)] = bias->data<float>()[c];
  bool changed = false;
  if (auto it = options.bias_shift.find(node.name()); it != options.bias_shift.end() && node.op_type() != "MatMul") {
    if (b_value && !bias)
      return internal_error(node.op_type() + " '" + node.name() + "': bias correction needs a constant 1-D bias");
    if (it->second.size() != b.size())
      return internal_error(node.op_type() + " '" + node.name() + "': bias correction has " +
                            std::to_string(it->second.size()) + " channels, the node " + std::to_string(channels));
    const double beta = node.op_type() == "Gemm" ? node.attr_float("beta", 1.0f) : 1.0;
    for (std::size_t c = 0; c < b.size(); ++c) b[c] -= it->second[c] / (beta != 0.0 ? beta : 1.0);
    changed = true;
  }
  std::vector<float> b32(b.begin(), b.end());
  const Value* x = node.input(0);
  const QuantParams* in = x && quantized_acts.count(x->name()) ? &table.at(x->name()) : nullptr;
  const bool int_bias = (bias || changed) && in && in->scale.size() == 1;
  QuantizedWeight weight = plan.weight;
  if (int_bias) fit_bias_in_int32(w_float, weight, b32, in->scale.front());

  // Weight: integer initializer + DequantizeLinear.
  const std::string w_name = w_value->name();
  Value* q = graph.create_unique_value(w_name + "_quantized");
  graph.set_initializer(q, weight.values);
  const bool per_axis = weight.axis >= 0;
  auto [ws, wzp] = add_params(graph, w_name, weight.scale, plan.dtype,
                              std::vector<int64_t>(weight.scale.size(), 0), per_axis);
  Value* w_dq = graph.create_unique_value(w_name + "_dequantized");
  w_dq->type = typed_like(nullptr, DType::Float32);
  w_dq->type->shape.emplace();
  for (int64_t d : w_float.shape()) w_dq->type->shape->push_back(Dim{d, "", ""});
  add_dequantize(graph, names, w_name, q, ws, wzp, weight.axis, w_dq);
  node.set_input(1, w_dq);

  // Bias: int32 with scale s_input * s_weight[c] when the input is quantized.
  if (node.op_type() == "MatMul") return Status::ok();
  if (!bias && !changed) return Status::ok();
  const std::string b_name = b_value ? b_value->name() : node.name() + "_bias";
  if (!int_bias) {
    // The input stays float: so does the bias (corrected when asked).
    if (!changed) return Status::ok();
    Value* nb = graph.create_unique_value(b_name + (changed ? "_corrected" : ""));
    graph.set_initializer(nb, Tensor::from_vector<float>({channels}, b32));
    node.set_input(2, nb);
    return Status::ok();
  }
  const double s_in = in->scale.front();
  const int64_t w_channels = static_cast<int64_t>(weight.scale.size());
  std::vector<float> scale(static_cast<std::size_t>(channels));
  std::vector<int32_t> values(static_cast<std::size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) {
    const double s_w = weight.scale[static_cast<std::size_t>(per_axis ? c % w_channels : 0)];
    const float s = static_cast<float>(s_in * s_w);
    if (!(s >= std::numeric_limits<float>::min()))
      return invalid_input(node.op_type() + " '" + node.name() + "': bias scale " + std::to_string(s_in) + " * " +
                           std::to_string(s_w) + " underflows float32");
    const double qv = round_half_even(static_cast<double>(b32[static_cast<std::size_t>(c)]) / s);
    values[static_cast<std::size_t>(c)] = static_cast<int32_t>(std::clamp(
        qv, static_cast<double>(std::numeric_limits<int32_t>::min()), static_cast<double>(std::numeric_limits<int32_t>::max())));
    scale[static_cast<std::size_t>(c)] = s;
  }
  const bool bias_per_axis = per_axis && channels > 1;
  if (!bias_per_axis) scale.resize(1);
  Value* bq = graph.create_unique_value(b_name + "_quantized");
  graph.set_initializer(bq, Tensor::from_vector<int32_t>({channels}, values));
  auto [bs, bzp] = add_params(graph, b_name, scale, DType::Int32, std::vector<int64_t>(scale.size(), 0), bias_per_axis);
  Value* b_dq = graph.create_unique_value(b_name + "_dequantized");
  add_dequantize(graph, names, b_name, bq, bs, bzp, bias_per_axis ? 0 : -1, b_dq);
  node.set_input(2, b_dq);
  return Status::ok();
}

// Q/DQ on activation `t`; its consumers read the DQ output. A graph output keeps its name:
// the producer writes a renamed value and the DQ output takes the name.
Status quantize_activation(Graph& graph, NodeNames& names, Value* t, const QuantParams& params) {
  const bool per_axis = params.scale.size() > 1;
  const std::string name = t->name();
  auto [scale, zp] = add_params(graph, name, params.scale, params.dtype, params.zero_point, per_axis);
  Value* source = t;  // what QuantizeLinear reads
  Value* dq_out = nullptr;
  if (is_graph_output(graph, t)) {
    Node* producer = t->producer();
    if (!producer) return Status::ok();  // an input passed straight through: nothing to quantize
    // Recreate the producer with a renamed output (values keep their names in the IR).
    source = graph.create_unique_value(name + "_float");
    source->type = t->type;
    std::vector<Value*> inputs = producer->inputs();
    std::vector<Value*> outputs = producer->outputs();
    outputs[static_cast<std::size_t>(t->producer_output_index())] = source;
    const std::string op = producer->op_type(), node_name = producer->name(), domain = producer->domain();
    const std::vector<Attribute> attributes = producer->attributes();
    const std::string doc = producer->doc_string, overload = producer->overload;
    graph.remove_node(producer);
    Node* recreated = graph.add_node(op, inputs, outputs, node_name, domain);
    for (const Attribute& a : attributes) recreated->set_attribute(a);
    recreated->doc_string = doc;
    recreated->overload = overload;
    dq_out = t;
  } else {
    dq_out = graph.create_unique_value(name + "_dequantized");
    dq_out->type = t->type;
    graph.replace_all_uses(t, dq_out);
  }
  Value* q = graph.create_unique_value(name + "_quantized");
  q->type = typed_like(t, params.dtype);
  Node* qn = graph.add_node("QuantizeLinear", {source, scale, zp}, {q}, names.make(name + "_QuantizeLinear"));
  if (per_axis) qn->set_attribute(Attribute::make_int("axis", params.axis));
  if (params.bits == 0) {
    add_dequantize(graph, names, name, q, scale, zp, per_axis ? params.axis : -1, dq_out);
    return Status::ok();
  }
  // A narrowed grid: QuantizeLinear saturates to the container only, so a Clip after the
  // DequantizeLinear bounds the result to the grid's ends, computed as DequantizeLinear
  // computes them: (float32(q) - float32(zp)) * scale in float32 (q - zp is an integer below
  // 2^17, exact in float32, and double's exact product rounded once to float32 is the
  // float32 product). DequantizeLinear is non-decreasing in q (scale > 0), so
  // clip(dq(q), dq(qmin), dq(qmax)) = dq(clamp(q, qmin, qmax)): bit for bit the fake quant
  // with the narrowed range, in any runtime that implements both ops as ONNX specifies.
  Value* full = graph.create_unique_value(name + "_dequantized_full");
  full->type = t->type;
  add_dequantize(graph, names, name, q, scale, zp, -1, full);
  const QuantRange grid = grid_range(params);
  const double s = params.scale.front();
  const auto z = static_cast<double>(params.zero_point.front());
  Value* lo = graph.create_unique_value(name + "_clip_min");
  graph.set_initializer(lo, Tensor::scalar<float>(static_cast<float>((static_cast<double>(grid.min) - z) * s)));
  Value* hi = graph.create_unique_value(name + "_clip_max");
  graph.set_initializer(hi, Tensor::scalar<float>(static_cast<float>((static_cast<double>(grid.max) - z) * s)));
  graph.add_node("Clip", {full, lo, hi}, {dq_out}, names.make(name + "_Clip"));
  return Status::ok();
}

// Whether a node that quantizes (its resolved spec) reads `value`.
bool read_by_quantized_node(const Value& value, const QuantConfig& config) {
  for (const auto& [user, index] : value.uses())
    if (config.resolve(user->name(), user->op_type()).quantize) return true;
  return false;
}

}  // namespace

Expected<int64_t> weight_channel_axis(const Node& node, const Tensor& weight) {
  const std::string& op = node.op_type();
  const std::string what = op + " '" + node.name() + "': weight of shape " + shape_to_string(weight.shape());
  if (op == "Conv" || op == "ConvTranspose") {
    if (weight.rank() < 3) return invalid_input(what + " has rank below 3");
    return op == "Conv" ? 0 : 1;
  }
  if (op == "Gemm") {
    if (weight.rank() != 2) return invalid_input(what + " is not 2-D");
    return node.attr_int("transB", 0) ? 0 : 1;
  }
  if (op == "MatMul") {
    if (weight.rank() < 2) return invalid_input(what + " has no output-channel axis");
    return weight.rank() - 1;
  }
  return invalid_input(op + " '" + node.name() + "' has no quantizable weight");
}

Expected<QuantizedWeight> quantize_weight(const Tensor& weight, int64_t axis, DType dtype, bool reduce_range, int bits) {
  if (weight.dtype() != DType::Float32) return invalid_input("weight is " + std::string(dtype_name(weight.dtype())) + ", not float");
  if (dtype != DType::Int8 && dtype != DType::Int16)
    return invalid_input("weights are quantized to int8 or int16, not " + std::string(dtype_name(dtype)));
  const int container_bits = dtype == DType::Int8 ? 8 : 16;
  if (bits != 0 && (bits < 2 || bits > container_bits))
    return invalid_input(std::to_string(bits) + "-bit weights do not fit " + std::string(dtype_name(dtype)) +
                         " (2 to " + std::to_string(container_bits) + " bits)");
  if (axis >= weight.rank()) return invalid_input("weight axis " + std::to_string(axis) + " is out of range");
  const double qmax = weight_qmax(dtype, reduce_range, bits);
  int64_t outer = 1, channels = 1, inner = weight.numel();
  if (axis >= 0) {
    channels = weight.dim(axis);
    outer = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= weight.dim(d);
    inner = 1;
    for (int64_t d = axis + 1; d < weight.rank(); ++d) inner *= weight.dim(d);
  }
  const float* w = weight.data<float>();
  std::vector<double> max_abs(static_cast<std::size_t>(channels), 0.0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t i = 0; i < inner; ++i) {
        const float v = w[(o * channels + c) * inner + i];
        if (!std::isfinite(v)) return invalid_input("weight holds a non-finite value");
        max_abs[static_cast<std::size_t>(c)] = std::max(max_abs[static_cast<std::size_t>(c)], std::fabs(static_cast<double>(v)));
      }
  QuantizedWeight out;
  out.axis = axis;
  out.qmax = qmax;
  // A channel of (near-)zero weights gets a floor scale, 2^-60: its values round to 0 anyway,
  // and the bias scale s_in * s_w must stay a normal float32 (PP-OCR rec has channels
  // whose largest weight is ~1e-30).
  constexpr double kMinWeightScale = 0x1p-60;
  for (double m : max_abs) out.scale.push_back(static_cast<float>(std::max((m > 0.0 ? m : 1.0) / qmax, kMinWeightScale)));
  out.values = Tensor(dtype, weight.shape());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c) {
      const double s = out.scale[static_cast<std::size_t>(c)];
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t k = (o * channels + c) * inner + i;
        const double q = std::clamp(round_half_even(static_cast<double>(w[k]) / s), -qmax, qmax);
        if (dtype == DType::Int8) out.values.data<int8_t>()[k] = static_cast<int8_t>(q);
        else out.values.data<int16_t>()[k] = static_cast<int16_t>(q);
      }
    }
  return out;
}

Tensor dequantize_weight(const QuantizedWeight& weight) {
  Tensor out(DType::Float32, weight.values.shape());
  int64_t channels = 1, inner = weight.values.numel();
  if (weight.axis >= 0) {
    channels = weight.values.dim(weight.axis);
    inner = 1;
    for (int64_t d = weight.axis + 1; d < weight.values.rank(); ++d) inner *= weight.values.dim(d);
  }
  const bool is8 = weight.values.dtype() == DType::Int8;
  for (int64_t k = 0; k < out.numel(); ++k) {
    const float s = weight.scale[static_cast<std::size_t>((k / inner) % channels)];
    const float q = is8 ? static_cast<float>(weight.values.data<int8_t>()[k]) : static_cast<float>(weight.values.data<int16_t>()[k]);
    out.data<float>()[k] = q * s;  // as DequantizeLinear: (q - 0) * s in float32
  }
  return out;
}

const Tensor* quantizable_weight(const Graph& graph, const Node& node, const QuantSpec& spec) {
  static const std::set<std::string> kOps = {"Conv", "ConvTranspose", "Gemm", "MatMul"};
  if (!spec.quantize || !node.domain().empty() || !kOps.count(node.op_type())) return nullptr;
  const Value* w = node.input(1);
  if (!w || is_graph_input(graph, w)) return nullptr;
  const Tensor* t = graph.initializer(w);
  if (!t || t->dtype() != DType::Float32) return nullptr;
  if (!weight_channel_axis(node, *t)) return nullptr;
  return t;
}

int64_t output_channels(const Node& node, const Tensor& weight) {
  if (node.op_type() == "Conv") return weight.dim(0);
  if (node.op_type() == "ConvTranspose") return weight.dim(1) * node.attr_int("group", 1);
  if (node.op_type() == "Gemm") return node.attr_int("transB", 0) ? weight.dim(0) : weight.dim(1);
  return weight.dim(weight.rank() - 1);
}

bool bias_correction_applies(const Graph& graph, const Node& node, const Tensor& weight) {
  if (node.op_type() != "Conv" && node.op_type() != "Gemm") return false;
  if (!node.input(2)) return true;
  return constant_bias(graph, node, output_channels(node, weight)) != nullptr;
}

bool quantizes_activation(const Graph& graph, const Value& value, const QuantConfig& config) {
  // A float producer's output is still quantized where a quantized node reads it: that node
  // runs on the accelerator, which takes integers (a float segment hands over through Q).
  // A graph input has no producer to run quantized: it is quantized only for such readers,
  // so an input that only float nodes read (a recurrent state going to a float LSTM) stays
  // exact.
  const bool produced_quantized = value.producer() && tensor_spec(value, config).quantize;
  if (!produced_quantized && !read_by_quantized_node(value, config)) return false;
  if (value.uses().empty() && !is_graph_output(graph, &value)) return false;
  return value.producer() || !is_graph_output(graph, &value);
}

QuantSpec tensor_spec(const Value& value, const QuantConfig& config) {
  if (const Node* producer = value.producer()) return config.resolve(producer->name(), producer->op_type());
  return config.resolve("", "");
}

std::map<std::string, QuantSpec> tensor_specs(const Model* model, const std::map<std::string, TensorStatistics>& statistics,
                                              const QuantConfig* config) {
  const QuantConfig defaults;
  const QuantConfig& cfg = config ? *config : defaults;
  std::map<std::string, QuantSpec> specs;
  for (const auto& [name, stats] : statistics) {
    (void)stats;
    const Value* value = model ? model->graph->find_value(name) : nullptr;
    specs[name] = value ? tensor_spec(*value, cfg) : cfg.resolve("", "");
  }
  return specs;
}

Status ensure_quant_opset(Model& model, bool needs_16_bit) {
  const int64_t current = model.opset("");
  if (current < kPerAxisOpset)
    return unsupported("the model imports opset " + std::to_string(current) +
                       " of the default ONNX domain; QDQ quantization needs opset 13 or later (per-axis "
                       "QuantizeLinear/DequantizeLinear): import it with import-onnx option min-opset = 13");
  if (!needs_16_bit || current >= k16BitOpset) return Status::ok();
  // The adapters only add ops the interpreter runs at every opset (Shape, Div, Concat,
  // Unsqueeze, Expand, Reshape), so the model's own ops are the ones to check.
  std::set<std::string> ops;
  collect_ops(*model.graph, ops);
  std::vector<std::string> missing;
  for (const std::string& op : ops)
    if (!KernelRegistry::builtin().supports("", op, k16BitOpset)) missing.push_back(op);
  const std::vector<std::string> blockers = opset_upgrade_blockers(model, k16BitOpset);
  if (!blockers.empty() || !missing.empty()) {
    std::string why;
    for (const std::string& b : blockers) why += (why.empty() ? "" : "; ") + b;
    if (!missing.empty()) why += (why.empty() ? "" : "; ") + ("the interpreter has no opset-21 kernel for " + join(missing));
    return unsupported("16-bit QuantizeLinear/DequantizeLinear need opset 21, the model imports opset " +
                       std::to_string(current) + " and cannot be raised: " + why);
  }
  return upgrade_opset(model, k16BitOpset);
}

Status build_qdq_model(Model& model, const QuantTable& calibrated, const QuantConfig* config, const QdqOptions& options) {
  const QuantConfig defaults;
  const QuantConfig& cfg = config ? *config : defaults;
  Graph& graph = *model.graph;
  for (const auto& [name, params] : calibrated) {
    if (!graph.find_value(name))
      return not_found("calibration table: tensor '" + name + "' is not in the model");
    QFLOW_RETURN_IF_ERROR(check_params(name, params));
  }
  QFLOW_ASSIGN_OR_RETURN(const QuantTable table, align_scales(graph, calibrated, config));

  // Activations to quantize: float tensors computed by the model or fed to it.
  std::vector<Value*> activations;
  std::set<std::string> quantized_acts;
  bool needs_16_bit = false;
  for (const auto& [name, params] : table) {
    Value* t = graph.find_value(name);
    if (graph.is_initializer(t)) continue;
    if (!t->producer() && !is_graph_input(graph, t)) continue;
    if (t->type && t->type->dtype != DType::Undefined && t->type->dtype != DType::Float32)
      return invalid_input("calibration table: tensor '" + name + "' is " + std::string(dtype_name(t->type->dtype)) +
                           ", only float tensors are quantized");
    if (!quantizes_activation(graph, *t, cfg)) continue;
    activations.push_back(t);
    quantized_acts.insert(name);
    needs_16_bit = needs_16_bit || is_16bit_quant(params.dtype);
  }

  std::vector<WeightPlan> weights;
  if (options.weights) {
    QFLOW_ASSIGN_OR_RETURN(std::vector<Node*> order, graph.topological_order());
    for (Node* node : order) {
      const QuantSpec spec = cfg.resolve(node->name(), node->op_type());
      const Tensor* w = quantizable_weight(graph, *node, spec);
      if (!w) continue;
      if (spec.weight_dtype != DType::Int8 && spec.weight_dtype != DType::Int16)
        return invalid_input(node->op_type() + " '" + node->name() + "': weight type " +
                             std::string(dtype_name(spec.weight_dtype)) + " is not int8 or int16");
      QFLOW_ASSIGN_OR_RETURN(int64_t axis, weight_channel_axis(*node, *w));
      const int64_t w_axis = spec.per_channel ? axis : -1;
      const WeightQuantCache::Key key{node->input(1)->name(), w_axis, spec.weight_dtype, spec.reduce_range, spec.weight_bits};
      const QuantizedWeight* cached = nullptr;
      if (options.weight_cache)
        if (auto it = options.weight_cache->weights.find(key); it != options.weight_cache->weights.end()) cached = &it->second;
      if (cached) {
        // Its own values: fitting a bias in int32 rewrites channels in place.
        QuantizedWeight copy = *cached;
        copy.values = copy.values.clone();
        weights.push_back({node, std::move(copy), spec.weight_dtype});
      } else {
        auto quantized = quantize_weight(*w, w_axis, spec.weight_dtype, spec.reduce_range, spec.weight_bits);
        if (!quantized) return quantized.status().with_context(node->op_type() + " '" + node->name() + "'");
        if (options.weight_cache) {
          QuantizedWeight kept = *quantized;
          kept.values = kept.values.clone();
          options.weight_cache->weights.emplace(key, std::move(kept));
        }
        weights.push_back({node, std::move(*quantized), spec.weight_dtype});
      }
      needs_16_bit = needs_16_bit || is_16bit_quant(spec.weight_dtype);
    }
  }
  for (const auto& [name, shift] : options.bias_shift) {
    (void)shift;
    if (std::none_of(weights.begin(), weights.end(), [&](const WeightPlan& p) { return p.node->name() == name; }))
      return internal_error("bias correction names node '" + name + "', whose weight is not quantized");
  }

  QFLOW_RETURN_IF_ERROR(ensure_quant_opset(model, needs_16_bit));

  std::set<const Value*> unused_before;
  for (const Value* v : graph.initializer_order())
    if (v->uses().empty()) unused_before.insert(v);
  NodeNames names(graph);
  for (const WeightPlan& plan : weights)
    QFLOW_RETURN_IF_ERROR(quantize_node_weights(graph, names, plan, table, quantized_acts, options));
  for (Value* t : activations) QFLOW_RETURN_IF_ERROR(quantize_activation(graph, names, t, table.at(t->name())));

  // Float weights and biases nothing reads any more (initializers unused before stay).
  std::vector<Value*> unused;
  for (Value* v : graph.initializer_order())
    if (v->uses().empty() && !unused_before.count(v) && !is_graph_input(graph, v) && !is_graph_output(graph, v))
      unused.push_back(v);
  for (Value* v : unused) graph.remove_initializer(v);
  graph.prune_unused_values();

  // ONNX wants nodes in execution order; the insertions above appended at the end.
  QFLOW_ASSIGN_OR_RETURN(std::vector<Node*> order, graph.topological_order());
  graph.move_nodes_to_end(order);
  return graph.validate();
}

}  // namespace qflow

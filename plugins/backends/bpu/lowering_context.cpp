// Lowerer: tensor bookkeeping, boundary conversions and the helpers every lowering rule uses.
#include "lowering_context.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace qflow::lowering {

namespace {

bool default_domain(const Node& node) { return node.domain().empty() || node.domain() == "ai.onnx"; }

void append_le(std::vector<uint8_t>& out, const void* data, std::size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  out.insert(out.end(), p, p + bytes);  // the host is little-endian, like the format
}

}  // namespace

fx::QType qtype_of(lowered::ElemType type) {
  switch (type) {
    case lowered::ElemType::u8: return fx::QType::UInt8;
    case lowered::ElemType::i16: return fx::QType::Int16;
    case lowered::ElemType::u16: return fx::QType::UInt16;
    default: return fx::QType::Int8;
  }
}

fx::QParams qparams_of(const ActivationQuant& quant) { return {quant.scale, quant.zero_point, qtype_of(quant.type)}; }

lowered::Quant quant_of(const ActivationQuant& quant) { return {quant.scale, quant.zero_point}; }

std::string node_text(const Node& node) {
  const std::string op = default_domain(node) ? node.op_type() : node.domain() + "::" + node.op_type();
  return op + " '" + node.name() + "'";
}

std::string no_lowering(const Node& node, const std::string& detail) {
  return "no integer lowering for " + node.op_type() + (detail.empty() ? std::string() : " " + detail);
}

lowered::Op make_op(const std::string& type, const Node& node, std::vector<int32_t> inputs, std::vector<int32_t> outputs) {
  lowered::Op op;
  op.type = type;
  op.name = node.name();
  op.inputs = std::move(inputs);
  op.outputs = std::move(outputs);
  return op;
}

void set_ints(lowered::Op& op, const std::string& name, std::vector<int64_t> values) {
  lowered::Attribute a;
  a.name = name;
  a.ints = std::move(values);
  op.attributes.push_back(std::move(a));
}

void set_strings(lowered::Op& op, const std::string& name, std::vector<std::string> values) {
  lowered::Attribute a;
  a.name = name;
  a.strings = std::move(values);
  op.attributes.push_back(std::move(a));
}

void set_multiplier(lowered::Op& op, const std::string& name, fx::Multiplier m) {
  set_ints(op, name, {m.mantissa, m.shift});
}

void set_multipliers(lowered::Op& op, const std::string& name, const std::vector<fx::Multiplier>& ms) {
  std::vector<int64_t> mantissa, shift;
  for (const fx::Multiplier& m : ms) {
    mantissa.push_back(m.mantissa);
    shift.push_back(m.shift);
  }
  set_ints(op, name + "_mantissa", std::move(mantissa));
  set_ints(op, name + "_shift", std::move(shift));
}

fx::Clamp clamp_of(const ActivationQuant& quant, double lo, double hi) {
  const fx::QParams p = qparams_of(quant);
  const fx::Range r = fx::range_of(p.type);
  fx::Clamp c{r.min, r.max};
  // Q(clip(x, lo, hi)) == clamp(Q(x), Q(lo), Q(hi)): quantization is monotone.
  if (std::isfinite(lo)) c.min = std::max(c.min, fx::quantize(lo, p));
  if (std::isfinite(hi)) c.max = std::min(c.max, fx::quantize(hi, p));
  return c;
}

void set_clamp(lowered::Op& op, const fx::Clamp& clamp, const ActivationQuant& quant) {
  const fx::Range r = fx::range_of(qtype_of(quant.type));
  set_ints(op, "clamp", {std::max(clamp.min, r.min), std::min(clamp.max, r.max)});
}

bool activation_bounds(const Lowerer& l, const Node& node, double& lo, double& hi) {
  lo = -std::numeric_limits<double>::infinity();
  hi = std::numeric_limits<double>::infinity();
  if (node.op_type() == "Relu") {
    lo = 0.0;
    return true;
  }
  if (node.op_type() != "Clip") return false;
  if (l.opset() < 11) {
    lo = node.attr_float("min", -std::numeric_limits<float>::infinity());
    hi = node.attr_float("max", std::numeric_limits<float>::infinity());
    return true;
  }
  for (std::size_t i = 1; i <= 2; ++i) {
    const Value* v = node.input(i);
    if (!v) continue;
    const Tensor* t = l.constant(v);
    if (!t || t->numel() != 1 || !is_float(t->dtype())) return false;
    (i == 1 ? lo : hi) = t->to_doubles().front();
  }
  return true;
}

const ActivationQuant* Lowerer::quant(const Value* v) const {
  if (!v) return nullptr;
  auto it = qdq.activations.find(v->name());
  return it == qdq.activations.end() ? nullptr : &it->second;
}

Shape Lowerer::shape(const Value* v) const {
  if (const Tensor* t = constant(v)) return t->shape();
  if (v && v->type)
    if (auto s = v->type->static_shape()) return *s;
  return {};
}

const Tensor* Lowerer::constant(const Value* v) const {
  if (!v) return nullptr;
  if (const Tensor* t = graph.initializer(v)) return t;
  const Node* p = v->producer();
  if (p && p->op_type() == "Constant" && default_domain(*p))
    if (const Attribute* a = p->find_attribute("value"); a && a->type == AttributeType::Tensor) return &a->t;
  return nullptr;
}

const QuantizedConstant* Lowerer::quantized_constant(const Value* v) const {
  if (!v) return nullptr;
  auto it = qdq.constants.find(v->name());
  return it == qdq.constants.end() ? nullptr : &it->second;
}

bool Lowerer::on_bpu(const Node* node) const {
  auto it = subgraph_of.find(node);
  return it != subgraph_of.end() && it->second >= 0;
}

int32_t Lowerer::add_tensor(lowered::Tensor tensor) {
  std::string name = tensor.name;
  for (int k = 1; names_.count(name); ++k) name = tensor.name + "_" + std::to_string(k);
  names_.insert(name);
  tensor.name = name;
  model.tensors.push_back(std::move(tensor));
  return static_cast<int32_t>(model.tensors.size() - 1);
}

std::string Lowerer::float_name(const Value* v) const {
  auto it = qdq.output_names.find(v->name());
  if (it != qdq.output_names.end()) return it->second;
  const Node* p = v->producer();
  const bool float_origin = !p || !on_bpu(p);
  return float_origin ? v->name() : v->name() + "_dequantized";
}

int32_t Lowerer::write_quantized(const Value* v, const ActivationQuant& q) {
  lowered::Tensor t;
  t.name = v->name();
  t.type = q.type;
  t.shape = shape(v);
  t.quant = quant_of(q);
  const int32_t index = add_tensor(std::move(t));
  quantized_[v->name()] = index;
  written_in[index] = current_segment;
  return index;
}

int32_t Lowerer::write_quantized(const Value* v) { return write_quantized(v, *quant(v)); }

int32_t Lowerer::temporary(const std::string& hint, const ActivationQuant& q, const Shape& s) {
  lowered::Tensor t;
  t.name = hint;
  t.type = q.type;
  t.shape = s;
  t.quant = quant_of(q);
  const int32_t index = add_tensor(std::move(t));
  written_in[index] = current_segment;
  return index;
}

Expected<int32_t> Lowerer::read_quantized(const Value* v) {
  if (auto it = quantized_.find(v->name()); it != quantized_.end()) return it->second;
  const ActivationQuant* q = quant(v);
  if (!q) return invalid_input("lowering: value '" + v->name() + "' has no quantization for the BPU");
  QFLOW_ASSIGN_OR_RETURN(int32_t x, read_float(v));
  lowered::Tensor t;
  t.name = v->name() + "_quantized";
  t.type = q->type;
  t.shape = shape(v);
  t.quant = quant_of(*q);
  const int32_t y = add_tensor(std::move(t));
  quantized_[v->name()] = y;
  written_in[y] = current_segment;
  lowered::Op op;
  op.type = "quantize";
  op.name = v->name() + "_quantize";
  op.inputs = {x};
  op.outputs = {y};
  emit(std::move(op));
  return y;
}

int32_t Lowerer::write_float(const Value* v) {
  lowered::Tensor t;
  t.name = float_name(v);
  t.type = v->type ? elem_type_of(v->type->dtype) : lowered::ElemType::f32;
  if (lowered::is_quantized(t.type)) t.type = lowered::ElemType::f32;
  t.shape = shape(v);
  const int32_t index = add_tensor(std::move(t));
  float_[v->name()] = index;
  written_in[index] = current_segment;
  return index;
}

Expected<int32_t> Lowerer::read_float(const Value* v) {
  if (auto it = float_.find(v->name()); it != float_.end()) return it->second;
  auto q = quantized_.find(v->name());
  if (q == quantized_.end()) return invalid_input("lowering: value '" + v->name() + "' is read before it is computed");
  lowered::Tensor t;
  t.name = float_name(v);
  t.type = lowered::ElemType::f32;
  t.shape = shape(v);
  const int32_t y = add_tensor(std::move(t));
  float_[v->name()] = y;
  written_in[y] = current_segment;
  lowered::Op op;
  op.type = "dequantize";
  op.name = v->name() + "_dequantize";
  op.inputs = {q->second};
  op.outputs = {y};
  emit(std::move(op));
  return y;
}

Expected<int32_t> Lowerer::integer_constant(const Value* v) {
  const std::string key = "int:" + v->name();
  if (auto it = constants_.find(key); it != constants_.end()) return it->second;
  const QuantizedConstant* c = quantized_constant(v);
  if (!c) return invalid_input("lowering: '" + v->name() + "' is not a quantized constant");
  lowered::Tensor t;
  t.name = v->name();
  t.type = elem_type_of(c->values.dtype());
  t.shape = c->values.shape();
  if (lowered::is_quantized(t.type)) t.quant = {c->scales.front(), 0};
  t.constant = true;
  append_le(t.data, c->values.raw_data(), c->values.nbytes());
  const int32_t index = add_tensor(std::move(t));
  constants_[key] = index;
  return index;
}

Expected<int32_t> Lowerer::cpu_constant(const Value* v) {
  const std::string key = "cpu:" + v->name();
  if (auto it = constants_.find(key); it != constants_.end()) return it->second;
  lowered::Tensor t;
  t.constant = true;
  if (const QuantizedConstant* c = quantized_constant(v)) {
    t.name = c->dequantized_name.empty() ? v->name() + "_dequantized" : c->dequantized_name;
    t.type = lowered::ElemType::f32;
    t.shape = c->values.shape();
    const std::vector<int64_t> q = c->values.to_int64s();
    int64_t inner = 1, channels = 1;
    if (c->axis >= 0) {
      channels = c->values.dim(c->axis);
      for (int64_t d = c->axis + 1; d < c->values.rank(); ++d) inner *= c->values.dim(d);
    }
    for (std::size_t i = 0; i < q.size(); ++i) {
      const std::size_t ch = c->axis >= 0 ? static_cast<std::size_t>((static_cast<int64_t>(i) / inner) % channels) : 0;
      const float f = static_cast<float>(static_cast<double>(static_cast<float>(c->scales[ch])) * static_cast<double>(q[i]));
      append_le(t.data, &f, sizeof f);
    }
  } else {
    const Tensor* src = constant(v);
    if (!src) return invalid_input("lowering: '" + v->name() + "' is not a constant");
    t.name = v->name();
    t.shape = src->shape();
    if (src->dtype() == DType::Float32) {
      t.type = lowered::ElemType::f32;
      append_le(t.data, src->raw_data(), src->nbytes());
    } else if (src->dtype() == DType::Int64 || src->dtype() == DType::Int32) {
      t.type = lowered::ElemType::i64;
      for (int64_t x : src->to_int64s()) append_le(t.data, &x, sizeof x);
    } else if (is_float(src->dtype())) {
      t.type = lowered::ElemType::f32;
      for (double x : src->to_doubles()) {
        const float f = static_cast<float>(x);
        append_le(t.data, &f, sizeof f);
      }
    } else {
      return invalid_input("lowering: constant '" + v->name() + "' is " + std::string(dtype_name(src->dtype())) +
                           "; CPU segments take float and int64 constants");
    }
  }
  const int32_t index = add_tensor(std::move(t));
  constants_[key] = index;
  return index;
}

int32_t Lowerer::int32_constant(const std::string& hint, const std::vector<int32_t>& values) {
  lowered::Tensor t;
  t.name = hint;
  t.type = lowered::ElemType::i32;
  t.shape = {static_cast<int64_t>(values.size())};
  t.constant = true;
  append_le(t.data, values.data(), values.size() * sizeof(int32_t));
  return add_tensor(std::move(t));
}

void Lowerer::emit(lowered::Op op) {
  std::stable_sort(op.attributes.begin(), op.attributes.end(),
                   [](const lowered::Attribute& a, const lowered::Attribute& b) { return a.name < b.name; });
  model.segments[current_segment].ops.push_back(std::move(op));
}

Expected<fx::Multiplier> Lowerer::multiplier(const Node& node, double real, const std::string& what) const {
  if (platform.power_of_two_scales) {
    int shift = 0;
    if (Status s = fx::make_pot_shift(real, shift); !s.is_ok())
      return invalid_input(node_text(node) + ": " + what + " " + std::to_string(real) + " is not a power of two (" +
                           platform.name + " needs power-of-two scales): " + s.message());
  }
  fx::Multiplier m;
  if (Status s = fx::make_multiplier(real, m); !s.is_ok())
    return invalid_input(node_text(node) + ": " + what + " " + std::to_string(real) + ": " + s.message());
  return m;
}

Status Lowerer::node_error(const Node& node, const std::string& message) const {
  return invalid_input(node_text(node) + ": " + message);
}

Status emit_requantize(Lowerer& l, const Node& node, int32_t x, const ActivationQuant& from, int32_t y,
                       const ActivationQuant& to, double lo, double hi) {
  QFLOW_ASSIGN_OR_RETURN(fx::Multiplier m, l.multiplier(node, from.scale / to.scale, "requantize multiplier"));
  lowered::Op op = make_op("requantize", node, {x}, {y});
  set_multiplier(op, "multiplier", m);
  set_clamp(op, clamp_of(to, lo, hi), to);
  l.emit(std::move(op));
  return Status::ok();
}

bool same_quant(const ActivationQuant& a, const ActivationQuant& b) {
  return a.type == b.type && a.scale == b.scale && a.zero_point == b.zero_point;
}

// Writes `out` from an op computing at the input's quantization: directly when the two
// quantizations are equal, else through a temporary and a requantize.
Status emit_at_input_quant(Lowerer& l, const Node& node, lowered::Op op, int32_t x) {
  const Value* in = node.input(0);
  const Value* out = node.output(0);
  const ActivationQuant& xq = *l.quant(in);
  const ActivationQuant& yq = *l.quant(out);
  op.inputs.insert(op.inputs.begin(), x);
  if (same_quant(xq, yq)) {
    op.outputs = {l.write_quantized(out)};
    l.emit(std::move(op));
    return Status::ok();
  }
  const int32_t t = l.temporary(out->name() + "_at_input_scale", xq, l.shape(out));
  op.outputs = {t};
  l.emit(std::move(op));
  const int32_t y = l.write_quantized(out);
  return emit_requantize(l, node, t, xq, y, yq, -std::numeric_limits<double>::infinity(),
                         std::numeric_limits<double>::infinity());
}

}  // namespace qflow::lowering

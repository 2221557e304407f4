// QdqModel: reads the Q/DQ pairs, integer weights and biases of a PTQ model and builds its float view.
#include "qdq_model.h"

#include <algorithm>
#include <set>

namespace qflow {

namespace {

bool default_domain(const Node& node) { return node.domain().empty() || node.domain() == "ai.onnx"; }
bool is_q(const Node& node) { return node.op_type() == "QuantizeLinear" && default_domain(node); }
bool is_dq(const Node& node) { return node.op_type() == "DequantizeLinear" && default_domain(node); }

const Tensor* constant_of(const Graph& graph, const Value* value) {
  if (!value) return nullptr;
  if (const Tensor* t = graph.initializer(value)) return t;
  const Node* producer = value->producer();
  if (producer && producer->op_type() == "Constant" && default_domain(*producer))
    if (const Attribute* a = producer->find_attribute("value"); a && a->type == AttributeType::Tensor) return &a->t;
  return nullptr;
}

std::string dims_text(const ValueType* type) {
  if (!type || !type->shape) return "unknown";
  std::string out = "[";
  for (std::size_t i = 0; i < type->shape->size(); ++i) {
    const Dim& d = (*type->shape)[i];
    out += (i ? ", " : "") + (d.value ? std::to_string(*d.value) : (d.param.empty() ? std::string("?") : d.param));
  }
  return out + "]";
}

// Whether a QuantizeLinear reads one of the node's outputs.
bool output_quantized(const Node& node) {
  for (const Value* out : node.outputs())
    if (out)
      for (const auto& [user, index] : out->uses())
        if (is_q(*user)) return true;
  return false;
}

std::string ptq_hint(const Graph& graph) {
  return "lowering needs the PTQ model (" + (graph.name.empty() ? std::string("<name>") : graph.name) + "_ptq_model.onnx): ";
}

const ValueType* best_type(std::initializer_list<const Value*> candidates) {
  const ValueType* fallback = nullptr;
  for (const Value* v : candidates) {
    if (!v || !v->type) continue;
    if (v->type->static_shape()) return &*v->type;
    if (!fallback) fallback = &*v->type;
  }
  return fallback;
}

// The Q node's parameters: scalar scale, zero point (absent: uint8 0), no axis.
Expected<ActivationQuant> read_activation_quant(const Graph& graph, const Node& q) {
  const std::string what = "QuantizeLinear '" + q.name() + "'";
  const Tensor* scale = constant_of(graph, q.input(1));
  if (!scale || scale->numel() != 1 || !is_float(scale->dtype()))
    return invalid_input(what + ": the scale is not a constant scalar (per-axis activation quantization cannot be lowered)");
  ActivationQuant quant;
  quant.scale = scale->to_doubles().front();
  if (!(quant.scale > 0.0)) return invalid_input(what + ": scale " + std::to_string(quant.scale) + " is not positive");
  const Tensor* zp = constant_of(graph, q.input(2));
  if (q.input(2) && !zp) return invalid_input(what + ": the zero point is not a constant");
  DType type = zp ? zp->dtype() : DType::UInt8;
  if (zp && zp->numel() != 1) return invalid_input(what + ": the zero point is not a scalar");
  quant.zero_point = zp ? static_cast<int32_t>(zp->to_int64s().front()) : 0;
  switch (type) {
    case DType::Int8: quant.type = lowered::ElemType::i8; break;
    case DType::UInt8: quant.type = lowered::ElemType::u8; break;
    case DType::Int16: quant.type = lowered::ElemType::i16; break;
    case DType::UInt16: quant.type = lowered::ElemType::u16; break;
    default: return invalid_input(what + ": zero point type " + std::string(dtype_name(type)) + " is not int8, uint8, int16 or uint16");
  }
  return quant;
}

Expected<QuantizedConstant> read_constant(const Graph& graph, const Node& dq, const Tensor& values) {
  const std::string what = "DequantizeLinear '" + dq.name() + "'";
  if (values.dtype() != DType::Int8 && values.dtype() != DType::Int16 && values.dtype() != DType::Int32)
    return invalid_input(what + ": constant '" + dq.input(0)->name() + "' is " + std::string(dtype_name(values.dtype())) +
                         ", not int8, int16 or int32");
  const Tensor* scale = constant_of(graph, dq.input(1));
  if (!scale || !is_float(scale->dtype()) || scale->numel() < 1) return invalid_input(what + ": the scale is not a constant");
  QuantizedConstant c;
  c.values = values;
  c.scales = scale->to_doubles();
  if (const Tensor* zp = constant_of(graph, dq.input(2))) c.zero_points = zp->to_int64s();
  c.zero_points.resize(c.scales.size(), 0);
  for (int64_t z : c.zero_points)
    if (z != 0) return invalid_input(what + ": weights and biases must be symmetric (zero point " + std::to_string(z) + ")");
  if (c.scales.size() > 1) {
    c.axis = dq.attr_int("axis", 1);
    if (c.axis < 0) c.axis += values.rank();
    if (c.axis < 0 || c.axis >= values.rank() || values.dim(c.axis) != static_cast<int64_t>(c.scales.size()))
      return invalid_input(what + ": " + std::to_string(c.scales.size()) + " scales do not match axis " +
                           std::to_string(dq.attr_int("axis", 1)) + " of shape " + shape_to_string(values.shape()));
  }
  c.dequantized_name = dq.output(0) ? dq.output(0)->name() : std::string();
  return c;
}

DType dtype_for(lowered::ElemType type) {
  switch (type) {
    case lowered::ElemType::i8: return DType::Int8;
    case lowered::ElemType::u8: return DType::UInt8;
    case lowered::ElemType::i16: return DType::Int16;
    case lowered::ElemType::u16: return DType::UInt16;
    default: return DType::Undefined;
  }
}

}  // namespace

lowered::ElemType elem_type_of(DType dtype) {
  switch (dtype) {
    case DType::Int8: return lowered::ElemType::i8;
    case DType::UInt8: return lowered::ElemType::u8;
    case DType::Int16: return lowered::ElemType::i16;
    case DType::UInt16: return lowered::ElemType::u16;
    case DType::Int32: return lowered::ElemType::i32;
    case DType::Int64: return lowered::ElemType::i64;
    default: return lowered::ElemType::f32;
  }
}

Expected<QdqModel> read_qdq_model(const Model& ptq) {
  if (!ptq.graph) return invalid_input("lowering: the model has no graph");
  const Graph& graph = *ptq.graph;
  QFLOW_ASSIGN_OR_RETURN(std::vector<Node*> order, graph.topological_order());
  const std::string hint = ptq_hint(graph);

  QdqModel out;
  // Pass 1: Q nodes (activation -> quant) and DQ nodes (DQ output -> view name).
  std::map<const Value*, const Value*> q_source;         // Q output -> quantized activation
  std::map<const Value*, std::string> view_name;         // DQ output -> view value name
  std::map<std::string, const Value*> dq_of_activation;  // activation -> one DQ output (for its type)
  std::map<std::string, const Value*> q_of_activation;
  for (const Node* node : order) {
    if (is_q(*node)) {
      const Value* x = node->input(0);
      if (!x || !node->output(0)) return invalid_input("QuantizeLinear '" + node->name() + "' has no input or output");
      QFLOW_ASSIGN_OR_RETURN(ActivationQuant quant, read_activation_quant(graph, *node));
      if (auto it = out.activations.find(x->name()); it != out.activations.end() &&
                                                     !(it->second.scale == quant.scale && it->second.zero_point == quant.zero_point && it->second.type == quant.type))
        return invalid_input("activation '" + x->name() + "' is quantized twice with different parameters");
      out.activations[x->name()] = quant;
      q_source[node->output(0)] = x;
      q_of_activation[x->name()] = node->output(0);
    } else if (is_dq(*node)) {
      const Value* in = node->input(0);
      const Value* y = node->output(0);
      if (!in || !y) return invalid_input("DequantizeLinear '" + node->name() + "' has no input or output");
      if (const Tensor* values = constant_of(graph, in)) {
        QFLOW_ASSIGN_OR_RETURN(QuantizedConstant c, read_constant(graph, *node, *values));
        view_name[y] = in->name();
        out.constants[in->name()] = std::move(c);
      } else if (auto it = q_source.find(in); it != q_source.end()) {
        view_name[y] = it->second->name();
        dq_of_activation.emplace(it->second->name(), y);
      } else {
        return invalid_input(hint + "DequantizeLinear '" + node->name() + "' reads '" + in->name() +
                             "', neither an integer constant nor a QuantizeLinear output");
      }
    }
  }

  // Pass 2: the view graph.
  Model& view = out.view;
  view.ir_version = ptq.ir_version;
  view.opset_imports = ptq.opset_imports;
  view.producer_name = ptq.producer_name;
  view.producer_version = ptq.producer_version;
  view.domain = ptq.domain;
  view.model_version = ptq.model_version;
  view.metadata = ptq.metadata;
  view.graph = std::make_shared<Graph>();
  Graph& vg = *view.graph;
  vg.name = graph.name;

  auto declare = [&](const Value* original) -> Value* {
    Value* v = vg.get_or_create_value(original->name());
    if (!v->type) {
      const ValueType* type = best_type({original, q_of_activation.count(original->name()) ? q_of_activation[original->name()] : nullptr,
                                         dq_of_activation.count(original->name()) ? dq_of_activation[original->name()] : nullptr});
      if (type) {
        v->type = *type;
        // The Q output's type is the integer type; the view value is the float activation.
        if (v->type->dtype != DType::Undefined && original->type && original->type->dtype != DType::Undefined)
          v->type->dtype = original->type->dtype;
        else if (out.activations.count(original->name()))
          v->type->dtype = DType::Float32;
      }
    }
    return v;
  };

  for (const Value* in : graph.runtime_inputs()) {
    Value* v = declare(in);
    vg.inputs.push_back(v);
  }

  // A node left float on purpose (`quantize = false`, or moved to the CPU by the precision
  // search) runs on the CPU with its float weights and activations, whether or not a
  // quantized consumer has its output quantized. The float and the calibrated model are
  // refused as a whole: the one quantizes nothing, the other quantizes the outputs of its
  // weighted nodes but no weight.
  if (out.activations.empty() && out.constants.empty())
    return invalid_input(hint + "the model has no QuantizeLinear/DequantizeLinear (a float model)");
  static const std::set<std::string> kWeighted = {"Conv", "ConvTranspose", "Gemm", "MatMul"};
  const Node* float_weighted = nullptr;
  bool weight_quantized = false;
  for (const Node* node : order) {
    if (!kWeighted.count(node->op_type()) || !default_domain(*node) || node->inputs().size() < 2) continue;
    const Value* w = node->input(1);
    if (auto it = view_name.find(w); it != view_name.end() && out.constants.count(it->second)) weight_quantized = true;
    else if (const Tensor* t = constant_of(graph, w); t && is_float(t->dtype()) && output_quantized(*node) && !float_weighted)
      float_weighted = node;
  }
  if (float_weighted && !weight_quantized)
    return invalid_input(hint + float_weighted->op_type() + " '" + float_weighted->name() + "' weight '" +
                         float_weighted->input(1)->name() + "' is not quantized, nor is any other weight");
  for (const Node* node : order) {
    if (is_q(*node) || is_dq(*node)) continue;
    const std::string what = node->op_type() + " '" + node->name() + "'";
    std::vector<Value*> inputs;
    for (std::size_t i = 0; i < node->inputs().size(); ++i) {
      const Value* in = node->input(i);
      if (!in) {
        inputs.push_back(nullptr);
        continue;
      }
      if (auto it = view_name.find(in); it != view_name.end()) {
        Value* v = vg.get_or_create_value(it->second);
        if (auto c = out.constants.find(it->second); c != out.constants.end()) {
          if (!vg.is_initializer(v)) vg.set_initializer(v, c->second.values);
        } else {
          declare(graph.find_value(it->second));
        }
        inputs.push_back(v);
        continue;
      }
      if (q_source.count(in))
        return invalid_input(what + " reads the quantized value '" + in->name() + "' directly; lowering expects every "
                             "consumer behind a DequantizeLinear");
      if (const Tensor* t = graph.initializer(in)) {
        Value* v = vg.get_or_create_value(in->name());
        if (!vg.is_initializer(v)) vg.set_initializer(v, *t);
        inputs.push_back(v);
        continue;
      }
      if (constant_of(graph, in)) {  // a Constant node's output: copied with the node
        inputs.push_back(declare(in));
        continue;
      }
      // An activation nothing quantized.
      if (!in->type || in->type->dtype == DType::Undefined)
        return invalid_input(hint + what + " input '" + in->name() + "' has no declared type or shape");
      // A float activation: the node reads it on the CPU in float (a node left float on
      // purpose, or behind one).
      inputs.push_back(declare(in));
    }
    std::vector<Value*> outputs;
    for (const Value* o : node->outputs()) outputs.push_back(o ? declare(o) : nullptr);
    Node* copy = vg.add_node(node->op_type(), inputs, outputs, node->name(), node->domain());
    for (const Attribute& a : node->attributes()) copy->set_attribute(a);
    copy->doc_string = node->doc_string;
  }

  for (const Value* o : graph.outputs) {
    if (auto it = view_name.find(o); it != view_name.end()) {
      Value* v = vg.find_value(it->second);
      if (!v) v = declare(graph.find_value(it->second));
      vg.outputs.push_back(v);
      out.output_names[v->name()] = o->name();
    } else {
      Value* v = vg.find_value(o->name());
      if (!v) return invalid_input("graph output '" + o->name() + "' is not computed by the model");
      vg.outputs.push_back(v);
      out.output_names[v->name()] = o->name();
    }
  }

  // Static shapes of every activation the lowered model holds.
  auto check_shape = [&](const Value* v) -> Status {
    const bool used = !v->uses().empty() || std::find(vg.outputs.begin(), vg.outputs.end(), v) != vg.outputs.end();
    if (!used || vg.is_initializer(v)) return Status::ok();
    if (!v->type || !v->type->static_shape())
      return invalid_input("lowering needs static shapes: value '" + v->name() + "' has shape " +
                           dims_text(v->type ? &*v->type : nullptr) +
                           " (give the import stage input-shape and infer-shapes)");
    return Status::ok();
  };
  for (const Value* in : vg.inputs) QFLOW_RETURN_IF_ERROR(check_shape(in));
  for (const auto& node : vg.nodes())
    for (const Value* o : node->outputs())
      if (o) QFLOW_RETURN_IF_ERROR(check_shape(o));
  QFLOW_RETURN_IF_ERROR(vg.validate());

  // The table the placement checks read: activations and weights (biases are int32 by
  // construction and not a platform choice).
  for (const auto& [name, quant] : out.activations) {
    if (!vg.find_value(name)) continue;
    QuantParams p;
    p.dtype = dtype_for(quant.type);
    p.scale = {static_cast<float>(quant.scale)};
    p.zero_point = {quant.zero_point};
    out.table[name] = p;
  }
  for (const auto& [name, c] : out.constants) {
    if (c.values.dtype() == DType::Int32) continue;
    QuantParams p;
    p.dtype = c.values.dtype();
    for (double s : c.scales) p.scale.push_back(static_cast<float>(s));
    p.zero_point = c.zero_points;
    p.axis = c.axis;
    out.table[name] = p;
  }
  return out;
}

}  // namespace qflow

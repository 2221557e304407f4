// The node-unit rules of ONNX Runtime's QDQ transformer (qdq_selectors.cc), applied to a
// qflow graph: which DequantizeLinear / QuantizeLinear nodes surround a node, their types and
// parameters, and the int8 weights its integer kernel would multiply.
#include "ort_units.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <limits>
#include <optional>

namespace qflow {

namespace {

bool is_op(const Node* node, const char* op) {
  return node != nullptr && node->op_type() == op && (node->domain().empty() || node->domain() == "ai.onnx");
}

bool is_dq(const Node* node) { return is_op(node, "DequantizeLinear"); }
bool is_q(const Node* node) { return is_op(node, "QuantizeLinear"); }

const Node* dq_of(const Value* value) {
  return value != nullptr && is_dq(value->producer()) ? value->producer() : nullptr;
}

// Initializers and Constant node values.
const Tensor* constant_tensor(const Graph& graph, const Value* value) {
  if (value == nullptr) return nullptr;
  if (const Tensor* t = graph.initializer(value)) return t;
  const Node* producer = value->producer();
  if (is_op(producer, "Constant"))
    if (const Attribute* a = producer->find_attribute("value"); a && a->type == AttributeType::Tensor) return &a->t;
  return nullptr;
}

std::optional<DType> declared_dtype(const Value* value) {
  if (value != nullptr && value->type && value->type->dtype != DType::Undefined) return value->type->dtype;
  return std::nullopt;
}

// The integer type a QuantizeLinear produces: its zero point's, else the declared output
// type, else uint8 (ONNX's default without a zero point).
DType q_dtype(const Graph& graph, const Node& q) {
  if (const Tensor* zp = constant_tensor(graph, q.input(2))) return zp->dtype();
  if (auto declared = declared_dtype(q.output(0))) return *declared;
  return DType::UInt8;
}

// The integer type a DequantizeLinear reads.
DType dq_dtype(const Graph& graph, const Node& dq) {
  if (const Tensor* zp = constant_tensor(graph, dq.input(2))) return zp->dtype();
  const Value* in = dq.input(0);
  if (const Tensor* t = constant_tensor(graph, in)) return t->dtype();
  if (in != nullptr && is_q(in->producer())) return q_dtype(graph, *in->producer());
  if (auto declared = declared_dtype(in)) return *declared;
  return DType::UInt8;
}

std::string name_of(DType dtype) { return std::string(dtype_name(dtype)); }

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

bool listed(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

// Shortest text that reads back as the same float: scales are float32.
std::string number_text(float value) {
  char buf[32];
  const auto result = std::to_chars(buf, buf + sizeof(buf), value);
  return std::string(buf, result.ptr);
}

// A scalar quantization parameter as double (scale) or int64 (zero point); nullopt when not
// a constant scalar.
std::optional<double> scalar_of(const Tensor* t) {
  if (t == nullptr || t->numel() != 1) return std::nullopt;
  switch (t->dtype()) {
    case DType::Float32: return static_cast<double>(*t->data<float>());
    case DType::Int8: return static_cast<double>(*t->data<int8_t>());
    case DType::UInt8: return static_cast<double>(*t->data<uint8_t>());
    case DType::Int16: return static_cast<double>(*t->data<int16_t>());
    case DType::UInt16: return static_cast<double>(*t->data<uint16_t>());
    case DType::Int32: return static_cast<double>(*t->data<int32_t>());
    default: return std::nullopt;
  }
}

struct Params {
  std::optional<double> scale;
  double zero_point = 0.0;  // absent: 0
};

Params params_of(const Graph& graph, const Node& qdq) {
  Params p;
  p.scale = scalar_of(constant_tensor(graph, qdq.input(1)));
  if (const Tensor* zp = constant_tensor(graph, qdq.input(2))) {
    const auto z = scalar_of(zp);
    p.zero_point = z ? *z : std::numeric_limits<double>::quiet_NaN();
  }
  return p;
}

class UnitChecker {
 public:
  UnitChecker(const Graph& graph, const OrtPlatform& platform) : graph_(graph), platform_(platform) {}

  OrtNodePlacement place(const Node& node) const {
    OrtNodePlacement out{node.name(), node.op_type(), false, "", false};
    const bool default_domain = node.domain().empty() || node.domain() == "ai.onnx";
    auto rule = default_domain ? platform_.ops.find(node.op_type()) : platform_.ops.end();
    if (rule == platform_.ops.end()) {
      out.reason = "no int8 kernel for " + (default_domain ? node.op_type() : node.domain() + "::" + node.op_type());
      return out;
    }
    out.reason = structural(node, rule->second);
    if (!out.reason.empty()) return out;
    // The unit fuses; whether its kernel computes what the QDQ graph says is a separate matter.
    out.reason = weight_range(node, rule->second);
    out.breaks_numerics = !out.reason.empty();
    out.int8 = out.reason.empty();
    return out;
  }

 private:
  // Inputs that must come from a DequantizeLinear, by rule; the others must not (ORT counts
  // the DQ parents of a unit).
  std::vector<std::size_t> dequantized_inputs(const Node& node, OrtUnitRule rule) const {
    std::vector<std::size_t> all;
    for (std::size_t i = 0; i < node.inputs().size(); ++i)
      if (node.input(i) != nullptr) all.push_back(i);
    switch (rule) {
      case OrtUnitRule::Conv:
      case OrtUnitRule::Gemm:
      case OrtUnitRule::Binary:
      case OrtUnitRule::Variadic: return all;
      case OrtUnitRule::MatMul: return {0, 1};
      case OrtUnitRule::Where: return {1, 2};
      case OrtUnitRule::Unary:
      case OrtUnitRule::SameScale:
      case OrtUnitRule::DequantizedInput: return {0};
    }
    return all;
  }

  static bool output_may_stay_float(OrtUnitRule rule) {
    return rule == OrtUnitRule::MatMul || rule == OrtUnitRule::Gemm || rule == OrtUnitRule::DequantizedInput;
  }

  bool is_graph_output(const Value* value) const {
    return std::find(graph_.outputs.begin(), graph_.outputs.end(), value) != graph_.outputs.end();
  }

  // "" when every output goes to exactly one QuantizeLinear and nowhere else.
  std::string outputs_quantized(const Node& node) const {
    for (const Value* out : node.outputs()) {
      if (out == nullptr) continue;
      if (is_graph_output(out)) return "output '" + out->name() + "' is a graph output (not quantized)";
      if (out->uses().empty()) return "output '" + out->name() + "' is not quantized";
      if (out->uses().size() > 1) {
        for (const auto& [user, index] : out->uses())
          if (!is_q(user)) return "output '" + out->name() + "' is read unquantized by '" + user->name() + "'";
        return "output '" + out->name() + "' is quantized more than once";
      }
      const auto& [user, index] = out->uses().front();
      if (!is_q(user) || index != 0) return "output '" + out->name() + "' is read unquantized by '" + user->name() + "'";
    }
    return "";
  }

  bool any_output_quantized(const Node& node) const {
    for (const Value* out : node.outputs())
      if (out != nullptr)
        for (const auto& [user, index] : out->uses())
          if (is_q(user)) return true;
    return false;
  }

  std::string activation_type(const std::string& what, const std::string& value, DType dtype) const {
    if (listed(platform_.activation_dtypes, name_of(dtype))) return "";
    return what + " '" + value + "' is " + name_of(dtype) + " (the int8 kernels take " + join(platform_.activation_dtypes) + ")";
  }

  // The rule's structural constraints, in the order ONNX Runtime's selectors test them.
  std::string structural(const Node& node, OrtUnitRule rule) const {
    const std::vector<std::size_t> wanted = dequantized_inputs(node, rule);
    if (wanted.empty()) return "no inputs";
    for (std::size_t i : wanted) {
      const Value* in = node.input(i);
      if (in == nullptr) return "input " + std::to_string(i) + " missing";
      if (!dq_of(in)) return "input '" + in->name() + "' not dequantized from int8";
    }
    for (std::size_t i = 0; i < node.inputs().size(); ++i)
      if (dq_of(node.input(i)) && std::find(wanted.begin(), wanted.end(), i) == wanted.end())
        return "input '" + node.input(i)->name() + "' is dequantized, which the " + ort_unit_rule_name(rule) +
               " rule does not take";

    const bool quantized_output = !output_may_stay_float(rule) || any_output_quantized(node);
    if (rule != OrtUnitRule::DequantizedInput && quantized_output)
      if (std::string why = outputs_quantized(node); !why.empty()) return why;

    // Types: the activations the kernel reads and writes.
    const Node& first = *dq_of(node.input(wanted.front()));
    const DType in_type = dq_dtype(graph_, first);
    const bool weighted = rule == OrtUnitRule::Conv || rule == OrtUnitRule::MatMul || rule == OrtUnitRule::Gemm;
    for (std::size_t i : wanted) {
      if (weighted && i == 2) continue;  // the int32 bias
      const Value* in = node.input(i);
      const Node& dq = *dq_of(in);
      const DType type = dq_dtype(graph_, dq);
      if (weighted && i == 1 && constant_tensor(graph_, dq.input(0))) {
        if (!listed(platform_.weight_dtypes, name_of(type)))
          return "weight '" + in->name() + "' is " + name_of(type) + " (the int8 kernels take " +
                 join(platform_.weight_dtypes) + " weights)";
        continue;
      }
      if (std::string why = activation_type("input", in->name(), type); !why.empty()) return why;
      if (type != in_type && rule != OrtUnitRule::MatMul && !weighted)
        return "inputs '" + node.input(wanted.front())->name() + "' and '" + in->name() + "' are " + name_of(in_type) +
               " and " + name_of(type) + " (one type per unit)";
    }
    if (quantized_output && rule != OrtUnitRule::DequantizedInput)
      for (const Value* out : node.outputs()) {
        if (out == nullptr) continue;
        const Node& q = *out->uses().front().first;
        const DType type = q_dtype(graph_, q);
        if (std::string why = activation_type("output", out->name(), type); !why.empty()) return why;
        if (type != in_type)
          return "input '" + node.input(wanted.front())->name() + "' is " + name_of(in_type) + " but output '" +
                 out->name() + "' is " + name_of(type);
      }

    if (weighted) {
      if (std::string why = weight_and_bias(node, rule); !why.empty()) return why;
    }
    if (rule == OrtUnitRule::SameScale) return same_parameters(node, first);
    return "";
  }

  std::string weight_and_bias(const Node& node, OrtUnitRule rule) const {
    const Node& w = *dq_of(node.input(1));
    const Tensor* w_scale = constant_tensor(graph_, w.input(1));
    if (w_scale != nullptr && w_scale->numel() > 1 && !listed(platform_.per_channel, node.op_type()))
      return "weight '" + node.input(1)->name() + "' has per-channel scales (the int8 kernel of " + node.op_type() +
             " takes one)";
    if (rule == OrtUnitRule::MatMul) return "";
    const Value* bias = node.input(2);
    if (bias == nullptr) return "";
    const DType type = dq_dtype(graph_, *dq_of(bias));
    if (type != DType::Int32) return "bias '" + bias->name() + "' is " + name_of(type) + " (the int8 kernels take int32)";
    if (rule == OrtUnitRule::Gemm) {
      const float beta = node.attr_float("beta", 1.0f);
      if (beta != 1.0f) return "Gemm beta " + number_text(beta) + " with a bias (the int8 kernel takes 1)";
    }
    return "";
  }

  // The dropped Q/DQ pair must carry one scale and zero point (ORT's IsQDQPairSupported).
  std::string same_parameters(const Node& node, const Node& dq) const {
    const Params in = params_of(graph_, dq);
    if (!in.scale) return "input '" + node.input(0)->name() + "' is dequantized per channel (the rule takes one scale)";
    for (const Value* out : node.outputs()) {
      if (out == nullptr) continue;
      const Params o = params_of(graph_, *out->uses().front().first);
      if (!o.scale) return "output '" + out->name() + "' is quantized per channel (the rule takes one scale)";
      if (*o.scale != *in.scale || o.zero_point != in.zero_point)
        return "output '" + out->name() + "' is quantized with scale " + number_text(static_cast<float>(*o.scale)) +
               ", zero point " + number_text(static_cast<float>(o.zero_point)) + ", the input with " +
               number_text(static_cast<float>(*in.scale)) + ", " + number_text(static_cast<float>(in.zero_point)) +
               " (the Q/DQ pair is dropped only when they agree)";
    }
    return "";
  }

  // The uint8 x int8 kernels of Conv (not depthwise), MatMul and Gemm sum pairs of products in
  // 16 bits on some CPUs: their constant int8 weights must lie within the platform's range.
  std::string weight_range(const Node& node, OrtUnitRule rule) const {
    if (rule != OrtUnitRule::Conv && rule != OrtUnitRule::MatMul && rule != OrtUnitRule::Gemm) return "";
    const int64_t range = platform_.int8_weight_range;
    if (range >= 127) return "";
    const Node& w = *dq_of(node.input(1));
    const Tensor* q = constant_tensor(graph_, w.input(0));
    if (q == nullptr || q->dtype() != DType::Int8 || q->numel() == 0) return "";
    if (rule == OrtUnitRule::Conv && q->rank() >= 2) {
      // Depthwise (one input and one output channel per group): MLAS widens both operands.
      const int64_t group = node.attr_int("group", 1);
      if (q->dim(1) == 1 && q->dim(0) == group) return "";
    }
    const int8_t* data = q->data<int8_t>();
    const auto [lo, hi] = std::minmax_element(data, data + q->numel());
    if (*lo >= -range && *hi <= range) return "";
    return "weight range [" + std::to_string(*lo) + ", " + std::to_string(*hi) + "] exceeds [-" + std::to_string(range) +
           ", " + std::to_string(range) + "] of the u8s8 kernels on " + platform_.cpu;
  }

  const Graph& graph_;
  const OrtPlatform& platform_;
};

}  // namespace

Expected<std::vector<OrtNodePlacement>> ort_placement(const Model& model, const OrtPlatform& platform) {
  QFLOW_ASSIGN_OR_RETURN(std::vector<Node*> order, model.graph->topological_order());
  const UnitChecker checker(*model.graph, platform);
  std::vector<OrtNodePlacement> placement;
  for (const Node* node : order) {
    if (is_q(node) || is_dq(node)) continue;  // the conversions themselves
    placement.push_back(checker.place(*node));
  }
  return placement;
}

Expected<std::vector<std::string>> ort_qdq_type_problems(const Model& model, const OrtPlatform& platform) {
  QFLOW_ASSIGN_OR_RETURN(std::vector<Node*> order, model.graph->topological_order());
  const int64_t opset = model.opset("");
  std::vector<std::string> problems;
  for (const Node* node : order) {
    const bool q = is_q(node);
    if (!q && !is_dq(node)) continue;
    const DType type = q ? q_dtype(*model.graph, *node) : dq_dtype(*model.graph, *node);
    const std::string type_name = name_of(type);
    const std::string what = "node '" + node->name() + "': " + node->op_type() + (q ? " to " : " of ") + type_name;
    auto it = platform.qdq_dtypes.find(type_name);
    if (it == platform.qdq_dtypes.end() || (q && type == DType::Int32)) {
      std::vector<std::string> names;
      for (const auto& [name, since] : platform.qdq_dtypes)
        if (!q || name != "int32") names.push_back(name);
      problems.push_back(what + ": ONNX Runtime's CPU provider has no kernel for it (it takes " + join(names) + ")");
    } else if (opset < it->second) {
      problems.push_back(what + " needs opset " + std::to_string(it->second) + ", the model imports " +
                         std::to_string(opset));
    }
  }
  return problems;
}

}  // namespace qflow

// Example out-of-tree target "int8-units": a runtime that runs a node in int8 when the QDQ
// model wraps it whole (every input dequantized, every output quantized) and its op type is
// one the runtime has an int8 kernel for, the "node unit" rule of QDQ runtimes; everything
// else runs in float.
//
// It exists to show the target interface end to end (docs/targets.md): placement with the
// failed constraint, a check section as JSON and text, no cost model, and a deployable file
// (here the list of int8 units a runtime would fuse). It is not a real runtime's rule set.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "qflow/plugin/entry.h"

namespace {

bool is_op(const qflow::Node* node, const char* op) {
  return node != nullptr && node->op_type() == op && (node->domain().empty() || node->domain() == "ai.onnx");
}

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
      continue;
    }
    out += c;
  }
  return out + "\"";
}

class Int8UnitsTarget final : public qflow::Target {
 public:
  explicit Int8UnitsTarget(std::vector<std::string> int8_ops) : int8_ops_(std::move(int8_ops)) {}

  qflow::Expected<std::vector<qflow::NodeCapability>> partition(const qflow::Model& model) const override {
    QFLOW_ASSIGN_OR_RETURN(std::vector<qflow::Node*> order, model.graph->topological_order());
    std::vector<qflow::NodeCapability> nodes;
    for (const qflow::Node* node : order) {
      if (is_op(node, "QuantizeLinear") || is_op(node, "DequantizeLinear")) continue;  // the conversions
      nodes.push_back({node->name(), node->op_type(), false, reason_for(*node)});
      nodes.back().supported = nodes.back().reason.empty();
    }
    return nodes;
  }

  qflow::Expected<qflow::TargetReport> check(const qflow::Model& model) const override {
    QFLOW_ASSIGN_OR_RETURN(std::vector<qflow::NodeCapability> nodes, partition(model));
    const auto int8 = std::count_if(nodes.begin(), nodes.end(), [](const auto& n) { return n.supported; });
    qflow::TargetReport report;
    report.json = "{\n  \"format\": \"int8-units-check\",\n  \"target\": \"int8-units\",\n  \"accelerator\": \"int8\",\n"
                  "  \"nodes\": [";
    report.text = "node  op_type  placement  reason\n";
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const qflow::NodeCapability& n = nodes[i];
      const std::string placement = n.supported ? "int8" : "float";
      report.json += std::string(i ? "," : "") + "\n    {\"name\": " + json_string(n.node) + ", \"op_type\": " +
                     json_string(n.op_type) + ", \"placement\": \"" + placement + "\", \"reason\": " + json_string(n.reason) + "}";
      report.text += n.node + "  " + n.op_type + "  " + placement + (n.reason.empty() ? "" : "  " + n.reason) + "\n";
    }
    report.json += "\n  ],\n  \"summary\": {\"nodes\": " + std::to_string(nodes.size()) + ", \"int8_nodes\": " +
                   std::to_string(int8) + ", \"float_nodes\": " + std::to_string(nodes.size() - int8) + "}\n}\n";
    report.text += "nodes: " + std::to_string(nodes.size()) + " (int8 " + std::to_string(int8) + ", float " +
                   std::to_string(nodes.size() - int8) + ")\n";
    return report;
  }

  qflow::Expected<qflow::TargetReport> estimate(const qflow::Model&, const qflow::QuantTable&) const override {
    return qflow::unsupported("int8-units: no cost model");
  }

  qflow::Expected<std::vector<qflow::TargetArtifact>> lower(const qflow::Model& model) const override {
    QFLOW_ASSIGN_OR_RETURN(std::vector<qflow::NodeCapability> nodes, partition(model));
    std::string units = "[";
    bool first = true;
    for (const qflow::NodeCapability& n : nodes) {
      if (!n.supported) continue;
      units += std::string(first ? "" : ", ") + json_string(n.node);
      first = false;
    }
    units += "]\n";
    return std::vector<qflow::TargetArtifact>{{"units", "_int8_units.json", units}};
  }

 private:
  // Empty when `node` runs in int8; else the failed constraint.
  std::string reason_for(const qflow::Node& node) const {
    if (std::find(int8_ops_.begin(), int8_ops_.end(), node.op_type()) == int8_ops_.end())
      return "no int8 kernel for " + node.op_type();
    for (const qflow::Value* in : node.inputs())
      if (in != nullptr && !is_op(in->producer(), "DequantizeLinear"))
        return "input '" + in->name() + "' is not dequantized";
    for (const qflow::Value* out : node.outputs()) {
      if (out == nullptr) continue;
      if (out->uses().empty()) return "output '" + out->name() + "' is not quantized";
      for (const auto& [user, index] : out->uses())
        if (!is_op(user, "QuantizeLinear")) return "output '" + out->name() + "' is read unquantized by '" + user->name() + "'";
    }
    return "";
  }

  std::vector<std::string> int8_ops_;
};

qflow::Status register_components(qflow::ComponentRegistrar& registrar) {
  qflow::ComponentInfo info;
  info.kind = qflow::ComponentKind::Target;
  info.name = "int8-units";
  info.summary = "example: int8 where the QDQ model wraps a node whole and an int8 kernel exists";
  info.options.push_back({"int8-ops", qflow::OptionType::StringList,
                          std::vector<std::string>{"Conv", "Gemm", "MatMul", "Add", "Mul", "MaxPool", "AveragePool",
                                                   "GlobalAveragePool", "Relu", "Concat"},
                          "op types with an int8 kernel"});
  return registrar.add_target(std::move(info), [](const qflow::Options& options) -> qflow::Expected<std::unique_ptr<qflow::Target>> {
    std::vector<std::string> ops = options.get_strings("int8-ops");
    if (ops.empty()) return qflow::invalid_input("option int8-ops is empty: nothing could run in int8");
    return std::unique_ptr<qflow::Target>(std::make_unique<Int8UnitsTarget>(std::move(ops)));
  });
}

}  // namespace

QFLOW_PLUGIN("qflow-example-target", "1.0.0", register_components)

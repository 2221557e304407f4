// BpuCheckBackend: the bpu backend's placement and partition, rendered as the check report.
#include "bpu_check_backend.h"

#include "bpu_cost.h"
#include "check_report.h"
#include "lowering.h"
#include "qdq_model.h"

namespace qflow {

ComponentInfo BpuCheckBackend::info() {
  ComponentInfo info = BpuBackend::info();
  info.name = "bpu-check";
  info.summary = "BPU model check: per-node placement with the failed constraint, the partition and a summary";
  info.options.push_back({"format", OptionType::String, std::string("text"), "report format: text or json"});
  return info;
}

Expected<std::unique_ptr<Backend>> BpuCheckBackend::create(const Options& options) {
  const std::string format = options.get_string("format");
  if (format != "text" && format != "json")
    return invalid_input("bpu-check: option 'format' must be 'text' or 'json', got '" + format + "'");
  QFLOW_ASSIGN_OR_RETURN(BpuBackend backend, BpuBackend::from_options(options));
  return std::unique_ptr<Backend>(std::make_unique<BpuCheckBackend>(std::move(backend), format == "json"));
}

Expected<std::vector<NodeCapability>> BpuCheckBackend::capability(const Model& model) const {
  return backend_.capability(model);
}

namespace {

bool is_qdq_model(const Model& model) {
  for (const auto& node : model.graph->nodes())
    if ((node->domain().empty() || node->domain() == "ai.onnx") &&
        (node->op_type() == "QuantizeLinear" || node->op_type() == "DequantizeLinear"))
      return true;
  return false;
}

}  // namespace

// A PTQ (QDQ) model is checked as the lowering places it: its float view with the scales of
// its Q/DQ pairs, and the nodes without an integer lowering on the CPU. A float model is
// checked with `qparams`.
Expected<std::string> BpuCheckBackend::compile(const Model& model, const QuantTable& qparams) const {
  std::optional<QdqModel> qdq;
  if (is_qdq_model(model)) {
    QFLOW_ASSIGN_OR_RETURN(QdqModel read, read_qdq_model(model));
    qdq = std::move(read);
  }
  const Model& checked = qdq ? qdq->view : model;
  const QuantTable& table = qdq ? qdq->table : qparams;
  QFLOW_ASSIGN_OR_RETURN(PartitionPlan plan, qdq ? lowering_partition(*qdq, backend_, backend_.overrides().run_on_bpu)
                                                 : backend_.plan(model, qparams));
  QFLOW_ASSIGN_OR_RETURN(std::vector<Node*> order, checked.graph->topological_order());
  std::vector<std::optional<int64_t>> macs;
  for (const Node* node : order) macs.push_back(node_macs(*checked.graph, *node));
  return json_ ? check_report_json(plan, backend_.platform(), checked.graph->name, table, macs)
               : check_report_text(plan, backend_.platform(), checked.graph->name, table, macs);
}

}  // namespace qflow

// BpuTarget: the BPU pieces (partition plan, check and perf reports, lowering, .bc and .hbm
// encoders) behind the one target interface.
#include "bpu_target.h"

#include <filesystem>

#include "bpu_cost.h"
#include "bpu_deployed.h"
#include "check_report.h"
#include "perf_report.h"
#include "qdq_model.h"
#include "bc_codec.h"
#include "qflow/version.h"
#include "qflow/runtime/hbm_codec.h"

namespace qflow {

ComponentInfo BpuTarget::info() {
  ComponentInfo info;
  info.kind = ComponentKind::Target;
  info.name = "bpu";
  info.options = BpuBackend::options();
  info.summary = "BPU platforms: placement with the failed constraint, check and performance sections, "
                 "<name>_quantized_model.bc and <name>.hbm";
  info.options.push_back({"fuse-activations", OptionType::Bool, true,
                          "fold a Relu / Clip into the Conv, ConvTranspose, Gemm or MatMul before it (false: round "
                          "twice, as the PTQ model)"});
  return info;
}

Expected<std::unique_ptr<Target>> BpuTarget::create(const Options& options) {
  QFLOW_ASSIGN_OR_RETURN(BpuBackend backend, BpuBackend::from_options(options));
  LoweringOptions lowering;
  lowering.fuse_activations = !options.has("fuse-activations") || options.get_bool("fuse-activations");
  lowering.run_on_bpu = options.get_strings("run-on-bpu");
  return std::unique_ptr<Target>(std::make_unique<BpuTarget>(std::move(backend), std::move(lowering)));
}

Expected<std::vector<NodeCapability>> BpuTarget::partition(const Model& ptq_model) const {
  QFLOW_ASSIGN_OR_RETURN(QdqModel qdq, read_qdq_model(ptq_model));
  QFLOW_ASSIGN_OR_RETURN(PartitionPlan plan, lowering_partition(qdq, backend_, options_.run_on_bpu));
  return plan.nodes;
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
// its Q/DQ pairs, and the nodes without an integer lowering on the CPU. A float model (what
// `qflow check` is often given first) is checked structurally, without quantization.
Expected<TargetReport> BpuTarget::check(const Model& model) const {
  std::optional<QdqModel> qdq;
  if (is_qdq_model(model)) {
    QFLOW_ASSIGN_OR_RETURN(QdqModel read, read_qdq_model(model));
    qdq = std::move(read);
  }
  const Model& checked = qdq ? qdq->view : model;
  static const QuantTable kNoTable;
  const QuantTable& table = qdq ? qdq->table : kNoTable;
  QFLOW_ASSIGN_OR_RETURN(PartitionPlan plan, qdq ? lowering_partition(*qdq, backend_, options_.run_on_bpu)
                                                 : backend_.plan(model, kNoTable));
  QFLOW_ASSIGN_OR_RETURN(std::vector<Node*> order, checked.graph->topological_order());
  std::vector<std::optional<int64_t>> macs;
  for (const Node* node : order) macs.push_back(node_macs(*checked.graph, *node));
  const std::string& name = checked.graph->name;
  return TargetReport{check_report_json(plan, backend_.platform(), name, table, macs),
                      check_report_text(plan, backend_.platform(), name, table, macs)};
}

Expected<TargetReport> BpuTarget::estimate(const Model& float_model, const QuantTable& table) const {
  QFLOW_ASSIGN_OR_RETURN(PartitionPlan plan, backend_.plan(float_model, table));
  QFLOW_ASSIGN_OR_RETURN(PerfEstimate estimate, estimate_perf(*float_model.graph, plan, backend_.platform(), table));
  return TargetReport{perf_report_json(estimate), perf_report_text(estimate)};
}

Expected<std::vector<TargetArtifact>> BpuTarget::lower(const Model& ptq_model) const {
  QFLOW_ASSIGN_OR_RETURN(lowered::Model lowered, lower_ptq_model(ptq_model, backend_, nullptr, options_));
  auto hbm = lowered::encode_hbm(lowered, QFLOW_VERSION_STRING);
  if (!hbm) return internal_error("bpu: " + hbm.message());
  QFLOW_ASSIGN_OR_RETURN(std::string bc, encode_bc(lowered));
  std::vector<TargetArtifact> files;
  files.push_back({"bc", "_quantized_model.bc", std::move(bc)});
  files.push_back({"hbm", ".hbm", std::string(hbm->begin(), hbm->end())});
  return files;
}

std::string BpuTarget::role_for_file(const std::string& path) const {
  const std::string extension = std::filesystem::path(path).extension().string();
  if (extension == ".bc") return "bc";
  if (extension == ".hbm") return "hbm";
  return "";
}

Expected<std::unique_ptr<DeployedModel>> BpuTarget::load(const std::string& role, const std::string& bytes) const {
  if (role == "bc") return load_bc(bytes);
  if (role == "hbm") return load_hbm(bytes);
  return invalid_input("bpu: no deployable file of role '" + role + "' runs on the host (roles: bc, hbm)");
}

Status BpuTarget::check_quantization(const QuantConfig& config) const {
  const auto check = [](const std::string& where, const QuantOverride& entry) {
    if (entry.weight_bits && *entry.weight_bits != 8 && *entry.weight_bits != 16)
      return unsupported(where + ": weight-bits " + std::to_string(*entry.weight_bits) +
                         " cannot be deployed on the bpu target (supported weight widths: 8, 16)");
    // The BPU requantizes to its int8/int16 registers' full range; a narrowed activation grid
    // exists only as the QDQ model's Clip, which the lowering has no op for.
    if (entry.activation_bits && *entry.activation_bits != 8 && *entry.activation_bits != 16)
      return unsupported(where + ": activation-bits " + std::to_string(*entry.activation_bits) +
                         " cannot be deployed on the bpu target (supported activation widths: 8, 16)");
    return Status::ok();
  };
  QFLOW_RETURN_IF_ERROR(check("[quantization]", config.model));
  for (const auto& [op_type, entry] : config.op_types) QFLOW_RETURN_IF_ERROR(check("op type " + op_type, entry));
  for (const auto& [node, entry] : config.nodes) QFLOW_RETURN_IF_ERROR(check("node '" + node + "'", entry));
  return Status::ok();
}

}  // namespace qflow

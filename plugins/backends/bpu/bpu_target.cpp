// BpuTarget: the BPU pieces (partition plan, check and perf reports, lowering, .bc and .hbm
// encoders) behind the one target interface.
#include "bpu_target.h"

#include <algorithm>
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
  info.options.push_back({"input-type-rt", OptionType::String, std::string("featuremap"),
                          "what the deployed model is fed: featuremap (float, as the float model), or a uint8 frame: "
                          "gray, rgb, bgr, yuv444, nv12; per input as name:type;name:type (docs/input-types.md)"});
  info.options.push_back({"input-layout-rt", OptionType::String, std::string("nhwc"),
                          "layout of a gray / rgb / bgr / yuv444 frame: nhwc or nchw"});
  info.options.push_back({"input-type-train", OptionType::String, std::string(""),
                          "colour order the float model was trained on: gray, rgb, bgr, yuv444 (empty: the rt type; "
                          "rgb for yuv444 / nv12)"});
  info.options.push_back({"mean-value", OptionType::String, std::string(""),
                          "the float model sees (x - mean) * scale of the frame's pixels: one mean, or one per channel "
                          "(space or comma separated)"});
  info.options.push_back({"scale-value", OptionType::String, std::string(""),
                          "the scale of (x - mean) * scale: one, or one per channel"});
  return info;
}

Expected<std::unique_ptr<Target>> BpuTarget::create(const Options& options) {
  QFLOW_ASSIGN_OR_RETURN(BpuBackend backend, BpuBackend::from_options(options));
  LoweringOptions lowering;
  lowering.fuse_activations = !options.has("fuse-activations") || options.get_bool("fuse-activations");
  lowering.run_on_bpu = options.get_strings("run-on-bpu");
  lowering.input_types = InputTypeOptions::from(options);
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
  QFLOW_ASSIGN_OR_RETURN(std::vector<InputType> types, input_types_of(checked));
  if (qdq && !types.empty()) {
    // Whether the normalization folds into the first layer depends on the lowered program.
    // A model the lowering refuses is still checked (the lowering stage reports why): the
    // report then says the lowering decides, and what it would refuse.
    Expected<lowered::Model> lowered = lower_ptq_model(model, backend_, nullptr, options_);
    if (lowered) {
      std::vector<InputType> applied = types;
      if (apply_input_types(*lowered, applied, backend_.platform().power_of_two_scales).is_ok()) types = std::move(applied);
    }
  }
  std::string json = check_report_json(plan, backend_.platform(), name, table, macs);
  std::string text = check_report_text(plan, backend_.platform(), name, table, macs);
  if (!types.empty()) {
    // The input chain: after the platform line of the text, as "inputs" in the JSON.
    const auto line = text.find("\n\n");
    text.insert(line == std::string::npos ? 0 : line + 2, input_types_text(types));
    json.insert(json.rfind("\n}"), ",\n  \"inputs\": " + input_types_json(types));
  }
  return TargetReport{std::move(json), std::move(text)};
}

Expected<TargetReport> BpuTarget::estimate(const Model& float_model, const QuantTable& table) const {
  QFLOW_ASSIGN_OR_RETURN(PartitionPlan plan, backend_.plan(float_model, table));
  QFLOW_ASSIGN_OR_RETURN(PerfEstimate estimate, estimate_perf(*float_model.graph, plan, backend_.platform(), table));
  return TargetReport{perf_report_json(estimate), perf_report_text(estimate)};
}

// The inputs the options give a uint8 type, resolved against the model's input shapes.
Expected<std::vector<InputType>> BpuTarget::input_types_of(const Model& model) const {
  if (!options_.input_types.any()) return std::vector<InputType>{};
  std::vector<std::pair<std::string, Shape>> inputs;
  for (const Value* in : model.graph->runtime_inputs()) {
    // A float model given to `qflow check` may leave its batch symbolic: it is 1 on the BPU.
    Shape shape;
    if (in->type && in->type->shape) {
      const std::vector<Dim>& dims = *in->type->shape;
      for (std::size_t i = 0; i < dims.size(); ++i)
        shape.push_back(dims[i].is_static() ? *dims[i].value : (i == 0 ? 1 : -1));
      if (std::find(shape.begin(), shape.end(), -1) != shape.end()) shape.clear();
    }
    inputs.emplace_back(in->name(), shape);
  }
  return resolve_input_types(options_.input_types, inputs);
}

Expected<std::vector<TargetArtifact>> BpuTarget::lower(const Model& ptq_model) const {
  QFLOW_ASSIGN_OR_RETURN(lowered::Model lowered, lower_ptq_model(ptq_model, backend_, nullptr, options_));
  QFLOW_ASSIGN_OR_RETURN(std::vector<InputType> types, input_types_of(ptq_model));
  QFLOW_RETURN_IF_ERROR(apply_input_types(lowered, types, backend_.platform().power_of_two_scales));
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
  // With input-type-rt, verify's float samples become frames on the way in.
  if (role == "bc" || role == "hbm") {
    QFLOW_ASSIGN_OR_RETURN(std::unique_ptr<DeployedModel> model, role == "bc" ? load_bc(bytes) : load_hbm(bytes));
    return with_frame_inputs(std::move(model), options_.input_types);
  }
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

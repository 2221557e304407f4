// BpuLowerBackend: lower_ptq_model() serialized with encode_bc().
#include "bpu_lower_backend.h"

#include "qflow/lowered/bc.h"

namespace qflow {

ComponentInfo BpuLowerBackend::info() {
  ComponentInfo info = BpuBackend::info();
  info.name = "bpu-lower";
  info.summary = "BPU lowering of a PTQ (QDQ) model to the integer program, written as <name>_quantized_model.bc";
  info.options.push_back({"fuse-activations", OptionType::Bool, true,
                          "fold a Relu / Clip into the Conv, ConvTranspose, Gemm or MatMul before it (false: round "
                          "twice, as the PTQ model)"});
  return info;
}

Expected<std::unique_ptr<Backend>> BpuLowerBackend::create(const Options& options) {
  QFLOW_ASSIGN_OR_RETURN(BpuBackend backend, BpuBackend::from_options(options));
  LoweringOptions lowering;
  lowering.fuse_activations = !options.has("fuse-activations") || options.get_bool("fuse-activations");
  lowering.run_on_bpu = options.get_strings("run-on-bpu");
  return std::unique_ptr<Backend>(std::make_unique<BpuLowerBackend>(std::move(backend), lowering));
}

Expected<std::vector<NodeCapability>> BpuLowerBackend::capability(const Model& model) const {
  LoweringReport report;
  QFLOW_ASSIGN_OR_RETURN(lowered::Model lowered, lower_ptq_model(model, backend_, &report, options_));
  (void)lowered;
  return report.nodes;
}

Expected<std::string> BpuLowerBackend::compile(const Model& model, const QuantTable& qparams) const {
  (void)qparams;
  QFLOW_ASSIGN_OR_RETURN(lowered::Model lowered, lower_ptq_model(model, backend_, nullptr, options_));
  return encode_bc(lowered);
}

}  // namespace qflow

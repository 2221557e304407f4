// BpuLoweredBackend: lower_ptq_model() serialized with encode_bc() or packed with encode_hbm().
#include "bpu_lowered_backend.h"

#include "qflow/lowered/bc.h"
#include "qflow/version.h"
#include "runtime/lowered/hbm_codec.h"

namespace qflow {

ComponentInfo BpuLoweredBackend::info(LoweredFormat format) {
  ComponentInfo info = BpuBackend::info();
  if (format == LoweredFormat::bc) {
    info.name = "bpu-lower";
    info.summary = "BPU lowering of a PTQ (QDQ) model to the integer program, written as <name>_quantized_model.bc";
  } else {
    info.name = "bpu-compile";
    info.summary = "BPU compilation of a PTQ (QDQ) model to the device file <name>.hbm";
  }
  info.options.push_back({"fuse-activations", OptionType::Bool, true,
                          "fold a Relu / Clip into the Conv, ConvTranspose, Gemm or MatMul before it (false: round "
                          "twice, as the PTQ model)"});
  return info;
}

Expected<std::unique_ptr<Backend>> BpuLoweredBackend::create(const Options& options, LoweredFormat format) {
  QFLOW_ASSIGN_OR_RETURN(BpuBackend backend, BpuBackend::from_options(options));
  LoweringOptions lowering;
  lowering.fuse_activations = !options.has("fuse-activations") || options.get_bool("fuse-activations");
  lowering.run_on_bpu = options.get_strings("run-on-bpu");
  return std::unique_ptr<Backend>(std::make_unique<BpuLoweredBackend>(std::move(backend), std::move(lowering), format));
}

Expected<std::vector<NodeCapability>> BpuLoweredBackend::capability(const Model& model) const {
  LoweringReport report;
  QFLOW_ASSIGN_OR_RETURN(lowered::Model lowered, lower_ptq_model(model, backend_, &report, options_));
  (void)lowered;
  return report.nodes;
}

Expected<std::string> BpuLoweredBackend::compile(const Model& model, const QuantTable& qparams) const {
  (void)qparams;
  QFLOW_ASSIGN_OR_RETURN(lowered::Model lowered, lower_ptq_model(model, backend_, nullptr, options_));
  if (format_ == LoweredFormat::bc) return encode_bc(lowered);
  auto bytes = lowered::encode_hbm(lowered, QFLOW_VERSION_STRING);
  if (!bytes) return internal_error("bpu-compile: " + bytes.message());
  return std::string(bytes->begin(), bytes->end());
}

}  // namespace qflow

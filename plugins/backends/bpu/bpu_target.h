// BpuTarget: the `bpu` target component: placement, the check and performance sections, and
// the `.bc` and `.hbm` of one lowering of the PTQ model for a BPU platform.
#pragma once

#include <memory>

#include "bpu_backend.h"
#include "lowering.h"
#include "qflow/plugin/component.h"
#include "qflow/plugin/options.h"
#include "qflow/plugin/target.h"

namespace qflow {

class BpuTarget final : public Target {
 public:
  // The bpu backend's options (platform, platform-dir, run-on-cpu, run-on-bpu) plus
  // fuse-activations.
  static ComponentInfo info();
  static Expected<std::unique_ptr<Target>> create(const Options& options);
  BpuTarget(BpuBackend backend, LoweringOptions options) : backend_(std::move(backend)), options_(std::move(options)) {}

  // The placement the lowering gives: nodes without an integer form on the CPU.
  Expected<std::vector<NodeCapability>> partition(const Model& ptq_model) const override;
  // model_check_result.txt and its JSON form; of a float model too (no quantization checks).
  Expected<TargetReport> check(const Model& model) const override;
  // model_perf.txt and its JSON form: per-layer MACs, bytes and cycles.
  Expected<TargetReport> estimate(const Model& float_model, const QuantTable& table) const override;
  // "bc" (<name>_quantized_model.bc) and "hbm" (<name>.hbm).
  Expected<std::vector<TargetArtifact>> lower(const Model& ptq_model) const override;
  // Both run on the host: "bc" through the fixed-point simulator, "hbm" through the runtime C
  // API; verify holds the runtime to the simulator bit for bit.
  std::vector<std::string> runnable_roles() const override { return {"bc", "hbm"}; }
  // By extension: *.bc, *.hbm.
  std::string role_for_file(const std::string& path) const override;
  Expected<std::unique_ptr<DeployedModel>> load(const std::string& role, const std::string& bytes) const override;
  // Weight and activation grids of 8 and 16 bits only: the BPU's MAC arrays take int8 and
  // int16 weights and its requantization saturates to the full int8/int16 range.
  Status check_quantization(const QuantConfig& config) const override;

 private:
  Expected<std::vector<InputType>> input_types_of(const Model& model) const;
  BpuBackend backend_;
  LoweringOptions options_;
};

}  // namespace qflow

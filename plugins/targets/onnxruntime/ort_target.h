// OrtTarget: the `onnxruntime` target component: ONNX Runtime's CPU provider on x86-64. Its
// int8 placement follows the QDQ transformer's node-unit rules for a platform description,
// and its lowering emits the PTQ model as the deployable QDQ ONNX file, refused when ONNX
// Runtime would compute other numbers than the model describes.
#pragma once

#include <memory>
#include <vector>

#include "ort_platform.h"
#include "qflow/plugin/component.h"
#include "qflow/plugin/options.h"
#include "qflow/plugin/target.h"

namespace qflow {

class OrtTarget final : public Target {
 public:
  // Options: platform (a description on the search path; "" = x86_64) and platform-dir.
  static ComponentInfo info();
  static Expected<std::unique_ptr<Target>> create(const Options& options);
  explicit OrtTarget(OrtPlatform platform) : platform_(std::move(platform)) {}
  const OrtPlatform& platform() const { return platform_; }

  // Per node but Q/DQ: int8 where the QDQ transformer fuses it into an integer kernel whose
  // numbers are the model's, else float with the failed constraint.
  Expected<std::vector<NodeCapability>> partition(const Model& ptq_model) const override;
  // {"target", "accelerator": "int8", "platform", "model", "nodes", "summary"} and a text twin.
  Expected<TargetReport> check(const Model& ptq_model) const override;
  // No cost model.
  Expected<TargetReport> estimate(const Model& float_model, const QuantTable& table) const override;
  // "onnx" (<name>_ort_model.onnx): the PTQ model, after checking every ONNX Runtime rule.
  Expected<std::vector<TargetArtifact>> lower(const Model& ptq_model) const override;
  // reduce-range when the platform limits int8 weights below 127.
  QuantConfig quantization_rule() const override;

 private:
  OrtPlatform platform_;
};

}  // namespace qflow

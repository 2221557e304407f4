// BpuCompileBackend (`bpu-compile`): the PTQ model lowered for a BPU platform and packed as
// the device file `<name>.hbm`.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bpu_backend.h"
#include "lowering.h"
#include "qflow/core/status.h"
#include "qflow/plugin/backend.h"
#include "qflow/plugin/component.h"
#include "qflow/plugin/options.h"

namespace qflow {

class BpuCompileBackend final : public Backend {
 public:
  static ComponentInfo info();
  // The bpu backend's options (platform, platform-dir, run-on-cpu, run-on-bpu) plus
  // fuse-activations (default true, see LoweringOptions).
  static Expected<std::unique_ptr<Backend>> create(const Options& options);

  explicit BpuCompileBackend(BpuBackend backend, LoweringOptions options = {})
      : backend_(std::move(backend)), options_(options) {}

  Expected<std::vector<NodeCapability>> capability(const Model& model) const override;
  // The `.hbm` bytes (runtime/lowered/hbm_codec.h) stamped with the toolchain version.
  // `qparams` is not read: the PTQ model carries its quantization.
  Expected<std::string> compile(const Model& model, const QuantTable& qparams) const override;

 private:
  BpuBackend backend_;
  LoweringOptions options_;
};

}  // namespace qflow

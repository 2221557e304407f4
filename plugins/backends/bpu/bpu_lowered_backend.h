// BpuLoweredBackend: the PTQ model lowered for a BPU platform and emitted in one of two forms,
// `bpu-lower` (the `.bc`, qflow/lowered/bc.h) and `bpu-compile` (the `.hbm` a device runs).
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

enum class LoweredFormat { bc, hbm };

class BpuLoweredBackend final : public Backend {
 public:
  // The bpu backend's options (platform, platform-dir, run-on-cpu, run-on-bpu) plus
  // fuse-activations (default true, see LoweringOptions).
  static ComponentInfo info(LoweredFormat format);
  static Expected<std::unique_ptr<Backend>> create(const Options& options, LoweredFormat format);
  static Expected<std::unique_ptr<Backend>> create_bc(const Options& options) { return create(options, LoweredFormat::bc); }
  static Expected<std::unique_ptr<Backend>> create_hbm(const Options& options) { return create(options, LoweredFormat::hbm); }

  BpuLoweredBackend(BpuBackend backend, LoweringOptions options, LoweredFormat format)
      : backend_(std::move(backend)), options_(std::move(options)), format_(format) {}

  // The placement after the nodes without an integer lowering moved to the CPU.
  Expected<std::vector<NodeCapability>> capability(const Model& model) const override;
  // The `.bc` or `.hbm` bytes. `qparams` is not read: the PTQ model carries its quantization.
  Expected<std::string> compile(const Model& model, const QuantTable& qparams) const override;

 private:
  BpuBackend backend_;
  LoweringOptions options_;
  LoweredFormat format_;
};

}  // namespace qflow

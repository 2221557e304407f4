// BpuCheckBackend: the `bpu-check` component, whose artifact is the check report instead of the partition plan.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bpu_backend.h"
#include "qflow/core/status.h"
#include "qflow/plugin/backend.h"
#include "qflow/plugin/component.h"
#include "qflow/plugin/options.h"

namespace qflow {

class BpuCheckBackend final : public Backend {
 public:
  static ComponentInfo info();
  // The bpu backend's options plus format ("text" or "json").
  static Expected<std::unique_ptr<Backend>> create(const Options& options);

  BpuCheckBackend(BpuBackend backend, bool json) : backend_(std::move(backend)), json_(json) {}

  Expected<std::vector<NodeCapability>> capability(const Model& model) const override;
  // model_check_result.txt (or .json): placement, partition and summary.
  Expected<std::string> compile(const Model& model, const QuantTable& qparams) const override;

 private:
  BpuBackend backend_;
  bool json_;
};

}  // namespace qflow

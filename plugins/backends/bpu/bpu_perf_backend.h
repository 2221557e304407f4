// BpuPerfBackend: the `bpu-perf` component, whose artifact is the performance estimate of the partitioned model.
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

class BpuPerfBackend final : public Backend {
 public:
  static ComponentInfo info();
  // The bpu backend's options plus format ("text" or "json").
  static Expected<std::unique_ptr<Backend>> create(const Options& options);

  BpuPerfBackend(BpuBackend backend, bool json) : backend_(std::move(backend)), json_(json) {}

  Expected<std::vector<NodeCapability>> capability(const Model& model) const override;
  // model_perf.txt (or .json): per-layer MACs, bytes and cycles, totals per subgraph and for the model.
  Expected<std::string> compile(const Model& model, const QuantTable& qparams) const override;

 private:
  BpuBackend backend_;
  bool json_;
};

}  // namespace qflow

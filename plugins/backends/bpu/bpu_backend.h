// BpuBackend: per-node capability against a platform description, and the partition plan.
#pragma once

#include <memory>
#include <vector>

#include "bpu_platform.h"
#include "qflow/core/status.h"
#include "qflow/plugin/backend.h"
#include "qflow/plugin/component.h"
#include "qflow/plugin/options.h"

namespace qflow {

class BpuBackend final : public Backend {
 public:
  static ComponentInfo info();
  // Options: platform (file name without .toml), platform-dir (empty: the bpu-platforms
  // folder next to the plugin library).
  static Expected<std::unique_ptr<Backend>> create(const Options& options);

  explicit BpuBackend(BpuPlatform platform) : platform_(std::move(platform)) {}
  const BpuPlatform& platform() const { return platform_; }

  Expected<std::vector<NodeCapability>> capability(const Model& model) const override;
  // The JSON partition plan (see README.md): placement per node and the BPU subgraphs,
  // with the quantization parameters of each subgraph's boundary tensors.
  Expected<std::string> compile(const Model& model, const QuantTable& qparams) const override;

 private:
  NodeCapability check_node(const Graph& graph, const Node& node) const;
  BpuPlatform platform_;
};

}  // namespace qflow

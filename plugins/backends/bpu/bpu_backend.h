// BpuBackend: per-node capability against a platform description, placement overrides, and the partition plan.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bpu_platform.h"
#include "partition_plan.h"
#include "qflow/core/status.h"
#include "qflow/plugin/component.h"
#include "qflow/plugin/options.h"
#include "qflow/plugin/target.h"

namespace qflow {

// Node names the user places by hand (the `run-on-cpu` and `run-on-bpu` options).
struct BpuPlacementOverrides {
  std::vector<std::string> run_on_cpu;
  std::vector<std::string> run_on_bpu;
};

// The platform checks and the partition the bpu target (bpu_target.h) is built on.
class BpuBackend final {
 public:
  // The options it takes: platform (file name without .toml), platform-dir (empty: the
  // bpu-platforms folder next to the plugin library), run-on-cpu, run-on-bpu.
  static std::vector<OptionSpec> options();
  static Expected<BpuBackend> from_options(const Options& options);

  explicit BpuBackend(BpuPlatform platform, BpuPlacementOverrides overrides = {})
      : platform_(std::move(platform)), overrides_(std::move(overrides)) {}
  const BpuPlatform& platform() const { return platform_; }
  const BpuPlacementOverrides& overrides() const { return overrides_; }

  // Structural checks (op type, shapes, attributes, weights) and the overrides. A
  // run-on-bpu node that fails a check the model decides (not one that is merely unknown
  // for lack of shapes) is an error naming the node and the failed constraint.
  Expected<std::vector<NodeCapability>> capability(const Model& model) const;
  // capability(), then the quantization checks (dtypes, power-of-two scales) against
  // `qparams`, then the partition into convex BPU subgraphs.
  Expected<PartitionPlan> plan(const Model& model, const QuantTable& qparams) const;
  // The JSON partition plan (see README.md).
  Expected<std::string> compile(const Model& model, const QuantTable& qparams) const;

 private:
  struct Verdict {
    std::string reason;    // empty: supported
    bool unknown = false;  // the check could not be evaluated (missing shapes), not a definite failure
  };
  Verdict check_node(const Graph& graph, const Node& node) const;
  std::string check_quantization(const Graph& graph, const Node& node, const QuantTable& qparams) const;
  const BpuOpLimits* limits_of(const Node& node) const;

  BpuPlatform platform_;
  BpuPlacementOverrides overrides_;
};

}  // namespace qflow

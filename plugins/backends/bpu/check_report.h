// The BPU check report: per-node placement, the partition and a summary, as text and as JSON.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bpu_platform.h"
#include "partition_plan.h"
#include "qflow/plugin/calibrator.h"

namespace qflow {

// What `qflow check` prints and writes to model_check_result.txt (layout in docs/bpu-checker.md).
// `macs` is parallel to plan.nodes (bpu_cost.h's node_macs); the summary adds up the BPU
// nodes' MACs and the compute-bound time they take on the platform.
std::string check_report_text(const PartitionPlan& plan, const BpuPlatform& platform, const std::string& model_name,
                              const QuantTable& qparams, const std::vector<std::optional<int64_t>>& macs);

// The same content as model_check_result.json: the partition plan's fields plus `summary`.
std::string check_report_json(const PartitionPlan& plan, const BpuPlatform& platform, const std::string& model_name,
                              const QuantTable& qparams, const std::vector<std::optional<int64_t>>& macs);

}  // namespace qflow

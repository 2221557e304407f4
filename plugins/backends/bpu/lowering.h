// Lowering: a PTQ (QDQ) model and a BPU platform's partition turned into the integer program
// of runtime/include/qflow/runtime/lowered_model.h. README.md ("Lowering") lists the rules.
#pragma once

#include <string>
#include <vector>

#include "bpu_backend.h"
#include "input_type.h"
#include "partition_plan.h"
#include "qdq_model.h"
#include "qflow/core/status.h"
#include "qflow/ir/graph.h"
#include "qflow/runtime/lowered_model.h"

namespace qflow {

// What the lowering decided besides the model: the placement after the nodes without an
// integer lowering moved to the CPU.
struct LoweringReport {
  std::vector<NodeCapability> nodes;  // the float view's topological order
};

struct LoweringOptions {
  // A Relu / Clip that is the only consumer of a Conv / ConvTranspose / Gemm / MatMul output
  // in the same subgraph becomes that op's clamp (one requantization instead of two). Off: the
  // Relu / Clip is a requantize of its own, as the PTQ model rounds twice.
  bool fuse_activations = true;
  // The backend's run-on-bpu nodes: one without an integer lowering is an error instead of
  // moving to the CPU.
  std::vector<std::string> run_on_bpu;
  // input-type-rt and friends (docs/input-types.md): inputs given as uint8 frames.
  InputTypeOptions input_types;
};

// The partition the lowering uses: the backend's plan of the PTQ model's float view with the
// nodes that have no integer lowering moved to the CPU ("no integer lowering for ..."). A
// run-on-bpu node among them is an error. The check report of a PTQ model shows this plan.
Expected<PartitionPlan> lowering_partition(const QdqModel& qdq, const BpuBackend& backend,
                                           const std::vector<std::string>& run_on_bpu);

// The lowered model of `ptq` for the backend's platform and overrides. Errors name the node
// or value: a model that is not a PTQ model, a dynamic shape, a multiplier a power-of-two
// platform cannot shift, a CPU op the runtime has no kernel for.
Expected<lowered::Model> lower_ptq_model(const Model& ptq, const BpuBackend& backend, LoweringReport* report = nullptr,
                                         const LoweringOptions& options = {});

}  // namespace qflow

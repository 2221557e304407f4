// Target: one deployment target (an accelerator family, a runtime) as one plugin component.
// In the manner of ONNX Runtime's execution providers and TVM's targets, the host asks the
// target three things about a PTQ (QDQ) model and names no target itself (docs/targets.md):
// where each node runs and why not on the accelerator, what the deployment will look like
// (check and performance sections of the report), and the deployable files.
#pragma once

#include <string>
#include <vector>

#include "qflow/core/status.h"
#include "qflow/ir/graph.h"
#include "qflow/plugin/calibrator.h"
#include "qflow/plugin/quant_config.h"

namespace qflow {

// A target's verdict for one node; `reason` names the failed constraint with the
// actual value (e.g. "Conv kernel 9x9 > 7x7") when the node is not supported.
struct NodeCapability {
  std::string node;
  std::string op_type;
  bool supported = false;
  std::string reason;
};

// One section of the report, structured and readable: the host writes `text` as the
// stage's file for people, keeps `json` as the artifact later stages and the report read.
struct TargetReport {
  std::string json;  // an object; the keys a section carries are in docs/targets.md
  std::string text;  // the same content as a plain-text file
};

// A deployable file. `role` says what it is to later stages ("bc", "hbm", "onnx"); the
// file is written as <model name><suffix>.
struct TargetArtifact {
  std::string role;    // kebab-case, unique per lowering
  std::string suffix;  // "_quantized_model.bc", ".hbm", "_ort_model.onnx"
  std::string bytes;
};

class Target {
 public:
  virtual ~Target() = default;
  // Per node of the PTQ model, in topological order: whether the target's accelerated
  // path runs it and, when not, the failed constraint (NodeCapability::reason).
  virtual Expected<std::vector<NodeCapability>> partition(const Model& ptq_model) const = 0;
  // The check section: placement, partition and summary of the PTQ model. The JSON object
  // has "target", "accelerator" (the placement of nodes on the accelerated path), "nodes"
  // (each with "name", "op_type", "placement", "reason") and "summary".
  virtual Expected<TargetReport> check(const Model& ptq_model) const = 0;
  // The performance section, estimated from the float model and its calibration table
  // (before the precision search decides dtypes), or unsupported() when the target has no
  // cost model.
  virtual Expected<TargetReport> estimate(const Model& float_model, const QuantTable& table) const = 0;
  // The deployable files of the PTQ model, from one lowering.
  virtual Expected<std::vector<TargetArtifact>> lower(const Model& ptq_model) const = 0;
  // The quantization settings the target's kernels need of a PTQ model (e.g. int8 weights
  // within the range its integer kernels sum without overflow), as a [quantization] table of
  // its own. A pipeline whose [quantization] names the target lays this table under its own
  // keys, level by level (docs/quantization.md). Empty: the target needs nothing particular.
  virtual QuantConfig quantization_rule() const { return {}; }
};

}  // namespace qflow

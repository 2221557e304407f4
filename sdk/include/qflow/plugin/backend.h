// Backend: says which nodes a target can run, then lowers and emits a deployable artifact.
#pragma once

#include <string>
#include <vector>

#include "qflow/core/status.h"
#include "qflow/ir/graph.h"
#include "qflow/plugin/calibrator.h"

namespace qflow {

// The backend's verdict for one node; `reason` names the failed constraint with the
// actual value (e.g. "Conv kernel 9x9 > 7x7") when the node is not supported.
struct NodeCapability {
  std::string node;
  std::string op_type;
  bool supported = false;
  std::string reason;
};

class Backend {
 public:
  virtual ~Backend() = default;
  // One entry per node, in the model's topological order.
  virtual Expected<std::vector<NodeCapability>> capability(const Model& model) const = 0;
  // Lowers the model (quantization parameters from `qparams`) to the target's artifact.
  virtual Expected<std::string> compile(const Model& model, const QuantTable& qparams) const = 0;
};

}  // namespace qflow

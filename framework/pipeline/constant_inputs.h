// Turning model inputs into constants (the import stage's `constant-inputs` option): a
// streaming model's sample rate, a mode flag. Constant folding then folds what depends on
// them, and an If that branches on them keeps only the branch taken (if-inlined).
#pragma once

#include <string>

#include "qflow/core/status.h"
#include "qflow/ir/graph.h"

namespace qflow {

// `spec` is "sr=16000" or "a=1,2,3;b=0.5": each named runtime input becomes an initializer of
// its declared element type holding these values, and leaves the graph's inputs. The shape
// is the declared one, which must be static and hold as many elements; one value for an
// input of rank 0 or of unknown rank gives a scalar.
Status set_constant_inputs(Model& model, const std::string& spec);

}  // namespace qflow

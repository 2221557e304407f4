// Elementwise chains as tables (docs/lowered-model.md, "Fused tables"): the executor's plan for
// runs on the fast kernels. Internal to the runtime.
#pragma once

#include <cstdint>
#include <vector>

#include "qflow/runtime/lowered_model.h"
#include "fixed_point/fast_kernels.h"
#include "qflow/runtime/executor.h"

namespace qflow::lowered::detail {

// How the executor runs one op (in execution order).
struct FusedOp {
  enum class Kind {
    AsWritten,  // its own kernel on its own inputs
    Skipped,    // its result is needed only by ops that read it as a table: not computed
    Table,      // out = table[root - min]: the op and the elementwise ops before it, in one lookup
  };
  Kind kind = Kind::AsWritten;
  int32_t root = -1;  // Table: the 8- or 16-bit tensor looked up
  fx::Lut table;      // Table: root's to the output's parameters, one entry per value of root's type
  fx::fast::Isa isa = fx::fast::Isa::Portable;  // Table: the executor's instruction set
};

// An add, sub, mul, lut or requantize with 8- or 16-bit tensors of the output's shape, whose
// inputs are (besides constant scalars and a lut's table) one such tensor r or elementwise
// functions of r, is itself a function of r: its values over r's 256 or 65536 values are computed here by the
// reference kernels. Such an op's output is computed as a lookup in that table when another
// kind of op (or the model's output) reads it, and not at all otherwise.
std::vector<FusedOp> fuse_elementwise_tables(const Model& model, const std::vector<Value>& constants,
                                             fx::fast::Isa isa);

// Runs the integer op on the reference kernels with the given input values (null: absent)
// into `out` (type and shape set, ints sized): the tables are made by the code that runs
// the ops. Defined with the integer ops (bpu_ops.cpp).
bool run_reference_on(const Model& model, const Op& op, const std::vector<const Value*>& ins, Value& out);

}  // namespace qflow::lowered::detail

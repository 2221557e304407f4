// FlushDenormals: subnormal float constants to zero.
#pragma once

#include <memory>

#include "qflow/core/status.h"
#include "qflow/plugin/component.h"
#include "qflow/plugin/options.h"
#include "qflow/plugin/pass.h"

namespace qflow {

// Sets every float32 and float64 element of an initializer (in the graph and its subgraphs)
// whose magnitude is below the type's smallest normal number to zero of the same sign. On
// x86 a multiply or add with a subnormal operand takes a microcode assist, tens of times the
// usual cost: PP-OCRv4 rec's squeeze-excitation weights are a quarter subnormal (31 350 values),
// which made two 1x1 convolutions on a 1x1 map take 0.4 ms each. What changes is below
// 1.2e-38 times an input per product, and every such weight quantizes to 0 anyway.
// Counters: values-flushed, initializers-changed.
class FlushDenormals final : public Pass {
 public:
  static ComponentInfo info();
  static Expected<std::unique_ptr<Pass>> create(const Options& options);

 private:
  bool matches(const Model& model) const override;
  Expected<PassResult> run_impl(Model& model) override;
};

}  // namespace qflow

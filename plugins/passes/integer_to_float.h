// IntegerToFloat: a dynamically quantized model (integer convolutions and matmuls) becomes the
// float model it approximates, so it can be calibrated and quantized again for a target.
#pragma once

#include <memory>

#include "qflow/core/status.h"
#include "qflow/plugin/component.h"
#include "qflow/plugin/options.h"
#include "qflow/plugin/pass.h"

namespace qflow {

// ONNX Runtime's dynamic quantization spells a float Conv/MatMul as
//   (xq, xs, xzp) = DynamicQuantizeLinear(x)
//   i = ConvInteger(xq, Wq, xzp, wzp)            (or MatMulInteger)
//   y = Mul(Cast<float>(i), Mul(xs, ws))          (operands of both Muls in either order)
// with Wq, wzp and ws constants. That becomes y = Conv(x, W) (MatMul(x, W)) with
// W = (Wq - wzp) * ws in float32, the ConvInteger's attributes kept. The weights keep the
// values the integer model used; only the activation rounding, which the target's own
// quantization replaces, is gone. The weight scale and zero point may be per tensor or per
// output channel (ws then broadcasts over the output's channel axis). W is named after Wq
// without ORT's "_quantized" suffix when that name is free. A DynamicQuantizeLinear is removed
// once nothing reads it. Patterns that differ in any way stay as they are.
// Counters: convs-restored, matmuls-restored.
class IntegerToFloat final : public Pass {
 public:
  static ComponentInfo info();
  static Expected<std::unique_ptr<Pass>> create(const Options& options);

 private:
  bool matches(const Model& model) const override;
  Expected<PassResult> run_impl(Model& model) override;
};

}  // namespace qflow

// StripQdq: turns a QDQ model back into the float model it simulates.
#pragma once

#include <memory>

#include "qflow/core/status.h"
#include "qflow/plugin/component.h"
#include "qflow/plugin/options.h"
#include "qflow/plugin/pass.h"

namespace qflow {

// Activation QuantizeLinear -> DequantizeLinear pairs are removed: readers of the
// DequantizeLinear output read the QuantizeLinear input. When that output is a graph
// output, the input's producer is rebuilt to write it (an Identity when the input is a
// graph input, output or initializer), so the model's interface names stay.
// DequantizeLinear of a constant integer tensor (int8/uint8/int16/uint16/int32, per tensor
// or per axis) becomes a float32 initializer with the DequantizeLinear output's name,
// holding (q - zero_point) * scale: q - zero_point exactly, converted to float32, times the
// float32 scale. A QuantizeLinear of a constant float tensor followed by DequantizeLinear
// (fake-quantized weights) becomes the fake-quantized values: QuantizeLinear's arithmetic
// (x / scale in float32, round half to even, + zero point, saturate) then the above.
// Initializers and Constant nodes left unused are removed. Counters: pairs-removed (one
// per activation DequantizeLinear removed), weights-dequantized.
class StripQdq final : public Pass {
 public:
  static ComponentInfo info();
  static Expected<std::unique_ptr<Pass>> create(const Options& options);

 private:
  bool matches(const Model& model) const override;
  Expected<PassResult> run_impl(Model& model) override;
};

}  // namespace qflow

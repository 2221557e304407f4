// LoadCalibrator: quantization parameters read from a calibration table or from a QDQ model.
#pragma once

#include <memory>
#include <string>

#include "qflow/core/status.h"
#include "qflow/plugin/calibrator.h"
#include "qflow/plugin/component.h"
#include "qflow/plugin/options.h"

namespace qflow {

// Computes nothing: it takes parameters someone else chose. Statistics are not needed.
//
// * `path` ending in .json: a calibration table as the calibrator stage writes it,
//   {"tensors": {name: {"axis", "dtype", "method", "scale", "threshold", "zero_point"}}};
//   other keys are ignored. Every field is checked: axis an integer >= -1 (-1 with exactly
//   one scale), dtype a quantized type (int8, uint8, int16, uint16), method a string, scale
//   a non-empty list of numbers that are finite positive normal float32 values, threshold a
//   finite number >= 0, zero_point as many integers as scales within the dtype's range.
//   Optional `bits`: a grid narrowed inside the dtype (quant_math.h grid_range()), an
//   integer from 2 to the dtype's width - 1, per tensor only; the zero points must then lie
//   in the grid. Absent: the full range.
//   Errors name the file, the tensor and the field. Entries get method "load".
// * `path` empty: the scales of a QDQ model (request.model), e.g. exported by torch.onnx
//   from fake-quantized PyTorch (quantization-aware training). Every QuantizeLinear whose
//   input is an activation (not a constant) gives its input tensor a per-tensor entry: the
//   constant scale and zero point, the zero point's dtype (uint8 when it is absent, as in
//   ONNX), threshold = scale * max(|qmin - zp|, |qmax - zp|). QuantizeLinear on constants
//   (weights) is skipped: weights are quantized per channel later. Two QuantizeLinear on
//   one tensor must agree. A model without QuantizeLinear, or with QuantizeLinear only on
//   constants, is an error.
class LoadCalibrator final : public Calibrator {
 public:
  static ComponentInfo info();
  static Expected<std::unique_ptr<Calibrator>> create(const Options& options);

  explicit LoadCalibrator(std::string path) : path_(std::move(path)) {}

  Expected<QuantTable> calibrate(const CalibrationRequest& request) override;

  // The two sources, also used directly by tests.
  static Expected<QuantTable> parse_table(std::string_view text, const std::string& source);
  static Expected<QuantTable> from_qdq_model(const Model& model);

 private:
  std::string path_;
};

}  // namespace qflow

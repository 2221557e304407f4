// Calibrator: turns per-tensor statistics into quantization parameters.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "qflow/core/status.h"
#include "qflow/ir/graph.h"
#include "qflow/plugin/observer.h"

namespace qflow {

// Parameters of one quantized tensor: q = saturate(round_half_even(x / scale) + zero_point).
struct QuantParams {
  DType dtype = DType::Int8;
  std::vector<float> scale;         // one value, or one per channel along `axis`
  std::vector<int64_t> zero_point;  // same length as scale
  int64_t axis = -1;                // -1: per tensor
  double threshold = 0.0;           // the clipping threshold the method chose (|x| units)
  std::string method;               // component that chose it
};

// Ordered by tensor name so that everything derived from it is deterministic.
using QuantTable = std::map<std::string, QuantParams>;

struct CalibrationRequest {
  const std::map<std::string, TensorStatistics>* statistics = nullptr;  // by tensor name
  const Model* model = nullptr;  // the float model the statistics were taken on
  DType activation_dtype = DType::Int8;
};

class Calibrator {
 public:
  virtual ~Calibrator() = default;
  // Parameters for every tensor in request.statistics it can calibrate.
  virtual Expected<QuantTable> calibrate(const CalibrationRequest& request) = 0;
};

}  // namespace qflow

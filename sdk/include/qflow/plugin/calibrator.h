// Calibrator: turns per-tensor statistics into quantization parameters.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "qflow/core/status.h"
#include "qflow/ir/graph.h"
#include "qflow/plugin/observer.h"
#include "qflow/plugin/options.h"
#include "qflow/plugin/quant_config.h"

namespace qflow {

// Parameters of one quantized tensor: q = saturate(round_half_even(x / scale) + zero_point).
// With `bits` b > 0 the integer grid is narrower than the dtype: q also saturates to
// [-2^(b-1), 2^(b-1)-1] (signed) or [0, 2^b-1] (unsigned), grid_range() in quant_math.h.
struct QuantParams {
  DType dtype = DType::Int8;
  int bits = 0;                     // 2 .. width-1 of dtype: a narrowed grid; 0: dtype's full range
  std::vector<float> scale;         // one value, or one per channel along `axis`
  std::vector<int64_t> zero_point;  // same length as scale
  int64_t axis = -1;                // -1: per tensor
  double threshold = 0.0;           // the clipping threshold the method chose (|x| units)
  std::string method;               // component that chose it
};

// Ordered by tensor name so that everything derived from it is deterministic.
using QuantTable = std::map<std::string, QuantParams>;

class Calibrator;

// What the host offers a calibrator beyond statistics (null when the stage has no
// calibration data, e.g. in unit tests). Meta-calibrators (`auto`, `mix`) use it.
class CalibrationServices {
 public:
  virtual ~CalibrationServices() = default;
  // Another installed calibrator by name; options not given take their defaults.
  virtual Expected<std::shared_ptr<Calibrator>> make_calibrator(const std::string& name, const Options& options) const = 0;
  // Quantizes the model's activations with `table` (QDQ pairs, as the calibrated model),
  // runs it on the first `samples` calibration samples (0 or more than there are: all)
  // and returns the mean cosine similarity of its outputs to the float outputs (all
  // outputs of a sample flattened into one vector).
  virtual Expected<double> output_cosine(const QuantTable& table, int64_t samples) const = 0;
};

// What a calibrator reports besides the table; the host copies it into the manifest.
struct CalibrationReport {
  std::string chosen;                    // meta-calibrators: the method they kept
  std::map<std::string, double> scores;  // e.g. output cosine per method
  std::map<std::string, int64_t> counts; // e.g. tensors per chosen method
};

struct CalibrationRequest {
  const std::map<std::string, TensorStatistics>* statistics = nullptr;  // by tensor name
  const Model* model = nullptr;  // the float model the statistics were taken on (may be null)
  // The quantization settings of each tensor (its producer's resolved QuantSpec, see
  // quant_config.h); a tensor not listed takes QuantSpec{}. Tensors whose spec says
  // `quantize = false` are not listed in `statistics`.
  const std::map<std::string, QuantSpec>* specs = nullptr;
  const CalibrationServices* services = nullptr;
  CalibrationReport* report = nullptr;  // may be null
  // Threads the calibrator may use for its own work (the tensors of a table are independent);
  // the host gives the stage's thread count. A table must not depend on it.
  int threads = 1;

  QuantSpec spec_for(const std::string& tensor) const {
    if (specs)
      if (auto it = specs->find(tensor); it != specs->end()) return it->second;
    return QuantSpec{};
  }
};

class Calibrator {
 public:
  virtual ~Calibrator() = default;
  // Parameters for every tensor in request.statistics it can calibrate.
  virtual Expected<QuantTable> calibrate(const CalibrationRequest& request) = 0;
};

}  // namespace qflow

// MovingAverageMinMaxObserver: min and max as exponential moving averages over observe() calls.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "qflow/core/status.h"
#include "qflow/plugin/component.h"
#include "qflow/plugin/observer.h"
#include "qflow/plugin/options.h"

namespace qflow {

// As PyTorch's MovingAverageMinMaxObserver: the first observe() call with finite values
// sets min and max to that tensor's range; each later one moves them towards its range,
// min += c * (batch_min - min) and likewise for max, with c the `averaging-constant`
// (default 0.01, in (0, 1]). The averages are kept in double.
//
// The result depends on the order of the samples, and merge() cannot be exact: it takes
// the average of both states' min (and max) weighted by their finite value counts, which
// is what a shard would approximately have converged to. Counts (count, nan_count,
// inf_count) merge exactly. NaN and Inf are counted and never enter the averages; a call
// with no finite value leaves them unchanged.
class MovingAverageMinMaxObserver final : public Observer {
 public:
  static ComponentInfo info();
  static Expected<std::unique_ptr<Observer>> create(const Options& options);

  explicit MovingAverageMinMaxObserver(double averaging_constant) : constant_(averaging_constant) {}

  Status observe(const Tensor& values) override;
  Status merge(const Observer& other) override;
  // 64 bytes, little-endian: magic "QFMA", uint32 version, the averaging constant (binary64
  // bits), int64 count, nan_count, inf_count, updates (calls that had finite values), then
  // min and max as binary64 bit patterns (0 while count is 0).
  std::string serialize() const override;
  Status deserialize(std::string_view bytes) override;
  TensorStatistics statistics() const override;

 private:
  double constant_;
  int64_t count_ = 0;
  int64_t nan_count_ = 0;
  int64_t inf_count_ = 0;
  int64_t updates_ = 0;
  double min_ = 0.0;  // meaningful only when count_ > 0
  double max_ = 0.0;
};

}  // namespace qflow

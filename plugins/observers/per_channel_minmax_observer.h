// PerChannelMinMaxObserver: range of the finite values of each channel along one axis.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "qflow/core/status.h"
#include "qflow/plugin/component.h"
#include "qflow/plugin/observer.h"
#include "qflow/plugin/options.h"

namespace qflow {

// Option `axis` (default 1; negative counts from the end) is resolved against the rank of
// the first tensor observed; every later tensor must resolve to the same axis with the same
// channel count. A tensor whose rank does not reach the axis is an error naming its shape.
// Statistics: `axis` (resolved), `channel_min`/`channel_max` (a channel without finite
// values keeps +inf/-inf) and the overall min/max. Merge is exact (min, max and integer
// counts); merging states with different axes or channel counts is an error.
class PerChannelMinMaxObserver final : public Observer {
 public:
  static ComponentInfo info();
  static Expected<std::unique_ptr<Observer>> create(const Options& options);

  explicit PerChannelMinMaxObserver(int64_t axis) : axis_option_(axis) {}

  Status observe(const Tensor& values) override;
  Status merge(const Observer& other) override;
  // Little-endian: magic "QFPC", uint32 version, int64 axis option, int64 resolved axis (-1
  // before the first tensor), uint64 channels, int64 count, nan_count, inf_count, binary64
  // min and max (0 while count is 0), then per channel binary64 min and max.
  std::string serialize() const override;
  Status deserialize(std::string_view bytes) override;
  TensorStatistics statistics() const override;

 private:
  int64_t axis_option_;
  int64_t axis_ = -1;  // resolved; -1 until the first tensor
  int64_t count_ = 0;
  int64_t nan_count_ = 0;
  int64_t inf_count_ = 0;
  double min_ = 0.0;  // meaningful only when count_ > 0
  double max_ = 0.0;
  std::vector<double> channel_min_;  // +inf for a channel without finite values
  std::vector<double> channel_max_;  // -inf likewise
};

}  // namespace qflow

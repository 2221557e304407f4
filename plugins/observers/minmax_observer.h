// MinMaxObserver: running range of the finite values of one tensor, with NaN/Inf counted apart.
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

// State is five numbers, whatever the number of samples; merge is exact because min, max
// and integer counts are associative and commutative.
class MinMaxObserver final : public Observer {
 public:
  static ComponentInfo info();
  static Expected<std::unique_ptr<Observer>> create(const Options& options);

  Status observe(const Tensor& values) override;
  Status merge(const Observer& other) override;
  // 48 bytes, little-endian: magic "QFMM", uint32 version, int64 count, nan_count,
  // inf_count, then min and max as IEEE-754 binary64 bit patterns.
  std::string serialize() const override;
  Status deserialize(std::string_view bytes) override;
  TensorStatistics statistics() const override;

 private:
  int64_t count_ = 0;
  int64_t nan_count_ = 0;
  int64_t inf_count_ = 0;
  double min_ = 0.0;  // meaningful only when count_ > 0
  double max_ = 0.0;
};

}  // namespace qflow

// HistogramObserver: two passes, the range first, then a fixed-range histogram of |x|.
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

// Pass 0 records count, nan_count, inf_count and the range [min, max] of the finite values.
// Pass 1 counts |x| of every finite value into `bins` equal bins (option, default 2048)
// over [0, R] with R = max(|min|, |max|) from pass 0: bin i holds R*i/bins <= |x| <
// R*(i+1)/bins, computed as floor(|x| / R * bins) in double; |x| = R goes into the last
// bin. When R is 0 (every finite value is zero, or there is none) the range is 0 and
// every value goes into bin 0. A value above R in pass 1 means the samples differ between
// the passes and is an error. Counts are integers (uint64), exact under any split.
//
// Sharding protocol: every shard observes pass 0 with its own observer; the host merges
// them; for pass 1 each shard starts from a copy of the merged state (serialize and
// deserialize), calls begin_pass(1), observes, and the host merges those copies. So a
// pass-1 merge adds the histograms and keeps the pass-0 summary once, after checking that
// both states carry the identical summary. States of different passes never merge.
class HistogramObserver final : public Observer {
 public:
  static ComponentInfo info();
  static Expected<std::unique_ptr<Observer>> create(const Options& options);

  static constexpr int64_t kMaxBins = int64_t{1} << 24;

  explicit HistogramObserver(int64_t bins) : bins_(bins) {}

  int passes() const override { return 2; }
  // begin_pass(0) is accepted during pass 0; begin_pass(1) moves a pass-0 state to pass 1
  // with an empty histogram; anything else is an error.
  Status begin_pass(int pass) override;
  Status observe(const Tensor& values) override;
  Status merge(const Observer& other) override;
  // Little-endian: magic "QFHG", uint32 version, uint32 pass, uint64 bins, int64 count,
  // nan_count, inf_count, binary64 min and max (0 while count is 0), then in pass 1 `bins`
  // uint64 counts.
  std::string serialize() const override;
  Status deserialize(std::string_view bytes) override;
  TensorStatistics statistics() const override;

 private:
  double range() const;

  int64_t bins_;
  uint32_t pass_ = 0;
  int64_t count_ = 0;
  int64_t nan_count_ = 0;
  int64_t inf_count_ = 0;
  double min_ = 0.0;  // meaningful only when count_ > 0
  double max_ = 0.0;
  std::vector<uint64_t> histogram_;  // `bins_` counts in pass 1, empty in pass 0
};

}  // namespace qflow

// Observer: accumulates statistics of one tensor as the interpreter produces it.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "qflow/core/status.h"
#include "qflow/ir/tensor.h"

namespace qflow {

// The summary a calibrator reads. Fields an observer does not track stay empty/default.
struct TensorStatistics {
  int64_t count = 0;      // finite values seen
  int64_t nan_count = 0;  // NaN and Inf are counted, never folded into the range
  int64_t inf_count = 0;
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  // Per-channel range along `axis` (per-channel observers); empty otherwise.
  int64_t axis = -1;
  std::vector<double> channel_min;
  std::vector<double> channel_max;
  // Histogram of |x| with equal bins over [0, histogram_range]; empty when not tracked.
  double histogram_range = 0.0;
  std::vector<double> histogram;
  // Statistics an observer defines itself, by name (a signed histogram, moments, ...): what
  // the numbers mean is a contract between the observer that publishes the name and the
  // calibrators that require it (ComponentInfo::published_statistics / required_statistics),
  // which a pipeline checks when it is validated. Written to the statistics artifact.
  std::map<std::string, std::vector<double>> named;
};

// The names under which the fields above are declared: "range" (count, min, max and the
// NaN/Inf counts), "channel-range" (axis, channel_min, channel_max), "abs-histogram"
// (histogram_range, histogram).
inline constexpr std::string_view kStatisticRange = "range";
inline constexpr std::string_view kStatisticChannelRange = "channel-range";
inline constexpr std::string_view kStatisticAbsHistogram = "abs-histogram";

// One instance observes one tensor. State must not grow with the number of samples, and
// merge() of states built from any split of the samples must equal one state built from
// all of them, so calibration can be sharded across threads, processes or machines.
class Observer {
 public:
  virtual ~Observer() = default;

  // Observers that need several sweeps over the data (e.g. ranges first, then fixed-range
  // histograms) say how many; the host calls begin_pass(k) before sweep k.
  //
  // The host shards every sweep: the samples are split into fixed contiguous shards, each
  // shard is observed by its own instance, and the shards are merged in shard order. Pass 0
  // starts from fresh instances (begin_pass(0) right after creation). For pass k > 0 every
  // shard starts from a copy of the state merged at the end of pass k-1 (made with
  // deserialize(serialize())), then begin_pass(k) is called; at the end of pass k the copies
  // are merged again, so merge() of such copies must combine only what was accumulated in
  // pass k (the pass k-1 state they share must not be counted twice).
  virtual int passes() const { return 1; }
  virtual Status begin_pass(int pass) {
    (void)pass;
    return Status::ok();
  }

  // `values` is the live tensor (float32); do not keep a reference to it.
  virtual Status observe(const Tensor& values) = 0;
  // `other` is an observer of the same component and options. The host merges shards in
  // shard order; within a pass k > 0 both sides started from the same copy of the state
  // merged after pass k-1, and merge() must combine only what was accumulated in pass k.
  virtual Status merge(const Observer& other) = 0;
  // Byte-exact state: deserialize(serialize()) restores an equal observer.
  virtual std::string serialize() const = 0;
  virtual Status deserialize(std::string_view bytes) = 0;
  virtual TensorStatistics statistics() const = 0;
};

}  // namespace qflow

// HistogramObserver: pass bookkeeping, binning of |x|, exact merge and the binary state format.
#include "histogram_observer.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "state_codec.h"
#include "value_scan.h"

namespace qflow {

namespace {

constexpr char kMagic[5] = "QFHG";
constexpr uint32_t kFormatVersion = 1;
constexpr std::size_t kHeaderBytes = 4 + 4 + 4 + 8 + 3 * 8 + 2 * 8;

bool same_bits(double a, double b) { return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b); }

// Counting is the slow step when many values share a bin (a ReLU's zeros): each increment
// waits for the previous one's store. Large inputs therefore count into four interleaved
// tallies, one per value position mod 4, added into `histogram` at the end.
class Tallies {
 public:
  static constexpr int kLanes = 4;
  Tallies(std::size_t n, int32_t last) : bins_(static_cast<std::size_t>(last) + 1) {
    // Worth zeroing and summing the lanes only when the input is much longer than the bins.
    if (n < 2 * bins_ || bins_ > (std::size_t{1} << 16)) return;
    thread_local std::vector<uint32_t> storage;
    storage.assign(kLanes * bins_, 0);
    lanes_ = storage.data();
  }
  Tallies(const Tallies&) = delete;
  Tallies& operator=(const Tallies&) = delete;

  void count(const int32_t* bin, std::size_t m, uint64_t* histogram) {
    if (!lanes_) {
      for (std::size_t j = 0; j < m; ++j) ++histogram[static_cast<std::size_t>(bin[j])];
      return;
    }
    std::size_t j = 0;
    for (; j + kLanes <= m; j += kLanes)
      for (int l = 0; l < kLanes; ++l) ++lanes_[static_cast<std::size_t>(l) * bins_ + static_cast<std::size_t>(bin[j + l])];
    for (; j < m; ++j) ++lanes_[static_cast<std::size_t>(bin[j])];
    // uint32 lanes: fold them in before any could reach 2^32.
    if ((counted_ += m) >= (std::size_t{1} << 31)) flush(histogram);
  }

  void flush(uint64_t* histogram) {
    if (!lanes_) return;
    for (std::size_t b = 0; b < bins_; ++b) {
      uint64_t sum = 0;
      for (int l = 0; l < kLanes; ++l) {
        uint32_t& lane = lanes_[static_cast<std::size_t>(l) * bins_ + b];
        sum += lane;
        lane = 0;
      }
      histogram[b] += sum;
    }
    counted_ = 0;
  }

 private:
  std::size_t bins_;
  uint32_t* lanes_ = nullptr;
  std::size_t counted_ = 0;
};

// Pass 1: adds floor(|x| / top * bins) (capped at the last bin) of every finite x to
// `histogram`; returns the index of a finite |x| above `top`, or -1. Blocks of kBinBlock
// values, each in loops without per-value branches that the compiler vectorizes: the checks
// (counts in float), the bin indices (in double, as always), then the counting. For |x| >= 0
// the truncating conversion is the floor, and |x| <= top keeps it within int32 (bins <= 2^24).
// Compiled for AVX2 and the baseline: the same IEEE operations at twice the width.
__attribute__((target_clones("avx2", "default"))) int64_t bin_values(const float* xs, std::size_t n, double top,
                                                                    double divisor, double scale, float top_below,
                                                                    int32_t last, uint64_t* histogram) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  constexpr std::size_t kBinBlock = 256;
  int32_t bin[kBinBlock];
  Tallies tallies(n, last);
  for (std::size_t start = 0; start < n; start += kBinBlock) {
    const std::size_t m = std::min(kBinBlock, n - start);
    const float* x = xs + start;
    int32_t over = 0, skipped = 0;
    for (std::size_t j = 0; j < m; ++j) {
      const float a = std::fabs(x[j]);
      over += (a > top_below) & (a < kInf);
      skipped += !(a < kInf);  // Inf and NaN: counted in pass 0, not binned
    }
    if (over) {
      for (std::size_t j = 0; j < m; ++j) {
        const double a = std::fabs(static_cast<double>(x[j]));
        if (std::isfinite(a) && a > top) {
          tallies.flush(histogram);
          return static_cast<int64_t>(start + j);
        }
      }
    }
    for (std::size_t j = 0; j < m; ++j) {
      const double a = std::fabs(static_cast<double>(x[j]));
      const double kept = a <= std::numeric_limits<double>::max() ? a : 0.0;
      const auto b = static_cast<int32_t>(kept / divisor * scale);
      bin[j] = b < last ? b : last;
    }
    tallies.count(bin, m, histogram);
    histogram[0] -= static_cast<uint64_t>(skipped);  // the non-finite values went to bin 0 above
  }
  tallies.flush(histogram);
  return -1;
}

}  // namespace

ComponentInfo HistogramObserver::info() {
  ComponentInfo info;
  info.kind = ComponentKind::Observer;
  info.name = "histogram";
  info.summary = "Two passes: the range of the finite values, then a histogram of |x| with equal bins over [0, max |x|]";
  info.options = {
      {"bins", OptionType::Int, int64_t{2048}, "number of equal bins over [0, max |x|] (1 to 16777216)",
       {.min = 1.0, .max = static_cast<double>(kMaxBins)}},
  };
  info.published_statistics = {std::string(kStatisticRange), std::string(kStatisticAbsHistogram)};
  return info;
}

Expected<std::unique_ptr<Observer>> HistogramObserver::create(const Options& options) {
  const int64_t bins = options.get_int("bins");
  if (bins < 1 || bins > kMaxBins)
    return invalid_input("histogram observer: option bins must be in [1, " + std::to_string(kMaxBins) + "], got " +
                         std::to_string(bins));
  return std::unique_ptr<Observer>(std::make_unique<HistogramObserver>(bins));
}

double HistogramObserver::range() const { return count_ > 0 ? std::max(std::fabs(min_), std::fabs(max_)) : 0.0; }

Status HistogramObserver::begin_pass(int pass) {
  if (pass == 0 && pass_ == 0) return Status::ok();
  if (pass == 1 && pass_ == 0) {
    pass_ = 1;
    histogram_.assign(static_cast<std::size_t>(bins_), 0);
    return Status::ok();
  }
  if (pass == 1)
    return invalid_input("histogram observer: pass 1 has already begun for this state (a shard starts pass 1 from the "
                         "merged pass-0 state)");
  return invalid_input("histogram observer: begin_pass(" + std::to_string(pass) + ") while in pass " +
                       std::to_string(pass_) + " (passes are 0 then 1)");
}

Status HistogramObserver::observe(const Tensor& values) {
  if (values.dtype() != DType::Float32)
    return invalid_input("histogram observer expects a float tensor, got " + std::string(dtype_name(values.dtype())));
  if (pass_ == 0) {
    const ValueScan scan = scan_values(values.span<float>());
    const int64_t count = scan.count, nans = scan.nans, infs = scan.infs;
    const float lo = scan.lo, hi = scan.hi;
    if (count > 0) {
      min_ = count_ > 0 ? std::min(min_, static_cast<double>(lo)) : lo;
      max_ = count_ > 0 ? std::max(max_, static_cast<double>(hi)) : hi;
    }
    count_ += count;
    nan_count_ += nans;
    inf_count_ += infs;
    return Status::ok();
  }
  const double top = range();
  const double divisor = top > 0.0 ? top : 1.0;
  const double scale = top > 0.0 ? static_cast<double>(bins_) : 0.0;  // top 0: every value in bin 0
  // The largest float <= top: for a finite float y, y > top exactly when y > top_below.
  constexpr float kFloatMax = std::numeric_limits<float>::max();
  float top_below = top >= static_cast<double>(kFloatMax) ? kFloatMax : static_cast<float>(top);
  if (static_cast<double>(top_below) > top) top_below = std::nextafter(top_below, 0.0f);
  const std::span<const float> xs = values.span<float>();
  const int64_t above = bin_values(xs.data(), xs.size(), top, divisor, scale, top_below,
                                   static_cast<int32_t>(bins_ - 1), histogram_.data());
  if (above >= 0)
    return invalid_input("histogram observer: |x| = " +
                         std::to_string(std::fabs(static_cast<double>(xs[static_cast<std::size_t>(above)]))) +
                         " in pass 1 exceeds the pass-0 range " + std::to_string(top) +
                         " (the samples differ between the passes)");
  return Status::ok();
}

Status HistogramObserver::merge(const Observer& other) {
  const auto* peer = dynamic_cast<const HistogramObserver*>(&other);
  if (!peer) return invalid_input("histogram observer can only merge the state of another histogram observer");
  if (peer->bins_ != bins_)
    return invalid_input("histogram observer merge: bin counts differ (" + std::to_string(bins_) + " and " +
                         std::to_string(peer->bins_) + ")");
  if (peer->pass_ != pass_)
    return invalid_input("histogram observer merge: states of pass " + std::to_string(pass_) + " and pass " +
                         std::to_string(peer->pass_) + " do not merge");
  if (pass_ == 1) {
    if (count_ != peer->count_ || nan_count_ != peer->nan_count_ || inf_count_ != peer->inf_count_ ||
        !same_bits(min_, peer->min_) || !same_bits(max_, peer->max_))
      return invalid_input("histogram observer merge: the pass-1 states carry different pass-0 summaries (each shard "
                           "must start pass 1 from the same merged state)");
    std::vector<uint64_t> sum(histogram_.size());
    for (std::size_t i = 0; i < sum.size(); ++i)
      if (__builtin_add_overflow(histogram_[i], peer->histogram_[i], &sum[i]))
        return invalid_input("histogram observer merge: bin " + std::to_string(i) + " overflows uint64");
    histogram_ = std::move(sum);
    return Status::ok();
  }
  int64_t count = count_, nans = nan_count_, infs = inf_count_;
  if (!add_counts(count, nans, infs, peer->count_, peer->nan_count_, peer->inf_count_))
    return invalid_input("histogram observer merge: value count overflows int64");
  if (peer->count_ > 0) {
    min_ = count_ > 0 ? std::min(min_, peer->min_) : peer->min_;
    max_ = count_ > 0 ? std::max(max_, peer->max_) : peer->max_;
  }
  count_ = count;
  nan_count_ = nans;
  inf_count_ = infs;
  return Status::ok();
}

std::string HistogramObserver::serialize() const {
  using namespace observer_state;
  std::string out(kMagic, 4);
  put_u32(out, kFormatVersion);
  put_u32(out, pass_);
  put_u64(out, static_cast<uint64_t>(bins_));
  put_i64(out, count_);
  put_i64(out, nan_count_);
  put_i64(out, inf_count_);
  put_f64(out, count_ > 0 ? min_ : 0.0);
  put_f64(out, count_ > 0 ? max_ : 0.0);
  for (uint64_t n : histogram_) put_u64(out, n);
  return out;
}

Status HistogramObserver::deserialize(std::string_view bytes) {
  const std::string what = "histogram observer state: ";
  if (bytes.size() < kHeaderBytes)
    return invalid_input(what + "expected at least " + std::to_string(kHeaderBytes) + " bytes, got " +
                         std::to_string(bytes.size()));
  observer_state::Reader in(bytes);
  if (!in.magic(kMagic)) return invalid_input(what + "bad magic (not a histogram state)");
  const uint32_t version = in.u32();
  if (version != kFormatVersion)
    return unsupported(what + "format version " + std::to_string(version) + ", expected " + std::to_string(kFormatVersion));
  const uint32_t pass = in.u32();
  const uint64_t bins = in.u64();
  const int64_t count = in.i64(), nans = in.i64(), infs = in.i64();
  const double lo = in.f64(), hi = in.f64();
  if (in.failed()) return internal_error(what + "size check and fields disagree");
  if (pass > 1) return invalid_input(what + "pass " + std::to_string(pass) + " (passes are 0 and 1)");
  if (bins != static_cast<uint64_t>(bins_))
    return invalid_input(what + std::to_string(bins) + " bins, this observer has " + std::to_string(bins_));
  const std::size_t expected = kHeaderBytes + (pass == 1 ? static_cast<std::size_t>(bins_) * 8 : 0);
  if (bytes.size() != expected)
    return invalid_input(what + "expected " + std::to_string(expected) + " bytes for pass " + std::to_string(pass) +
                         ", got " + std::to_string(bytes.size()));
  if (count < 0 || nans < 0 || infs < 0) return invalid_input(what + "negative count");
  if (count > 0 && !(std::isfinite(lo) && std::isfinite(hi) && lo <= hi))
    return invalid_input(what + "range [" + std::to_string(lo) + ", " + std::to_string(hi) +
                         "] is not a finite ordered interval");
  if (count == 0 && (!same_bits(lo, 0.0) || !same_bits(hi, 0.0)))
    return invalid_input(what + "a range is recorded but no value was counted");
  std::vector<uint64_t> histogram(pass == 1 ? static_cast<std::size_t>(bins_) : 0);
  uint64_t total = 0;
  for (uint64_t& n : histogram) {
    n = in.u64();
    if (__builtin_add_overflow(total, n, &total) || total > static_cast<uint64_t>(count))
      return invalid_input(what + "the histogram holds more values than the " + std::to_string(count) +
                           " finite values pass 0 counted");
  }
  pass_ = pass;
  count_ = count;
  nan_count_ = nans;
  inf_count_ = infs;
  min_ = lo;
  max_ = hi;
  histogram_ = std::move(histogram);
  return Status::ok();
}

TensorStatistics HistogramObserver::statistics() const {
  TensorStatistics stats = range_statistics(count_, nan_count_, inf_count_, min_, max_);
  if (pass_ == 1) {
    stats.histogram_range = range();
    stats.histogram.assign(histogram_.begin(), histogram_.end());
  }
  return stats;
}

}  // namespace qflow

// MinMaxObserver: range tracking, exact merge and the versioned binary state format.
#include "minmax_observer.h"

#include <algorithm>
#include <cmath>

#include "state_codec.h"
#include "value_scan.h"

namespace qflow {

namespace {

constexpr char kMagic[5] = "QFMM";
constexpr uint32_t kFormatVersion = 1;
constexpr std::size_t kStateBytes = 4 + 4 + 3 * 8 + 2 * 8;

using observer_state::put_f64;
using observer_state::put_i64;
using observer_state::put_u32;
using observer_state::Reader;

}  // namespace

ComponentInfo MinMaxObserver::info() {
  ComponentInfo info;
  info.kind = ComponentKind::Observer;
  info.name = "minmax";
  info.summary = "Running minimum and maximum of the finite values; NaN and Inf are counted, never ranged";
  info.published_statistics = {std::string(kStatisticRange)};
  return info;
}

Expected<std::unique_ptr<Observer>> MinMaxObserver::create(const Options& options) {
  (void)options;
  return std::unique_ptr<Observer>(std::make_unique<MinMaxObserver>());
}

Status MinMaxObserver::observe(const Tensor& values) {
  if (values.dtype() != DType::Float32)
    return invalid_input("minmax observer expects a float tensor, got " + std::string(dtype_name(values.dtype())));
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

Status MinMaxObserver::merge(const Observer& other) {
  const auto* peer = dynamic_cast<const MinMaxObserver*>(&other);
  if (!peer) return invalid_input("minmax observer can only merge the state of another minmax observer");
  int64_t count = count_, nans = nan_count_, infs = inf_count_;
  if (!add_counts(count, nans, infs, peer->count_, peer->nan_count_, peer->inf_count_))
    return invalid_input("minmax observer merge: value count overflows int64");
  if (peer->count_ > 0) {
    min_ = count_ > 0 ? std::min(min_, peer->min_) : peer->min_;
    max_ = count_ > 0 ? std::max(max_, peer->max_) : peer->max_;
  }
  count_ = count;
  nan_count_ = nans;
  inf_count_ = infs;
  return Status::ok();
}

std::string MinMaxObserver::serialize() const {
  std::string out(kMagic, 4);
  put_u32(out, kFormatVersion);
  put_i64(out, count_);
  put_i64(out, nan_count_);
  put_i64(out, inf_count_);
  put_f64(out, count_ > 0 ? min_ : 0.0);
  put_f64(out, count_ > 0 ? max_ : 0.0);
  return out;
}

Status MinMaxObserver::deserialize(std::string_view bytes) {
  if (bytes.size() != kStateBytes)
    return invalid_input("minmax observer state: expected " + std::to_string(kStateBytes) + " bytes, got " +
                         std::to_string(bytes.size()));
  Reader in(bytes);
  if (!in.magic(kMagic)) return invalid_input("minmax observer state: bad magic (not a minmax state)");
  const uint32_t version = in.u32();
  if (version != kFormatVersion)
    return unsupported("minmax observer state: format version " + std::to_string(version) + ", expected " +
                       std::to_string(kFormatVersion));
  const int64_t count = in.i64();
  const int64_t nans = in.i64();
  const int64_t infs = in.i64();
  const double lo = in.f64();
  const double hi = in.f64();
  if (count < 0 || nans < 0 || infs < 0) return invalid_input("minmax observer state: negative count");
  if (count > 0 && !(std::isfinite(lo) && std::isfinite(hi) && lo <= hi))
    return invalid_input("minmax observer state: range [" + std::to_string(lo) + ", " + std::to_string(hi) +
                         "] is not a finite ordered interval");
  if (count == 0 && (lo != 0.0 || hi != 0.0 || std::signbit(lo) || std::signbit(hi)))
    return invalid_input("minmax observer state: a range is recorded but no value was counted");
  // Assign only after every check so a refused state leaves the observer unchanged.
  count_ = count;
  nan_count_ = nans;
  inf_count_ = infs;
  min_ = lo;
  max_ = hi;
  return Status::ok();
}

TensorStatistics MinMaxObserver::statistics() const {
  return range_statistics(count_, nan_count_, inf_count_, min_, max_);
}

}  // namespace qflow

// MovingAverageMinMaxObserver: averaging updates, count-weighted merge and the binary state format.
#include "moving_average_minmax_observer.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "state_codec.h"
#include "value_scan.h"

namespace qflow {

namespace {

constexpr char kMagic[5] = "QFMA";
constexpr uint32_t kFormatVersion = 1;
constexpr std::size_t kStateBytes = 4 + 4 + 8 + 4 * 8 + 2 * 8;

std::string describe(double c) {
  std::string text = std::to_string(c);
  return text;
}

}  // namespace

ComponentInfo MovingAverageMinMaxObserver::info() {
  ComponentInfo info;
  info.kind = ComponentKind::Observer;
  info.name = "moving-average-minmax";
  info.summary = "Min and max as exponential moving averages over samples (order-dependent; merge is approximate)";
  info.options = {
      {"averaging-constant", OptionType::Float, 0.01,
       "weight c of each new sample: min += c * (sample_min - min), in (0, 1]",
       {.min = 0.0, .max = 1.0, .min_exclusive = true}},
  };
  info.published_statistics = {std::string(kStatisticRange)};
  return info;
}

Expected<std::unique_ptr<Observer>> MovingAverageMinMaxObserver::create(const Options& options) {
  const double c = options.get_float("averaging-constant");
  if (!(c > 0.0 && c <= 1.0))
    return invalid_input("moving-average-minmax observer: option averaging-constant must be in (0, 1], got " +
                         describe(c));
  return std::unique_ptr<Observer>(std::make_unique<MovingAverageMinMaxObserver>(c));
}

Status MovingAverageMinMaxObserver::observe(const Tensor& values) {
  if (values.dtype() != DType::Float32)
    return invalid_input("moving-average-minmax observer expects a float tensor, got " +
                         std::string(dtype_name(values.dtype())));
  const ValueScan scan = scan_values(values.span<float>());
  const int64_t count = scan.count, nans = scan.nans, infs = scan.infs;
  const float lo = scan.lo, hi = scan.hi;
  if (count > 0) {
    if (updates_ == 0) {
      min_ = lo;
      max_ = hi;
    } else {
      min_ += constant_ * (static_cast<double>(lo) - min_);
      max_ += constant_ * (static_cast<double>(hi) - max_);
    }
    ++updates_;
  }
  count_ += count;
  nan_count_ += nans;
  inf_count_ += infs;
  return Status::ok();
}

Status MovingAverageMinMaxObserver::merge(const Observer& other) {
  const auto* peer = dynamic_cast<const MovingAverageMinMaxObserver*>(&other);
  if (!peer)
    return invalid_input("moving-average-minmax observer can only merge the state of another moving-average-minmax observer");
  if (std::bit_cast<uint64_t>(peer->constant_) != std::bit_cast<uint64_t>(constant_))
    return invalid_input("moving-average-minmax observer merge: averaging constants differ (" + describe(constant_) +
                         " and " + describe(peer->constant_) + ")");
  int64_t count = count_, nans = nan_count_, infs = inf_count_, updates = 0;
  if (!add_counts(count, nans, infs, peer->count_, peer->nan_count_, peer->inf_count_) ||
      __builtin_add_overflow(updates_, peer->updates_, &updates))
    return invalid_input("moving-average-minmax observer merge: a count overflows int64");
  if (peer->count_ > 0) {
    if (count_ == 0) {
      min_ = peer->min_;
      max_ = peer->max_;
    } else {
      // Weighted by finite value counts; the sums are written symmetrically so that
      // a.merge(b) and b.merge(a) give the same bits.
      const auto wa = static_cast<double>(count_);
      const auto wb = static_cast<double>(peer->count_);
      const double total = wa + wb;
      min_ = (min_ * wa + peer->min_ * wb) / total;
      max_ = (max_ * wa + peer->max_ * wb) / total;
    }
  }
  count_ = count;
  nan_count_ = nans;
  inf_count_ = infs;
  updates_ = updates;
  return Status::ok();
}

std::string MovingAverageMinMaxObserver::serialize() const {
  using namespace observer_state;
  std::string out(kMagic, 4);
  put_u32(out, kFormatVersion);
  put_f64(out, constant_);
  put_i64(out, count_);
  put_i64(out, nan_count_);
  put_i64(out, inf_count_);
  put_i64(out, updates_);
  put_f64(out, count_ > 0 ? min_ : 0.0);
  put_f64(out, count_ > 0 ? max_ : 0.0);
  return out;
}

Status MovingAverageMinMaxObserver::deserialize(std::string_view bytes) {
  const std::string what = "moving-average-minmax observer state: ";
  if (bytes.size() != kStateBytes)
    return invalid_input(what + "expected " + std::to_string(kStateBytes) + " bytes, got " + std::to_string(bytes.size()));
  observer_state::Reader in(bytes);
  if (!in.magic(kMagic)) return invalid_input(what + "bad magic (not a moving-average-minmax state)");
  const uint32_t version = in.u32();
  if (version != kFormatVersion)
    return unsupported(what + "format version " + std::to_string(version) + ", expected " + std::to_string(kFormatVersion));
  const double c = in.f64();
  const int64_t count = in.i64(), nans = in.i64(), infs = in.i64(), updates = in.i64();
  const double lo = in.f64(), hi = in.f64();
  if (in.failed()) return internal_error(what + "size check and fields disagree");
  if (std::bit_cast<uint64_t>(c) != std::bit_cast<uint64_t>(constant_))
    return invalid_input(what + "averaging constant " + describe(c) + " differs from this observer's " + describe(constant_));
  if (count < 0 || nans < 0 || infs < 0 || updates < 0) return invalid_input(what + "negative count");
  if ((count == 0) != (updates == 0) || updates > count)
    return invalid_input(what + std::to_string(updates) + " updates do not fit " + std::to_string(count) + " finite values");
  if (count > 0 && !(std::isfinite(lo) && std::isfinite(hi)))
    return invalid_input(what + "the averaged range is not finite");
  if (count == 0 && (std::bit_cast<uint64_t>(lo) != 0 || std::bit_cast<uint64_t>(hi) != 0))
    return invalid_input(what + "a range is recorded but no value was counted");
  constant_ = c;
  count_ = count;
  nan_count_ = nans;
  inf_count_ = infs;
  updates_ = updates;
  min_ = lo;
  max_ = hi;
  return Status::ok();
}

TensorStatistics MovingAverageMinMaxObserver::statistics() const {
  return range_statistics(count_, nan_count_, inf_count_, min_, max_);
}

}  // namespace qflow

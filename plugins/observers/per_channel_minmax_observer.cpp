// PerChannelMinMaxObserver: axis resolution, per-channel ranges, exact merge and the state format.
#include "per_channel_minmax_observer.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "state_codec.h"
#include "value_scan.h"

namespace qflow {

namespace {

constexpr char kMagic[5] = "QFPC";
constexpr uint32_t kFormatVersion = 1;
constexpr std::size_t kHeaderBytes = 4 + 4 + 3 * 8 + 3 * 8 + 2 * 8;
constexpr double kInf = std::numeric_limits<double>::infinity();

bool same_bits(double a, double b) { return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b); }

}  // namespace

ComponentInfo PerChannelMinMaxObserver::info() {
  ComponentInfo info;
  info.kind = ComponentKind::Observer;
  info.name = "per-channel-minmax";
  info.summary = "Minimum and maximum of the finite values of each channel along an axis, and of the whole tensor";
  info.options = {
      {"axis", OptionType::Int, int64_t{1}, "channel axis; negative counts from the end (-1: last axis)"},
  };
  info.published_statistics = {std::string(kStatisticRange), std::string(kStatisticChannelRange)};
  return info;
}

Expected<std::unique_ptr<Observer>> PerChannelMinMaxObserver::create(const Options& options) {
  return std::unique_ptr<Observer>(std::make_unique<PerChannelMinMaxObserver>(options.get_int("axis")));
}

Status PerChannelMinMaxObserver::observe(const Tensor& values) {
  if (values.dtype() != DType::Float32)
    return invalid_input("per-channel-minmax observer expects a float tensor, got " +
                         std::string(dtype_name(values.dtype())));
  const int64_t rank = values.rank();
  const int64_t axis = axis_option_ < 0 ? axis_option_ + rank : axis_option_;
  if (axis < 0 || axis >= rank)
    return invalid_input("per-channel-minmax observer: axis " + std::to_string(axis_option_) +
                         " does not exist in a tensor of shape " + shape_to_string(values.shape()) + " (rank " +
                         std::to_string(rank) + ")");
  const int64_t channels = values.dim(axis);
  if (axis_ >= 0 && (axis != axis_ || channels != static_cast<int64_t>(channel_min_.size())))
    return invalid_input("per-channel-minmax observer: a tensor of shape " + shape_to_string(values.shape()) +
                         " has " + std::to_string(channels) + " channels along axis " + std::to_string(axis) +
                         ", earlier tensors had " + std::to_string(channel_min_.size()) + " along axis " +
                         std::to_string(axis_));
  if (axis_ < 0) {
    axis_ = axis;
    channel_min_.assign(static_cast<std::size_t>(channels), kInf);
    channel_max_.assign(static_cast<std::size_t>(channels), -kInf);
  }
  int64_t inner = 1;
  for (int64_t d = axis + 1; d < rank; ++d) inner *= values.dim(d);
  const float* data = values.data<float>();
  const int64_t n = values.numel();
  int64_t count = 0, nans = 0, infs = 0;
  for (int64_t start = 0; start < n; start += inner * channels) {
    for (int64_t c = 0; c < channels; ++c) {
      const float* row = data + start + c * inner;
      auto& lo = channel_min_[static_cast<std::size_t>(c)];
      auto& hi = channel_max_[static_cast<std::size_t>(c)];
      for (int64_t i = 0; i < inner; ++i) {
        const float x = row[i];
        if (std::isnan(x)) {
          ++nans;
        } else if (std::isinf(x)) {
          ++infs;
        } else {
          ++count;
          // + 0.0 turns -0 into +0: std::min/max would keep whichever zero came first.
          const double v = static_cast<double>(x) + 0.0;
          lo = std::min(lo, v);
          hi = std::max(hi, v);
        }
      }
    }
  }
  count_ += count;
  nan_count_ += nans;
  inf_count_ += infs;
  if (count_ > 0) {
    // The overall range is the range of the channel ranges, so it stays exact under merge.
    min_ = *std::min_element(channel_min_.begin(), channel_min_.end());
    max_ = *std::max_element(channel_max_.begin(), channel_max_.end());
  }
  return Status::ok();
}

Status PerChannelMinMaxObserver::merge(const Observer& other) {
  const auto* peer = dynamic_cast<const PerChannelMinMaxObserver*>(&other);
  if (!peer)
    return invalid_input("per-channel-minmax observer can only merge the state of another per-channel-minmax observer");
  if (peer->axis_option_ != axis_option_)
    return invalid_input("per-channel-minmax observer merge: axis options differ (" + std::to_string(axis_option_) +
                         " and " + std::to_string(peer->axis_option_) + ")");
  if (axis_ >= 0 && peer->axis_ >= 0 && (axis_ != peer->axis_ || channel_min_.size() != peer->channel_min_.size()))
    return invalid_input("per-channel-minmax observer merge: channel count mismatch (" +
                         std::to_string(channel_min_.size()) + " channels along axis " + std::to_string(axis_) +
                         " and " + std::to_string(peer->channel_min_.size()) + " along axis " +
                         std::to_string(peer->axis_) + ")");
  int64_t count = count_, nans = nan_count_, infs = inf_count_;
  if (!add_counts(count, nans, infs, peer->count_, peer->nan_count_, peer->inf_count_))
    return invalid_input("per-channel-minmax observer merge: value count overflows int64");
  if (peer->axis_ >= 0) {
    if (axis_ < 0) {
      axis_ = peer->axis_;
      channel_min_ = peer->channel_min_;
      channel_max_ = peer->channel_max_;
    } else {
      for (std::size_t c = 0; c < channel_min_.size(); ++c) {
        channel_min_[c] = std::min(channel_min_[c], peer->channel_min_[c]);
        channel_max_[c] = std::max(channel_max_[c], peer->channel_max_[c]);
      }
    }
  }
  if (peer->count_ > 0) {
    min_ = count_ > 0 ? std::min(min_, peer->min_) : peer->min_;
    max_ = count_ > 0 ? std::max(max_, peer->max_) : peer->max_;
  }
  count_ = count;
  nan_count_ = nans;
  inf_count_ = infs;
  return Status::ok();
}

std::string PerChannelMinMaxObserver::serialize() const {
  using namespace observer_state;
  std::string out(kMagic, 4);
  put_u32(out, kFormatVersion);
  put_i64(out, axis_option_);
  put_i64(out, axis_);
  put_u64(out, channel_min_.size());
  put_i64(out, count_);
  put_i64(out, nan_count_);
  put_i64(out, inf_count_);
  put_f64(out, count_ > 0 ? min_ : 0.0);
  put_f64(out, count_ > 0 ? max_ : 0.0);
  for (std::size_t c = 0; c < channel_min_.size(); ++c) {
    put_f64(out, channel_min_[c]);
    put_f64(out, channel_max_[c]);
  }
  return out;
}

Status PerChannelMinMaxObserver::deserialize(std::string_view bytes) {
  const std::string what = "per-channel-minmax observer state: ";
  if (bytes.size() < kHeaderBytes)
    return invalid_input(what + "expected at least " + std::to_string(kHeaderBytes) + " bytes, got " +
                         std::to_string(bytes.size()));
  observer_state::Reader in(bytes);
  if (!in.magic(kMagic)) return invalid_input(what + "bad magic (not a per-channel-minmax state)");
  const uint32_t version = in.u32();
  if (version != kFormatVersion)
    return unsupported(what + "format version " + std::to_string(version) + ", expected " + std::to_string(kFormatVersion));
  const int64_t axis_option = in.i64(), axis = in.i64();
  const uint64_t channels = in.u64();
  const int64_t count = in.i64(), nans = in.i64(), infs = in.i64();
  const double lo = in.f64(), hi = in.f64();
  if (in.failed()) return internal_error(what + "size check and fields disagree");
  if (axis_option != axis_option_)
    return invalid_input(what + "axis option " + std::to_string(axis_option) + " differs from this observer's " +
                         std::to_string(axis_option_));
  // Compared by division so that a huge channel count cannot overflow the size.
  if (in.remaining() % 16 != 0 || in.remaining() / 16 != channels)
    return invalid_input(what + std::to_string(channels) + " channels need " + std::to_string(kHeaderBytes) + " + 16 * " +
                         std::to_string(channels) + " bytes, got " + std::to_string(bytes.size()));
  if (axis < -1 || (axis_option >= 0 && axis >= 0 && axis != axis_option) || (axis < 0 && channels != 0))
    return invalid_input(what + "resolved axis " + std::to_string(axis) + " does not fit axis option " +
                         std::to_string(axis_option) + " and " + std::to_string(channels) + " channels");
  if (count < 0 || nans < 0 || infs < 0) return invalid_input(what + "negative count");
  std::vector<double> cmin(channels), cmax(channels);
  double seen_min = kInf, seen_max = -kInf;
  for (uint64_t c = 0; c < channels; ++c) {
    cmin[c] = in.f64();
    cmax[c] = in.f64();
    const bool empty = cmin[c] == kInf && cmax[c] == -kInf;
    if (!empty && !(std::isfinite(cmin[c]) && std::isfinite(cmax[c]) && cmin[c] <= cmax[c]))
      return invalid_input(what + "channel " + std::to_string(c) + " has an invalid range");
    seen_min = std::min(seen_min, cmin[c]);
    seen_max = std::max(seen_max, cmax[c]);
  }
  if (count > 0 && !(same_bits(lo, seen_min) && same_bits(hi, seen_max)))
    return invalid_input(what + "the overall range is not the range of the channel ranges");
  if (count == 0 && (seen_min != kInf || !same_bits(lo, 0.0) || !same_bits(hi, 0.0)))
    return invalid_input(what + "a range is recorded but no value was counted");
  axis_ = axis;
  count_ = count;
  nan_count_ = nans;
  inf_count_ = infs;
  min_ = lo;
  max_ = hi;
  channel_min_ = std::move(cmin);
  channel_max_ = std::move(cmax);
  return Status::ok();
}

TensorStatistics PerChannelMinMaxObserver::statistics() const {
  TensorStatistics stats = range_statistics(count_, nan_count_, inf_count_, min_, max_);
  stats.axis = axis_;
  stats.channel_min = channel_min_;
  stats.channel_max = channel_max_;
  return stats;
}

}  // namespace qflow

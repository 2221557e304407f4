// MinMaxObserver: range tracking, exact merge and the versioned binary state format.
#include "minmax_observer.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "value_scan.h"

namespace qflow {

namespace {

constexpr char kMagic[4] = {'Q', 'F', 'M', 'M'};
constexpr uint32_t kFormatVersion = 1;
constexpr std::size_t kStateBytes = 4 + 4 + 3 * 8 + 2 * 8;

// Explicit little-endian encoding keeps the state portable between machines that shard
// a calibration run.
void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
uint64_t get_u64(std::string_view bytes, std::size_t at) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  return v;
}
uint32_t get_u32(std::string_view bytes, std::size_t at) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  return v;
}

}  // namespace

ComponentInfo MinMaxObserver::info() {
  ComponentInfo info;
  info.kind = ComponentKind::Observer;
  info.name = "minmax";
  info.summary = "Running minimum and maximum of the finite values; NaN and Inf are counted, never ranged";
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
  // States may come from files, so the sums are checked rather than trusted.
  int64_t count = 0, nans = 0, infs = 0;
  if (__builtin_add_overflow(count_, peer->count_, &count) || __builtin_add_overflow(nan_count_, peer->nan_count_, &nans) ||
      __builtin_add_overflow(inf_count_, peer->inf_count_, &infs))
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
  std::string out(kMagic, sizeof(kMagic));
  put_u32(out, kFormatVersion);
  put_u64(out, static_cast<uint64_t>(count_));
  put_u64(out, static_cast<uint64_t>(nan_count_));
  put_u64(out, static_cast<uint64_t>(inf_count_));
  put_u64(out, std::bit_cast<uint64_t>(count_ > 0 ? min_ : 0.0));
  put_u64(out, std::bit_cast<uint64_t>(count_ > 0 ? max_ : 0.0));
  return out;
}

Status MinMaxObserver::deserialize(std::string_view bytes) {
  if (bytes.size() != kStateBytes)
    return invalid_input("minmax observer state: expected " + std::to_string(kStateBytes) + " bytes, got " +
                         std::to_string(bytes.size()));
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0)
    return invalid_input("minmax observer state: bad magic (not a minmax state)");
  const uint32_t version = get_u32(bytes, 4);
  if (version != kFormatVersion)
    return unsupported("minmax observer state: format version " + std::to_string(version) + ", expected " +
                       std::to_string(kFormatVersion));
  const auto count = static_cast<int64_t>(get_u64(bytes, 8));
  const auto nans = static_cast<int64_t>(get_u64(bytes, 16));
  const auto infs = static_cast<int64_t>(get_u64(bytes, 24));
  const double lo = std::bit_cast<double>(get_u64(bytes, 32));
  const double hi = std::bit_cast<double>(get_u64(bytes, 40));
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
  TensorStatistics stats;
  stats.count = count_;
  stats.nan_count = nan_count_;
  stats.inf_count = inf_count_;
  if (count_ > 0) {
    stats.min = min_;
    stats.max = max_;
  }
  return stats;
}

}  // namespace qflow

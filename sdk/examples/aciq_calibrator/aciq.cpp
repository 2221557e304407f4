// Example out-of-tree observer/calibrator pair exchanging a statistic the SDK does not know.
//
// ACIQ (Banner et al., "Post-training 4-bit quantization of convolutional networks for
// rapid-deployment", 2019) clips a Laplace-distributed tensor at alpha(bits) * b, b the
// Laplace scale, estimated here as the mean of |x|. The observer "abs-mean" publishes the
// sum of |x| and the finite count as the named statistic "aciq.abs-mean" (next to the range
// every observer fills); the calibrator "aciq" declares that it requires it, so a pipeline
// pairing it with an observer that does not publish it is refused when it is validated.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>

#include "qflow/plugin/entry.h"
#include "qflow/quant/quant_math.h"

namespace {

constexpr const char* kStatistic = "aciq.abs-mean";  // [sum of |x|, finite values]

class AbsMeanObserver final : public qflow::Observer {
 public:
  qflow::Status observe(const qflow::Tensor& values) override {
    if (values.dtype() != qflow::DType::Float32) return qflow::invalid_input("abs-mean observer expects float32");
    for (float x : values.span<float>()) {
      if (std::isnan(x)) { ++nans_; continue; }
      if (std::isinf(x)) { ++infs_; continue; }
      min_ = count_ == 0 ? x : std::min<double>(min_, x);
      max_ = count_ == 0 ? x : std::max<double>(max_, x);
      abs_sum_ += std::fabs(static_cast<double>(x));
      ++count_;
    }
    return qflow::Status::ok();
  }
  // Shards merge in a fixed order, so the sum is the same on every run.
  qflow::Status merge(const qflow::Observer& other) override {
    const auto* peer = dynamic_cast<const AbsMeanObserver*>(&other);
    if (!peer) return qflow::invalid_input("abs-mean observer can only merge another abs-mean observer");
    if (peer->count_ > 0) {
      min_ = count_ == 0 ? peer->min_ : std::min(min_, peer->min_);
      max_ = count_ == 0 ? peer->max_ : std::max(max_, peer->max_);
    }
    count_ += peer->count_;
    nans_ += peer->nans_;
    infs_ += peer->infs_;
    abs_sum_ += peer->abs_sum_;
    return qflow::Status::ok();
  }
  std::string serialize() const override {
    std::string out(sizeof(State), '\0');
    const State state{count_, nans_, infs_, min_, max_, abs_sum_};
    std::memcpy(out.data(), &state, sizeof state);
    return out;
  }
  qflow::Status deserialize(std::string_view bytes) override {
    if (bytes.size() != sizeof(State)) return qflow::invalid_input("abs-mean observer state: wrong size");
    State state;
    std::memcpy(&state, bytes.data(), sizeof state);
    count_ = state.count, nans_ = state.nans, infs_ = state.infs;
    min_ = state.min, max_ = state.max, abs_sum_ = state.abs_sum;
    return qflow::Status::ok();
  }
  qflow::TensorStatistics statistics() const override {
    qflow::TensorStatistics stats;
    stats.count = count_;
    stats.nan_count = nans_;
    stats.inf_count = infs_;
    if (count_ > 0) stats.min = min_, stats.max = max_;
    stats.named[kStatistic] = {abs_sum_, static_cast<double>(count_)};
    return stats;
  }

 private:
  struct State {
    int64_t count, nans, infs;
    double min, max, abs_sum;
  };
  int64_t count_ = 0, nans_ = 0, infs_ = 0;
  double min_ = 0.0, max_ = 0.0, abs_sum_ = 0.0;
};

// The clipping that minimises the expected squared error of a Laplace(b) variable on a
// uniform grid of 2^bits levels, in units of b (the paper's table).
double laplace_alpha(int bits) {
  static constexpr double kAlpha[] = {2.83, 3.89, 5.03, 6.20, 7.41, 8.64, 9.89};  // 2 to 8 bits
  return bits >= 2 && bits <= 8 ? kAlpha[bits - 2] : 0.0;
}

class AciqCalibrator final : public qflow::Calibrator {
 public:
  qflow::Expected<qflow::QuantTable> calibrate(const qflow::CalibrationRequest& request) override {
    if (request.statistics == nullptr) return qflow::internal_error("aciq: calibration request without statistics");
    qflow::QuantTable table;
    for (const auto& [name, stats] : *request.statistics) {
      auto named = stats.named.find(kStatistic);
      if (named == stats.named.end() || named->second.size() != 2)
        return qflow::invalid_input("aciq: tensor '" + name + "' has no '" + kStatistic + "' statistic");
      if (stats.count == 0) continue;
      const double b = named->second[0] / named->second[1];
      const qflow::QuantSpec spec = request.spec_for(name);
      const int narrowed = qflow::grid_bits(spec.activation_dtype, spec.activation_bits);
      const int bits = narrowed ? narrowed : static_cast<int>(qflow::dtype_size(spec.activation_dtype) * 8);
      const double magnitude = qflow::observed_magnitude(stats);
      // Past 8 bits the table ends; the observed range is then the threshold.
      const double alpha = laplace_alpha(bits);
      const double threshold = alpha > 0.0 && b > 0.0 ? std::min(alpha * b, magnitude) : magnitude;
      QFLOW_ASSIGN_OR_RETURN(qflow::QuantParams params, qflow::activation_params(spec, stats, threshold, "aciq", name));
      table.emplace(name, std::move(params));
    }
    return table;
  }
};

qflow::Status register_components(qflow::ComponentRegistrar& registrar) {
  qflow::ComponentInfo observer;
  observer.kind = qflow::ComponentKind::Observer;
  observer.name = "abs-mean";
  observer.summary = "example: the range and the mean of |x| (statistic aciq.abs-mean)";
  observer.published_statistics = {std::string(qflow::kStatisticRange), kStatistic};
  QFLOW_RETURN_IF_ERROR(registrar.add_observer(std::move(observer), [](const qflow::Options&) {
    return qflow::Expected<std::unique_ptr<qflow::Observer>>(std::make_unique<AbsMeanObserver>());
  }));
  qflow::ComponentInfo calibrator;
  calibrator.kind = qflow::ComponentKind::Calibrator;
  calibrator.name = "aciq";
  calibrator.summary = "example: Laplace clipping, alpha(bits) * mean |x|, at most the observed range";
  calibrator.required_statistics = {kStatistic};
  return registrar.add_calibrator(std::move(calibrator), [](const qflow::Options&) {
    return qflow::Expected<std::unique_ptr<qflow::Calibrator>>(std::make_unique<AciqCalibrator>());
  });
}

}  // namespace

QFLOW_PLUGIN("qflow-example-aciq", "1.0.0", register_components)

// A well-formed test plugin: one component of every kind, options of every type, and factories that fail on request.
#include <stdexcept>

#include "qflow/plugin/entry.h"

namespace {

using namespace qflow;

class CountingObserver final : public Observer {
 public:
  explicit CountingObserver(int64_t step) : step_(step) {}
  Status observe(const Tensor& values) override {
    (void)values;
    stats_.count += step_;
    return Status::ok();
  }
  Status merge(const Observer& other) override {
    stats_.count += static_cast<const CountingObserver&>(other).stats_.count;
    return Status::ok();
  }
  std::string serialize() const override { return std::to_string(stats_.count); }
  Status deserialize(std::string_view bytes) override {
    stats_.count = std::stoll(std::string(bytes));
    return Status::ok();
  }
  TensorStatistics statistics() const override { return stats_; }

 private:
  int64_t step_;
  TensorStatistics stats_;
};

class FixedCalibrator final : public Calibrator {
 public:
  explicit FixedCalibrator(double scale) : scale_(scale) {}
  Expected<QuantTable> calibrate(const CalibrationRequest& request) override {
    QuantTable table;
    if (!request.statistics) return table;
    for (const auto& [name, stats] : *request.statistics) {
      (void)stats;
      table[name].scale = {static_cast<float>(scale_)};
      table[name].zero_point = {0};
      table[name].method = "fixed";
    }
    return table;
  }

 private:
  double scale_;
};

class NoopPass final : public Pass {
 private:
  Expected<PassResult> run_impl(Model& model) override {
    (void)model;
    return PassResult{};
  }
};

class NullTarget final : public Target {
 public:
  Expected<std::vector<NodeCapability>> partition(const Model&) const override { return std::vector<NodeCapability>{}; }
  Expected<TargetReport> check(const Model&) const override { return TargetReport{"{}", "null"}; }
  Expected<TargetReport> estimate(const Model&, const QuantTable&) const override { return unsupported("null: no estimate"); }
  Expected<std::vector<TargetArtifact>> lower(const Model&) const override {
    return std::vector<TargetArtifact>{{"null", ".null", "null"}};
  }
};

Status register_components(ComponentRegistrar& registrar) {
  QFLOW_RETURN_IF_ERROR(registrar.add_observer(
      {ComponentKind::Observer,
       "counter",
       "counts the tensors it sees",
       {{"step", OptionType::Int, int64_t{1}, "added per observed tensor", {.min = 1.0}},
        {"verbose", OptionType::Bool, false, ""},
        {"tags", OptionType::StringList, std::vector<std::string>{"a", "b c"}, "free-form labels"}}},
      [](const Options& options) -> Expected<std::unique_ptr<Observer>> {
        return std::unique_ptr<Observer>(std::make_unique<CountingObserver>(options.get_int("step")));
      }));
  // A negative scale is refused with a status, 13 makes the factory throw.
  QFLOW_RETURN_IF_ERROR(registrar.add_calibrator(
      {ComponentKind::Calibrator,
       "fixed",
       "the same scale for every tensor",
       {{"scale", OptionType::Float, 0.5, "the scale"}, {"label", OptionType::String, std::string("fixed"), ""}}},
      [](const Options& options) -> Expected<std::unique_ptr<Calibrator>> {
        const double scale = options.get_float("scale");
        if (scale == 13.0) throw std::runtime_error("unlucky scale");
        if (scale < 0) return invalid_input("scale must be positive, got " + std::to_string(scale));
        return std::unique_ptr<Calibrator>(std::make_unique<FixedCalibrator>(scale));
      }));
  QFLOW_RETURN_IF_ERROR(registrar.add_pass({ComponentKind::Pass, "noop", "changes nothing", {}},
                                           [](const Options&) -> Expected<std::unique_ptr<Pass>> {
                                             return std::unique_ptr<Pass>(std::make_unique<NoopPass>());
                                           }));
  return registrar.add_target({ComponentKind::Target, "null", "runs nothing, emits a fixed string", {}},
                              [](const Options&) -> Expected<std::unique_ptr<Target>> {
                                return std::unique_ptr<Target>(std::make_unique<NullTarget>());
                              });
}

}  // namespace

QFLOW_PLUGIN("test-good", "1.2.3", register_components)

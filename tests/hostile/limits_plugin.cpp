// A test plugin for the run limits and factory failures: passes that compute for a given
// time, hold a given amount of memory, or whose factory throws or returns an error.
#include <chrono>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "qflow/plugin/entry.h"

namespace {

using namespace qflow;

// Spins (no sleep, no cancellation point) for `seconds`: a stage only a watchdog can stop.
class SpinPass final : public Pass {
 public:
  explicit SpinPass(double seconds) : seconds_(seconds) {}

 private:
  Expected<PassResult> run_impl(Model& model) override {
    (void)model;
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds_);
    volatile uint64_t spins = 0;
    while (std::chrono::steady_clock::now() < end) spins = spins + 1;
    return PassResult{};
  }
  double seconds_;
};

// Touches `bytes` of memory and keeps it for `seconds`, so the resident size really grows.
class HoldMemoryPass final : public Pass {
 public:
  HoldMemoryPass(int64_t bytes, double seconds) : bytes_(bytes), seconds_(seconds) {}

 private:
  Expected<PassResult> run_impl(Model& model) override {
    (void)model;
    std::unique_ptr<char[]> block(new char[static_cast<std::size_t>(bytes_)]);
    std::memset(block.get(), 1, static_cast<std::size_t>(bytes_));
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds_);
    volatile char sink = 0;
    while (std::chrono::steady_clock::now() < end) sink = static_cast<char>(sink + block[static_cast<std::size_t>(bytes_) / 2]);
    return PassResult{};
  }
  int64_t bytes_;
  double seconds_;
};

class NoopPass final : public Pass {
 private:
  Expected<PassResult> run_impl(Model& model) override {
    (void)model;
    return PassResult{};
  }
};

Status register_components(ComponentRegistrar& registrar) {
  QFLOW_RETURN_IF_ERROR(registrar.add_pass(
      {ComponentKind::Pass, "spin", "computes for a while without a cancellation point",
       {{"seconds", OptionType::Float, 1.0, "how long"}}},
      [](const Options& options) -> Expected<std::unique_ptr<Pass>> {
        return std::unique_ptr<Pass>(std::make_unique<SpinPass>(options.get_float("seconds")));
      }));
  QFLOW_RETURN_IF_ERROR(registrar.add_pass(
      {ComponentKind::Pass, "hold-memory", "touches memory and keeps it for a while",
       {{"bytes", OptionType::Int, int64_t{1} << 20, "how much"}, {"seconds", OptionType::Float, 1.0, "how long"}}},
      [](const Options& options) -> Expected<std::unique_ptr<Pass>> {
        if (options.get_int("bytes") <= 0) return invalid_input("bytes must be positive");
        return std::unique_ptr<Pass>(
            std::make_unique<HoldMemoryPass>(options.get_int("bytes"), options.get_float("seconds")));
      }));
  QFLOW_RETURN_IF_ERROR(registrar.add_pass({ComponentKind::Pass, "factory-throws", "its factory throws", {}},
                                           [](const Options&) -> Expected<std::unique_ptr<Pass>> {
                                             throw std::runtime_error("no pass today");
                                           }));
  QFLOW_RETURN_IF_ERROR(registrar.add_pass({ComponentKind::Pass, "factory-fails", "its factory returns an error", {}},
                                           [](const Options&) -> Expected<std::unique_ptr<Pass>> {
                                             return invalid_input("this pass refuses to be made");
                                           }));
  return registrar.add_pass({ComponentKind::Pass, "noop-hostile", "changes nothing", {}},
                            [](const Options&) -> Expected<std::unique_ptr<Pass>> {
                              return std::unique_ptr<Pass>(std::make_unique<NoopPass>());
                            });
}

}  // namespace

QFLOW_PLUGIN("test-limits", "1.0.0", register_components)

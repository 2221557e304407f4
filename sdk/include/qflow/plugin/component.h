// What every plugin component declares: its kind, kebab-case name, summary and options.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "qflow/plugin/options.h"

namespace qflow {

enum class ComponentKind { Observer, Calibrator, Pass, Metric, Target, Command };

inline std::string_view component_kind_name(ComponentKind kind) {
  switch (kind) {
    case ComponentKind::Observer: return "observer";
    case ComponentKind::Calibrator: return "calibrator";
    case ComponentKind::Pass: return "pass";
    case ComponentKind::Metric: return "metric";
    case ComponentKind::Target: return "target";
    case ComponentKind::Command: return "command";
  }
  return "unknown";
}

struct ComponentInfo {
  ComponentKind kind = ComponentKind::Pass;
  std::string name;     // kebab-case, unique per kind: "dead-code-elimination", "kl"
  std::string summary;  // one line
  std::vector<OptionSpec> options;
  // Observers: the statistics they fill (qflow/plugin/observer.h: "range", "channel-range",
  // "abs-histogram" for TensorStatistics' fields, any other name for TensorStatistics::named).
  // Calibrators: the statistics they read. A pipeline whose calibrator requires a statistic
  // its observer does not publish is refused when it is validated. Empty: not declared
  // (nothing is checked).
  std::vector<std::string> published_statistics = {};
  std::vector<std::string> required_statistics = {};
  // Passes: the pass reads calibration samples (PassContext::samples), so its stage must have
  // a `dataset` input; a pipeline whose stage has none is refused when it is validated.
  bool needs_samples = false;
};

}  // namespace qflow

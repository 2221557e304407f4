// ComponentRegistrar: what a plugin's registration callback uses to add its components.
#pragma once

#include <functional>
#include <memory>

#include "qflow/core/status.h"
#include "qflow/plugin/calibrator.h"
#include "qflow/plugin/component.h"
#include "qflow/plugin/metric.h"
#include "qflow/plugin/observer.h"
#include "qflow/plugin/options.h"
#include "qflow/plugin/pass.h"
#include "qflow/plugin/command.h"
#include "qflow/plugin/target.h"

namespace qflow {

// Factories receive the resolved options (every declared option present, defaults filled).
template <typename T>
using ComponentFactory = std::function<Expected<std::unique_ptr<T>>(const Options& options)>;

class ComponentRegistrar {
 public:
  virtual ~ComponentRegistrar() = default;
  // Each fails when the info is malformed (name not kebab-case, kind mismatch, duplicate
  // option) or a component of the same kind and name is already registered.
  virtual Status add_observer(ComponentInfo info, ComponentFactory<Observer> factory) = 0;
  virtual Status add_calibrator(ComponentInfo info, ComponentFactory<Calibrator> factory) = 0;
  virtual Status add_pass(ComponentInfo info, ComponentFactory<Pass> factory) = 0;
  virtual Status add_metric(ComponentInfo info, ComponentFactory<Metric> factory) = 0;
  virtual Status add_target(ComponentInfo info, ComponentFactory<Target> factory) = 0;
  virtual Status add_command(ComponentInfo info, ComponentFactory<Command> factory) = 0;
  // A named pass pipeline; its list is checked when a pipeline uses it (every pass it names
  // may come from a library loaded later).
  virtual Status add_pass_pipeline(PassPipelineInfo info) = 0;
};

}  // namespace qflow

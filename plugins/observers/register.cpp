// Entry point of libqflow_observers: registers the built-in observers with the host.
#include "histogram_observer.h"
#include "minmax_observer.h"
#include "moving_average_minmax_observer.h"
#include "per_channel_minmax_observer.h"
#include "qflow/plugin/entry.h"
#include "qflow/plugin/registrar.h"

namespace {

qflow::Status register_observers(qflow::ComponentRegistrar& registrar) {
  QFLOW_RETURN_IF_ERROR(registrar.add_observer(qflow::MinMaxObserver::info(), &qflow::MinMaxObserver::create));
  QFLOW_RETURN_IF_ERROR(registrar.add_observer(qflow::MovingAverageMinMaxObserver::info(),
                                               &qflow::MovingAverageMinMaxObserver::create));
  QFLOW_RETURN_IF_ERROR(registrar.add_observer(qflow::PerChannelMinMaxObserver::info(),
                                               &qflow::PerChannelMinMaxObserver::create));
  return registrar.add_observer(qflow::HistogramObserver::info(), &qflow::HistogramObserver::create);
}

}  // namespace

QFLOW_PLUGIN("observers", "0.1.0", register_observers)

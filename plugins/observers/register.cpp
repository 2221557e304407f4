// Entry point of libqflow_observers: registers the built-in observers with the host.
#include "minmax_observer.h"
#include "qflow/plugin/entry.h"
#include "qflow/plugin/registrar.h"

namespace {

qflow::Status register_observers(qflow::ComponentRegistrar& registrar) {
  return registrar.add_observer(qflow::MinMaxObserver::info(), &qflow::MinMaxObserver::create);
}

}  // namespace

QFLOW_PLUGIN("observers", "0.1.0", register_observers)

// Entry point of libqflow_calibrators: registers the built-in calibrators with the host.
#include "max_calibrator.h"
#include "qflow/plugin/entry.h"
#include "qflow/plugin/registrar.h"

namespace {

qflow::Status register_calibrators(qflow::ComponentRegistrar& registrar) {
  return registrar.add_calibrator(qflow::MaxCalibrator::info(), &qflow::MaxCalibrator::create);
}

}  // namespace

QFLOW_PLUGIN("calibrators", "0.1.0", register_calibrators)

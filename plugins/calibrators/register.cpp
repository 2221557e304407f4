// Entry point of libqflow_calibrators: registers the built-in calibrators with the host.
#include "auto_calibrator.h"
#include "kl_calibrator.h"
#include "load_calibrator.h"
#include "max_calibrator.h"
#include "mix_calibrator.h"
#include "mse_calibrator.h"
#include "percentile_calibrator.h"
#include "qflow/plugin/entry.h"
#include "qflow/plugin/registrar.h"

namespace {

qflow::Status register_calibrators(qflow::ComponentRegistrar& registrar) {
  QFLOW_RETURN_IF_ERROR(registrar.add_calibrator(qflow::LoadCalibrator::info(), &qflow::LoadCalibrator::create));
  QFLOW_RETURN_IF_ERROR(registrar.add_calibrator(qflow::MaxCalibrator::info(), &qflow::MaxCalibrator::create));
  QFLOW_RETURN_IF_ERROR(
      registrar.add_calibrator(qflow::PercentileCalibrator::info(), &qflow::PercentileCalibrator::create));
  QFLOW_RETURN_IF_ERROR(registrar.add_calibrator(qflow::KlCalibrator::info(), &qflow::KlCalibrator::create));
  QFLOW_RETURN_IF_ERROR(registrar.add_calibrator(qflow::MseCalibrator::info(), &qflow::MseCalibrator::create));
  QFLOW_RETURN_IF_ERROR(registrar.add_calibrator(qflow::MixCalibrator::info(), &qflow::MixCalibrator::create));
  return registrar.add_calibrator(qflow::AutoCalibrator::info(), &qflow::AutoCalibrator::create);
}

}  // namespace

QFLOW_PLUGIN("calibrators", "0.1.0", register_calibrators)

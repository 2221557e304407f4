// Mirrors the register.cpp of the observer and calibrator libraries. Passes and the target
// are left out: their component libraries pull in the interpreter and the whole lowering,
// far more than option resolution needs, and pipelines naming them stop at "unknown
// component" (the parser and the other stages are still covered).
#include "fuzz/builtin_catalog.h"

#include "plugins/calibrators/auto_calibrator.h"
#include "plugins/calibrators/kl_calibrator.h"
#include "plugins/calibrators/load_calibrator.h"
#include "plugins/calibrators/max_calibrator.h"
#include "plugins/calibrators/mix_calibrator.h"
#include "plugins/calibrators/mse_calibrator.h"
#include "plugins/calibrators/percentile_calibrator.h"
#include "plugins/observers/histogram_observer.h"
#include "plugins/observers/minmax_observer.h"
#include "plugins/observers/moving_average_minmax_observer.h"
#include "plugins/observers/per_channel_minmax_observer.h"

namespace qflow::fuzz {

const ComponentCatalog& builtin_catalog() {
  static const ComponentCatalog catalog({
      MinMaxObserver::info(), MovingAverageMinMaxObserver::info(), PerChannelMinMaxObserver::info(),
      HistogramObserver::info(), LoadCalibrator::info(), MaxCalibrator::info(), PercentileCalibrator::info(),
      KlCalibrator::info(), MseCalibrator::info(), MixCalibrator::info(), AutoCalibrator::info(),
  });
  return catalog;
}

}  // namespace qflow::fuzz

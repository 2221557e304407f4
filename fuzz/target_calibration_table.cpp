// Calibration tables (calibration_table.json) as the `load` calibrator reads them: the JSON
// parser and every per-tensor field check.
#include <string_view>

#include "fuzz/fuzz_targets.h"
#include "plugins/calibrators/load_calibrator.h"

namespace qflow::fuzz {

void fuzz_calibration_table(const uint8_t* data, size_t size) {
  (void)LoadCalibrator::parse_table(std::string_view(reinterpret_cast<const char*>(data), size),
                                    "fuzz_calibration_table.json");
}

}  // namespace qflow::fuzz

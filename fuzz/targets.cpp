// The list of fuzz targets, shared by the libFuzzer entry point and the regression runner.
#include "fuzz/fuzz_targets.h"

namespace qflow::fuzz {

const std::vector<Target>& targets() {
  static const std::vector<Target> all = {
      {"onnx_import", &fuzz_onnx_import}, {"pipeline_toml", &fuzz_pipeline_toml},
      {"calibration_table", &fuzz_calibration_table}, {"npy", &fuzz_npy},
      {"bc", &fuzz_bc}, {"hbm", &fuzz_hbm},
  };
  return all;
}

const Target* find_target(std::string_view name) {
  for (const Target& target : targets())
    if (target.name == name) return &target;
  return nullptr;
}

}  // namespace qflow::fuzz

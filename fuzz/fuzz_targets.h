// The fuzz targets: one function per loader that feeds arbitrary bytes to its public API.
// The libFuzzer executables (fuzzer_entry.cpp) and the CTest regression runner
// (regression_main.cpp) call the same functions, so every committed seed and crash input is
// replayed through exactly the code the fuzzer exercised.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace qflow::fuzz {

// A target returns normally for every input; a malformed input is an error value inside the
// loader, never an exception, crash, hang or unbounded allocation.
using TargetFunction = void (*)(const uint8_t* data, size_t size);

struct Target {
  std::string_view name;  // also the folder name under fuzz/corpus and fuzz/regressions
  TargetFunction run;
};

void fuzz_onnx_import(const uint8_t* data, size_t size);
void fuzz_pipeline_toml(const uint8_t* data, size_t size);
void fuzz_calibration_table(const uint8_t* data, size_t size);
void fuzz_npy(const uint8_t* data, size_t size);
void fuzz_bc(const uint8_t* data, size_t size);
void fuzz_hbm(const uint8_t* data, size_t size);

// Every target, in the order `make fuzz` runs them.
const std::vector<Target>& targets();
// nullptr when no target has that name.
const Target* find_target(std::string_view name);

// Limits every target applies, so a hostile size field is refused by the loader's own
// checks instead of hitting the fuzzer's memory limit: 64 MiB per tensor, and the size of
// the work a validated model may ask for when a target runs it.
inline constexpr int64_t kMaxTensorBytes = int64_t{64} << 20;
inline constexpr int64_t kMaxRunElements = int64_t{1} << 20;

}  // namespace qflow::fuzz

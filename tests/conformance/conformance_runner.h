// Runs ONNX backend test directories (model.onnx + test_data_set_*) through the importer and Executor.
#pragma once

#include <string>
#include <vector>

namespace qflow::conformance {

enum class Outcome { Passed, Failed, Skipped };

struct TestResult {
  std::string name;
  Outcome outcome = Outcome::Failed;
  std::string reason;  // empty when passed
};

struct Tolerance {
  double rtol = 1e-3;
  double atol = 1e-5;
};

// One test directory. Unsupported features (dtype, op without kernel) skip; anything else
// that goes wrong fails with the first mismatch or error as the reason.
TestResult run_test_dir(const std::string& dir, const Tolerance& tolerance = {});

// Every test directory of `suite_dir` whose name contains `filter`, sorted by name, run on
// `threads` worker threads; results come back in name order.
std::vector<TestResult> run_suite(const std::string& suite_dir, const std::string& filter, int threads,
                                  const Tolerance& tolerance = {});

}  // namespace qflow::conformance

// `qflow check` and `qflow perf`: one section of the bpu target's report on one model,
// written as text and JSON and printed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "qflow/core/status.h"

namespace qflow::cli {

struct BpuReportCommand {
  std::string_view name;         // "check"
  enum class Section { check, estimate };
  std::string_view target;       // the target component: "bpu"
  Section section;               // Target::check or Target::estimate
  std::string_view description;  // --help text
  std::string_view model_help;   // "the ONNX model to check"
  std::string_view file_stem;    // "model_check_result": .txt and .json in --out
};

// Parses the shared command line (MODEL --platform NAME [--platform-dir DIR]
// [--run-on-cpu NODE]... [--run-on-bpu NODE]... [--out DIR] [--json]), infers shapes, renders
// the report as text and JSON, writes both into --out and prints one.
Status run_bpu_report_command(const BpuReportCommand& command, const std::vector<std::string>& args);

}  // namespace qflow::cli

// `qflow check` and `qflow perf`: one section of a target's report (Target::check or
// Target::estimate) on one model, written as text and JSON and printed. The target is the
// installed one that takes the options given (a `--platform` only one target has),
// or --target.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "qflow/core/status.h"

namespace qflow::cli {

struct TargetSectionCommand {
  std::string_view name;  // "check"
  enum class Section { check, estimate };
  Section section;               // Target::check or Target::estimate
  std::string_view description;  // --help text
  std::string_view model_help;   // "the ONNX model to check"
  std::string_view file_stem;    // "model_check_result": .txt and .json in --out
};

// MODEL [--target NAME] [--OPTION VALUE]... [--out DIR] [--json]: every --OPTION is one of the
// target's own (repeated for a list option); shapes are inferred before the section is made.
Status run_target_section_command(const TargetSectionCommand& command, const std::vector<std::string>& args);

}  // namespace qflow::cli

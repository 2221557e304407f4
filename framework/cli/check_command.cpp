// `qflow check`: a target's check section of a model: where each node runs and why not on the
// accelerated path.
#include "framework/cli/command.h"
#include "framework/cli/target_section_command.h"

namespace qflow::cli {

namespace {

constexpr std::string_view kDescription =
    "Checks every node of an ONNX model against a target's platform (the target's check\n"
    "section, docs/targets.md) and prints, per node in topological order, its placement and,\n"
    "off the accelerated path, the failed constraint with the actual value, then the target's\n"
    "partition and a summary. The target is the installed one that takes the options given\n"
    "(a --platform only one target has), or --target; --help lists each target's options.\n"
    "Shapes of intermediate values come from ONNX shape inference. The text goes to stdout\n"
    "(--json: the JSON instead) and both are written to OUT/model_check_result.txt and\n"
    "OUT/model_check_result.json.";

}  // namespace

Status run_check(const std::vector<std::string>& args) {
  return run_target_section_command(
      {"check", TargetSectionCommand::Section::check, kDescription, "the ONNX model to check", "model_check_result"}, args);
}

}  // namespace qflow::cli

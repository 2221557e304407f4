// `qflow perf`: a target's performance estimate of a float model.
#include "framework/cli/command.h"
#include "framework/cli/target_section_command.h"

namespace qflow::cli {

namespace {

constexpr std::string_view kDescription =
    "Estimates the cost of a float ONNX model on a target's platform (the target's estimate\n"
    "section, docs/targets.md): per node its placement, MACs and bytes, the time of the\n"
    "accelerated path from the platform's cost figures, and totals. The target is the\n"
    "installed one that takes the options given (a --platform only one target has), or\n"
    "--target; --help lists each target's options. A target without a cost model refuses.\n"
    "Shapes come from ONNX shape inference. The text goes to stdout (--json: the JSON\n"
    "instead) and both are written to OUT/model_perf.txt and OUT/model_perf.json.";

}  // namespace

Status run_perf(const std::vector<std::string>& args) {
  return run_target_section_command(
      {"perf", TargetSectionCommand::Section::estimate, kDescription, "the ONNX model to estimate", "model_perf"}, args);
}

}  // namespace qflow::cli

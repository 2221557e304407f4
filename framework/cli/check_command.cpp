// `qflow check`: places every node of a model on the BPU or the CPU for one BPU platform and shows the partition.
#include "framework/cli/bpu_report_command.h"
#include "framework/cli/command.h"

namespace qflow::cli {

namespace {

constexpr std::string_view kDescription =
    "Checks every node of a float ONNX model against a BPU platform description (the bpu\n"
    "target's platforms: bernoulli2, bayes, nash, or a NAME.toml of your own, docs/platforms.md) and\n"
    "prints, per node in topological order, its placement (BPU or CPU), its subgraph and,\n"
    "for CPU nodes, the failed constraint with the actual value; then the convex BPU\n"
    "subgraphs with the quantize/dequantize conversions at their boundaries, and a summary.\n"
    "Shapes of intermediate values come from ONNX shape inference. The text goes to\n"
    "stdout (--json: the JSON instead) and both are written to\n"
    "OUT/model_check_result.txt and OUT/model_check_result.json. The check section of\n"
    "the bpu target (a PTQ model is checked as its lowering places it); see\n"
    "docs/bpu-checker.md.";

}  // namespace

Status run_check(const std::vector<std::string>& args) {
  return run_bpu_report_command({"check", "bpu", BpuReportCommand::Section::check, kDescription, "the ONNX model to check", "model_check_result"}, args);
}

}  // namespace qflow::cli

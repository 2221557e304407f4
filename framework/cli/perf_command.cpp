// `qflow perf`: a roofline estimate of a model on one BPU platform, per layer, per subgraph and in total.
#include "framework/cli/bpu_report_command.h"
#include "framework/cli/command.h"

namespace qflow::cli {

namespace {

constexpr std::string_view kDescription =
    "Estimates the cost of a float ONNX model on a BPU platform (bernoulli2, bayes, nash, or\n"
    "a NAME.toml of your own, docs/platforms.md): per node in topological order, its placement and\n"
    "subgraph (as qflow check partitions the model), MACs, bytes of weights read and of\n"
    "activations read and written (float32 = 4 bytes without a quantization table), and\n"
    "for BPU nodes the roofline cycles max(MACs / macs-per-cycle, bytes / bytes-per-cycle)\n"
    "from the platform's [cost] figures; then totals per subgraph and for the model, with\n"
    "the BPU time in microseconds. CPU nodes get MACs and bytes but no cycles. Shapes come\n"
    "from ONNX shape inference; symbolic dimensions count as 1. The text goes to stdout\n"
    "(--json: the JSON instead) and both are written to OUT/model_perf.txt and\n"
    "OUT/model_perf.json. The estimate section of the bpu target; see docs/bpu-checker.md.";

}  // namespace

Status run_perf(const std::vector<std::string>& args) {
  return run_bpu_report_command({"perf", "bpu", BpuReportCommand::Section::estimate, kDescription, "the ONNX model to estimate", "model_perf"}, args);
}

}  // namespace qflow::cli

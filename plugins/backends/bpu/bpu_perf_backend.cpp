// BpuPerfBackend: the bpu backend's partition with a roofline estimate of every layer, as text or JSON.
#include "bpu_perf_backend.h"

#include "perf_report.h"

namespace qflow {

ComponentInfo BpuPerfBackend::info() {
  ComponentInfo info = BpuBackend::info();
  info.name = "bpu-perf";
  info.summary = "BPU performance estimate: per-layer MACs, bytes and roofline cycles, totals per subgraph and model";
  info.options.push_back({"format", OptionType::String, std::string("text"), "report format: text or json"});
  return info;
}

Expected<std::unique_ptr<Backend>> BpuPerfBackend::create(const Options& options) {
  const std::string format = options.get_string("format");
  if (format != "text" && format != "json")
    return invalid_input("bpu-perf: option 'format' must be 'text' or 'json', got '" + format + "'");
  QFLOW_ASSIGN_OR_RETURN(BpuBackend backend, BpuBackend::from_options(options));
  return std::unique_ptr<Backend>(std::make_unique<BpuPerfBackend>(std::move(backend), format == "json"));
}

Expected<std::vector<NodeCapability>> BpuPerfBackend::capability(const Model& model) const {
  return backend_.capability(model);
}

Expected<std::string> BpuPerfBackend::compile(const Model& model, const QuantTable& qparams) const {
  QFLOW_ASSIGN_OR_RETURN(PartitionPlan plan, backend_.plan(model, qparams));
  QFLOW_ASSIGN_OR_RETURN(PerfEstimate estimate, estimate_perf(*model.graph, plan, backend_.platform(), qparams));
  return json_ ? perf_report_json(estimate) : perf_report_text(estimate);
}

}  // namespace qflow

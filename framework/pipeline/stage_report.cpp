// report: the run's report.html from the earlier stages' artifacts and records (docs/report.md).
#include "framework/pipeline/stage_util.h"

#include "framework/report/report.h"

namespace qflow {

namespace {

// "fashion_mnist" from the import stage's "fashion_mnist_original_float_model.onnx".
std::string model_name(const std::vector<FinishedStage>* finished) {
  if (!finished) return "";
  const std::string suffix = "_original_float_model.onnx";
  for (const FinishedStage& stage : *finished)
    if (stage.kind == StageKind::ImportOnnx && stage.output.size() > suffix.size() &&
        stage.output.compare(stage.output.size() - suffix.size(), suffix.size(), suffix) == 0)
      return stage.output.substr(0, stage.output.size() - suffix.size());
  return "";
}

}  // namespace

Expected<StageResult> run_report(const PipelineStage& stage, const std::map<std::string, const Artifact*>& inputs,
                                 const StageContext& context) {
  auto input = [&](const char* port) -> const Artifact* {
    auto it = inputs.find(port);
    return it == inputs.end() ? nullptr : it->second;
  };
  report::ReportSources sources;
  sources.title = string_option(stage, "title");
  if (sources.title.empty()) {
    const std::string name = model_name(context.finished);
    sources.title = name.empty() ? "qflow report" : "qflow report: " + name;
  }
  if (context.finished)
    for (const FinishedStage& finished : *context.finished)
      sources.stages.push_back({finished.id, std::string(stage_kind_name(finished.kind)), finished.use, finished.output,
                                finished.bytes, finished.seconds});
  std::optional<Model> float_model, ptq_model;
  if (const Artifact* artifact = input("model")) {
    QFLOW_ASSIGN_OR_RETURN(float_model, import_onnx_bytes(artifact->bytes, "input 'model' of stage '" + stage.id + "'"));
    sources.float_model = &*float_model;
  }
  if (const Artifact* artifact = input("ptq")) {
    QFLOW_ASSIGN_OR_RETURN(ptq_model, import_onnx_bytes(artifact->bytes, "input 'ptq' of stage '" + stage.id + "'"));
    sources.ptq_model = &*ptq_model;
  }
  if (const Artifact* artifact = input("dataset")) sources.dataset = artifact->dataset.get();
  if (const Artifact* artifact = input("statistics")) sources.statistics = artifact->statistics.get();
  if (const Artifact* artifact = input("qparams")) sources.qparams = artifact->qparams.get();
  if (const Artifact* artifact = input("check")) sources.check = artifact->bytes;
  if (const Artifact* artifact = input("perf")) sources.perf = artifact->bytes;
  if (const Artifact* artifact = input("verify")) sources.verify = artifact->bytes;
  if (const Artifact* artifact = input("sensitivity")) sources.sensitivity = artifact->bytes;
  if (const Artifact* artifact = input("precision")) sources.precision = artifact->bytes;
  sources.samples = std::get<int64_t>(stage.options.at("samples").value);
  sources.threads = context.threads;
  sources.world = context.world;
  sources.progress_label = "stage '" + stage.id + "'";
  Expected<report::ReportInput> report = report::build_report(sources);
  if (!report) return report.status().with_context("stage '" + stage.id + "'");
  StageResult result;
  result.artifact.type = ArtifactType::Report;
  result.artifact.bytes = report::render_html(*report);
  if (!report->comparison_note.empty() && sources.float_model && sources.ptq_model && sources.dataset)
    result.warnings.push_back("report: " + report->comparison_note);
  return result;
}

}  // namespace qflow

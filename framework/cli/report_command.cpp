// `qflow report OUT_DIR`: report.html and report.md again from a finished run's folder.
#include <filesystem>
#include <iostream>

#include "framework/cli/command.h"
#include "framework/core/file_io.h"
#include "framework/data/data_options.h"
#include "framework/onnx/onnx_import.h"
#include "framework/report/report.h"
#include "qflow/core/json.h"

namespace qflow::cli {

namespace {

namespace po = boost::program_options;
namespace fs = std::filesystem;

constexpr std::string_view kDescription =
    "Rebuilds OUT_DIR/report.html and writes OUT_DIR/report.md (the same sections as Markdown\n"
    "tables) from a finished `qflow run` folder: the stage records of manifest.json and the\n"
    "artifacts they name. When the run had a `report` stage its inputs (and options, unless\n"
    "given here) are used; otherwise the artifacts are found by stage kind (load-data,\n"
    "observer, calibrator, target-check, target-estimate, target-verify, the PTQ quantize stage and\n"
    "its float model). The dataset path in the manifest is taken as the run gave it, so run\n"
    "this from the folder the run was started in (else the layer comparison is left out with\n"
    "a note).\n"
    "See docs/report.md.";

struct ManifestStage {
  std::string id, kind, use, path;
  int64_t bytes = 0;
  double seconds = 0.0;
  const Json* options = nullptr;
  const Json* inputs = nullptr;
};

std::string member_text(const Json& value, std::string_view key) {
  const Json* member = json_member(value, key);
  return member && member->is_string() ? member->get_ref<const std::string&>() : "";
}

Options options_from_json(const Json* object) {
  Options options;
  if (!object) return options;
  if (!object->is_object()) return options;
  for (const auto& [name, value] : object->items()) {
    if (value.is_string()) options.set(name, value.get_ref<const std::string&>());
    else if (value.is_boolean()) options.set(name, value.get<bool>());
    else if (const std::optional<int64_t> integer = json_int64(value)) options.set(name, *integer);
    else if (value.is_number()) options.set(name, value.get<double>());
  }
  return options;
}

// observe.statistics.json: per tensor the count, range and histogram of |x|.
Expected<std::map<std::string, TensorStatistics>> read_statistics(const std::string& path) {
  QFLOW_ASSIGN_OR_RETURN(std::string text, read_file(path));
  QFLOW_ASSIGN_OR_RETURN(Json root, parse_json(text, path));
  std::map<std::string, TensorStatistics> statistics;
  const Json* tensors = json_member(root, "tensors");
  if (!tensors || !tensors->is_object()) return invalid_input(path + ": no 'tensors' object");
  for (const auto& [name, entry] : tensors->items()) {
    TensorStatistics& stats = statistics[name];
    if (const Json* v = json_member(entry, "count"); v && json_int64(*v)) stats.count = *json_int64(*v);
    if (const Json* v = json_member(entry, "min"); v && v->is_number()) stats.min = v->get<double>();
    if (const Json* v = json_member(entry, "max"); v && v->is_number()) stats.max = v->get<double>();
    if (const Json* v = json_member(entry, "histogram_range"); v && v->is_number()) stats.histogram_range = v->get<double>();
    if (const Json* v = json_member(entry, "histogram"); v && v->is_array())
      for (const Json& count : *v) stats.histogram.push_back(count.is_number() ? count.get<double>() : 0.0);
  }
  return statistics;
}

// calibration_table.json: per tensor the threshold and the method that chose it (the
// thresholds are all the report draws).
Expected<QuantTable> read_thresholds(const std::string& path) {
  QFLOW_ASSIGN_OR_RETURN(std::string text, read_file(path));
  QFLOW_ASSIGN_OR_RETURN(Json root, parse_json(text, path));
  QuantTable table;
  const Json* tensors = json_member(root, "tensors");
  if (!tensors || !tensors->is_object()) return invalid_input(path + ": no 'tensors' object");
  for (const auto& [name, entry] : tensors->items()) {
    QuantParams& params = table[name];
    if (const Json* v = json_member(entry, "threshold"); v && v->is_number()) params.threshold = v->get<double>();
    params.method = member_text(entry, "method");
  }
  return table;
}

}  // namespace

Status run_report(const std::vector<std::string>& args) {
  po::options_description options("options");
  options.add_options()
      ("help,h", "show this help")
      ("out-dir", po::value<std::string>()->required(), "the run's output folder (holds manifest.json)")
      ("samples", po::value<int64_t>(), "layer comparison on the first N samples; 0 = all (default: the stage's, or 16)")
      ("title", po::value<std::string>(), "page title (default: the stage's, or \"qflow report: <name>\")")
      ("threads", po::value<int>()->default_value(1), "samples run at once");
  po::positional_options_description positional;
  positional.add("out-dir", 1);
  QFLOW_ASSIGN_OR_RETURN(ParsedCommandLine cmd, parse_command_line("report", args, options, positional));
  if (cmd.help) {
    print_command_help("report OUT_DIR [--samples N] [--title TEXT] [--threads N]", kDescription, options);
    return Status::ok();
  }
  const fs::path folder(cmd.values["out-dir"].as<std::string>());
  const std::string manifest_path = (folder / "manifest.json").string();
  QFLOW_ASSIGN_OR_RETURN(std::string manifest_text, read_file(manifest_path));
  QFLOW_ASSIGN_OR_RETURN(Json manifest, parse_json(manifest_text, manifest_path));
  const Json* stage_list = json_member(manifest, "stages");
  if (!stage_list || !stage_list->is_array()) return invalid_input(manifest_path + ": no 'stages' array");

  std::vector<ManifestStage> stages;
  for (const Json& entry : *stage_list) {
    ManifestStage stage;
    stage.id = member_text(entry, "id");
    stage.kind = member_text(entry, "kind");
    stage.use = member_text(entry, "use");
    if (const Json* artifact = json_member(entry, "artifact")) {
      stage.path = member_text(*artifact, "path");
      if (const Json* bytes = json_member(*artifact, "bytes"); bytes && json_int64(*bytes)) stage.bytes = *json_int64(*bytes);
    }
    if (const Json* seconds = json_member(entry, "seconds"); seconds && seconds->is_number()) stage.seconds = seconds->get<double>();
    stage.options = json_member(entry, "options");
    stage.inputs = json_member(entry, "inputs");
    stages.push_back(std::move(stage));
  }
  auto by_id = [&](const std::string& id) -> const ManifestStage* {
    for (const ManifestStage& s : stages)
      if (s.id == id) return &s;
    return nullptr;
  };
  auto last_where = [&](auto predicate) -> const ManifestStage* {
    const ManifestStage* found = nullptr;
    for (const ManifestStage& s : stages)
      if (predicate(s)) found = &s;
    return found;
  };

  // Input port -> producing stage: the report stage's own inputs, else by kind.
  std::map<std::string, const ManifestStage*> sources_of;
  const ManifestStage* report_stage = last_where([](const ManifestStage& s) { return s.kind == "report"; });
  if (report_stage && report_stage->inputs && report_stage->inputs->is_object()) {
    for (const auto& [port, value] : report_stage->inputs->items()) {
      if (!value.is_string()) continue;
      const std::string& ref = value.get_ref<const std::string&>();
      sources_of[port] = by_id(ref.substr(0, ref.find('.')));
    }
  } else {
    sources_of["dataset"] = last_where([](const ManifestStage& s) { return s.kind == "load-data"; });
    sources_of["statistics"] = last_where([](const ManifestStage& s) { return s.kind == "observer"; });
    sources_of["qparams"] = last_where([](const ManifestStage& s) { return s.kind == "calibrator"; });
    sources_of["verify"] = last_where([](const ManifestStage& s) { return s.kind == "target-verify"; });
    sources_of["sensitivity"] = last_where([](const ManifestStage& s) { return s.kind == "sensitivity"; });
    sources_of["precision"] = last_where([](const ManifestStage& s) { return s.kind == "precision-search"; });
    sources_of["check"] = last_where([](const ManifestStage& s) {
      return s.use.starts_with("target-check:");
    });
    sources_of["perf"] = last_where([](const ManifestStage& s) {
      return s.use.starts_with("target-estimate:");
    });
    const ManifestStage* ptq = last_where([](const ManifestStage& s) {
      const Json* weights = s.options ? json_member(*s.options, "weights") : nullptr;
      return s.kind == "quantize" && weights && weights->is_boolean() && weights->get<bool>();
    });
    sources_of["ptq"] = ptq;
    if (ptq && ptq->inputs)
      if (const Json* model = json_member(*ptq->inputs, "model"); model && model->is_string())
        sources_of["model"] = by_id(model->get<std::string>().substr(0, model->get<std::string>().find('.')));
  }
  // The statistics stay in memory unless the run was asked to write them.
  if (const ManifestStage* observer = sources_of["statistics"]; observer && observer->path.empty())
    std::cerr << "qflow report: stage '" << observer->id << "' did not write its statistics: no histograms (run the "
              << "pipeline with --save-intermediate, or give that stage an `output`, to have them)\n";
  auto artifact_path = [&](const std::string& port) -> std::optional<std::string> {
    auto it = sources_of.find(port);
    if (it == sources_of.end() || !it->second || it->second->path.empty()) return std::nullopt;
    return (folder / it->second->path).string();
  };
  auto read_artifact = [&](const std::string& port) -> Expected<std::optional<std::string>> {
    const std::optional<std::string> path = artifact_path(port);
    if (!path) return std::optional<std::string>();
    QFLOW_ASSIGN_OR_RETURN(std::string text, read_file(*path));
    return std::optional<std::string>(std::move(text));
  };

  report::ReportSources sources;
  for (const ManifestStage& s : stages)
    if (s.kind != "report") sources.stages.push_back({s.id, s.kind, s.use, s.path, s.bytes, s.seconds});
  const Json* stage_options = report_stage ? report_stage->options : nullptr;
  const Json* stage_samples = stage_options ? json_member(*stage_options, "samples") : nullptr;
  sources.samples = cmd.values.count("samples") ? cmd.values["samples"].as<int64_t>()
                    : stage_samples                ? json_int64(*stage_samples).value_or(0)
                                                   : 16;
  if (cmd.values.count("title")) {
    sources.title = cmd.values["title"].as<std::string>();
  } else if (stage_options) {
    sources.title = member_text(*stage_options, "title");
  }
  if (sources.title.empty()) {
    const ManifestStage* import = last_where([](const ManifestStage& s) { return s.kind == "import-onnx"; });
    const Json* name = import && import->options ? json_member(*import->options, "name") : nullptr;
    sources.title = name && name->is_string() ? "qflow report: " + name->get_ref<const std::string&>() : "qflow report";
  }
  sources.threads = cmd.values["threads"].as<int>();

  std::optional<Model> float_model, ptq_model;
  if (auto path = artifact_path("model")) {
    QFLOW_ASSIGN_OR_RETURN(float_model, import_onnx_file(*path));
    sources.float_model = &*float_model;
  }
  if (auto path = artifact_path("ptq")) {
    QFLOW_ASSIGN_OR_RETURN(ptq_model, import_onnx_file(*path));
    sources.ptq_model = &*ptq_model;
  }
  std::optional<Dataset> dataset;
  std::string dataset_note;
  if (auto it = sources_of.find("dataset"); it != sources_of.end() && it->second) {
    Expected<DataSpec> spec = data_spec_from_options(options_from_json(it->second->options));
    Expected<Dataset> opened = spec ? open_dataset(*spec) : Expected<Dataset>(spec.status());
    if (opened) {
      dataset = std::move(*opened);
      sources.dataset = &*dataset;
    } else {
      dataset_note = "No layer comparison: the dataset of stage '" + it->second->id +
                     "' cannot be opened from here: " + opened.status().message();
    }
  }
  std::map<std::string, TensorStatistics> statistics;
  if (auto path = artifact_path("statistics")) {
    QFLOW_ASSIGN_OR_RETURN(statistics, read_statistics(*path));
    sources.statistics = &statistics;
  }
  QuantTable thresholds;
  if (auto path = artifact_path("qparams")) {
    QFLOW_ASSIGN_OR_RETURN(thresholds, read_thresholds(*path));
    sources.qparams = &thresholds;
  }
  QFLOW_ASSIGN_OR_RETURN(sources.check, read_artifact("check"));
  QFLOW_ASSIGN_OR_RETURN(sources.perf, read_artifact("perf"));
  QFLOW_ASSIGN_OR_RETURN(sources.verify, read_artifact("verify"));
  QFLOW_ASSIGN_OR_RETURN(sources.sensitivity, read_artifact("sensitivity"));
  QFLOW_ASSIGN_OR_RETURN(sources.precision, read_artifact("precision"));

  QFLOW_ASSIGN_OR_RETURN(report::ReportInput input, report::build_report(sources));
  if (!dataset_note.empty()) input.comparison_note = dataset_note;
  const std::string html_path = (folder / (report_stage ? report_stage->path : std::string("report.html"))).string();
  const std::string md_path = (fs::path(html_path).replace_extension(".md")).string();
  QFLOW_RETURN_IF_ERROR(write_file_atomic(html_path, report::render_html(input)));
  QFLOW_RETURN_IF_ERROR(write_file_atomic(md_path, report::render_markdown(input)));
  std::cout << "wrote " << html_path << "\nwrote " << md_path << "\n";
  return Status::ok();
}

}  // namespace qflow::cli

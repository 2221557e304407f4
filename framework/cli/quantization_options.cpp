// --pipeline / --set quantization.KEY=VALUE and the calibration table for the accuracy commands.
#include "framework/cli/quantization_options.h"

#include <algorithm>
#include <map>
#include <vector>

#include "framework/cli/plugin_options.h"
#include "framework/pipeline/pipeline.h"
#include "framework/pipeline/pipeline_text.h"
#include "framework/quant/quantization_settings.h"
#include "framework/pipeline/stage_execution.h"
#include "framework/quant/qdq_builder.h"
#include "qflow/quant/quant_math.h"

namespace qflow::cli {

namespace po = boost::program_options;

void add_quantization_options(po::options_description& options) {
  options.add_options()
      ("pipeline", po::value<std::string>(), "use the [quantization] table of this pipeline file")
      ("set", po::value<std::vector<std::string>>()->composing(),
       "quantization.KEY=VALUE: a whole-model quantization setting, applied after --pipeline's (repeatable)");
}

bool has_quantization_options(const po::variables_map& values) {
  return values.count("pipeline") > 0 || values.count("set") > 0;
}

Expected<QuantConfig> quantization_settings(const po::variables_map& values) {
  QuantConfig config;
  if (values.count("pipeline")) {
    QFLOW_ASSIGN_OR_RETURN(Pipeline pipeline, load_pipeline(values["pipeline"].as<std::string>()));
    if (pipeline.quantization_target.name.empty()) {
      config = pipeline.quantization;
    } else {  // the table over its target's quantization rule, as `qflow run` applies it
      QFLOW_ASSIGN_OR_RETURN(ComponentRegistry * registry, plugin_registry());
      QFLOW_ASSIGN_OR_RETURN(config, pipeline_quantization(pipeline, *registry));
    }
  }
  if (!values.count("set")) return config;
  for (const std::string& text : values["set"].as<std::vector<std::string>>()) {
    QFLOW_ASSIGN_OR_RETURN(SetArgument arg, parse_set_argument(text));
    if (arg.stage != kQuantizationSet)
      return invalid_input("--set " + text + ": only quantization.KEY=VALUE applies here (keys: " +
                           join(quantization_keys(), ", ") + ")");
    const std::vector<std::string>& keys = quantization_keys();
    if (std::find(keys.begin(), keys.end(), arg.name) == keys.end())
      return invalid_input("--set " + text + ": unknown quantization key '" + arg.name + "' (allowed: " + join(keys, ", ") +
                           ")");
    Expected<OptionValue> value = parse_option_text(arg.value, quantization_key_type(arg.name));
    const Status status = value ? set_quantization_key(config.model, arg.name, *value) : value.status();
    if (!status.is_ok()) return status.with_context("--set " + text);
  }
  return config;
}

Expected<QuantTable> load_calibration_table(const Model& model, const std::string& path) {
  QFLOW_ASSIGN_OR_RETURN(ComponentRegistry * registry, plugin_registry());
  Options load_options;
  load_options.set("path", path);
  QFLOW_ASSIGN_OR_RETURN(std::shared_ptr<Calibrator> loader, registry->make_calibrator("load", load_options));
  const std::map<std::string, TensorStatistics> no_statistics;
  CalibrationRequest request;
  request.statistics = &no_statistics;
  request.model = &model;
  return loader->calibrate(request);
}

Status retype_activations(const Model& model, QuantTable& table, const QuantConfig& config) {
  for (auto& [name, params] : table) {
    if (params.axis >= 0 || params.scale.size() != 1 || params.zero_point.size() != 1) continue;
    const Value* value = model.graph->find_value(name);
    if (!value) continue;
    const QuantSpec spec = tensor_spec(*value, config);
    if (on_spec_grid(params, spec)) continue;
    const QuantRange range = grid_range(params);
    TensorStatistics stats;
    stats.count = 1;
    stats.min = static_cast<double>(params.scale[0]) * static_cast<double>(range.min - params.zero_point[0]);
    stats.max = static_cast<double>(params.scale[0]) * static_cast<double>(range.max - params.zero_point[0]);
    QFLOW_ASSIGN_OR_RETURN(QuantParams retyped, activation_params(spec, stats, params.threshold, params.method, name));
    params = std::move(retyped);
  }
  return Status::ok();
}

}  // namespace qflow::cli

// precision-search: the fewest per-node precision changes that bring the PTQ model to a target
// (docs/accuracy-debugging.md); the quantize stage replays them through its input 'precision'.
#include "framework/pipeline/stage_util.h"

#include <cstdio>

#include "framework/pipeline/component_options.h"
#include "framework/plugin/component_registry.h"
#include "framework/quant/precision_search.h"
#include "qflow/core/json.h"

namespace qflow {

namespace {

// A sensitivity.json back into the ranking (rows in file order: worst first).
Expected<SensitivityResult> read_sensitivity(const std::string& text, const std::string& source) {
  QFLOW_ASSIGN_OR_RETURN(Json doc, parse_json(text, source));
  const Json* ranking = json_member(doc, "ranking");
  if (!ranking || !ranking->is_array()) return invalid_input(source + ": no \"ranking\" array (not a sensitivity.json)");
  SensitivityResult result;
  if (const Json* samples = json_member(doc, "samples"); samples && json_int64(*samples)) result.samples = *json_int64(*samples);
  if (const Json* measured = json_member(doc, "measured"); measured && measured->is_boolean()) result.measured = measured->get<bool>();
  for (const Json& item : *ranking) {
    const Json* node = json_member(item, "node");
    const Json* op = json_member(item, "op_type");
    if (!node || !node->is_string() || !op || !op->is_string())
      return invalid_input(source + ": a ranking row without \"node\" and \"op_type\"");
    SensitivityRow row;
    row.node = node->get_ref<const std::string&>();
    row.op_type = op->get_ref<const std::string&>();
    if (const Json* w = json_member(item, "weight_cosine"); w && w->is_number()) {
      row.has_weight = true;
      row.weight_cosine = w->get<double>();
    }
    if (const Json* a = json_member(item, "activation_cosine"); a && a->is_number()) {
      row.has_activation = true;
      row.activation_cosine = a->get<double>();
    }
    result.rows.push_back(row);
  }
  return result;
}

// The placement a target gives a PTQ model: "" where it runs on the accelerated path, else
// the failed constraint.
Expected<PlacementOracle> make_target_oracle(const ComponentRegistry& registry, const std::string& name,
                                             const std::vector<std::string>& target_options, const std::string& head) {
  const ComponentInfo* info = registry.find(ComponentKind::Target, name);
  if (!info) return not_found(head + ": option 'target': no target component '" + name + "'");
  Expected<Options> values = parse_component_options(*info, target_options, "target-options");
  if (!values) return values.status().with_context(head);
  QFLOW_ASSIGN_OR_RETURN(std::shared_ptr<Target> target, registry.make_target(name, *values));
  return PlacementOracle([target](const Model& ptq) -> Expected<std::map<std::string, std::string>> {
    QFLOW_ASSIGN_OR_RETURN(const std::vector<NodeCapability> caps, target->partition(ptq));
    std::map<std::string, std::string> placement;
    for (const NodeCapability& cap : caps)
      placement[cap.node] = cap.supported ? std::string() : (cap.reason.empty() ? "unsupported" : cap.reason);
    return placement;
  });
}

}  // namespace

Expected<StageResult> run_precision_search(const PipelineStage& stage, const std::map<std::string, const Artifact*>& inputs,
                                           const ComponentRegistry& registry, const StageContext& context) {
  const std::string head = "stage '" + stage.id + "'";
  QFLOW_ASSIGN_OR_RETURN(Model float_model, model_input(stage, *inputs.at("model")));
  PrecisionSearchOptions options;
  options.target_cosine = std::get<double>(stage.options.at("target-cosine").value);
  options.max_drop = std::get<double>(stage.options.at("max-drop").value);
  options.limit = std::get<int64_t>(stage.options.at("limit").value);
  options.max_changes = std::get<int64_t>(stage.options.at("max-changes").value);
  options.max_evaluations = std::get<int64_t>(stage.options.at("max-evaluations").value);
  options.prune = std::get<bool>(stage.options.at("prune").value);
  const std::string on_miss = string_option(stage, "on-miss");
  if (on_miss != "warn" && on_miss != "error")
    return invalid_input(head + ": option 'on-miss' is \"" + on_miss + "\"; allowed: \"warn\", \"error\"");
  options.error_on_miss = on_miss == "error";
  options.threads = context.threads;

  std::shared_ptr<Metric> metric;
  const std::string metric_name = string_option(stage, "metric");
  const auto& metric_options = std::get<std::vector<std::string>>(stage.options.at("metric-options").value);
  if (!metric_name.empty()) {
    const ComponentInfo* info = registry.find(ComponentKind::Metric, metric_name);
    if (!info) return not_found(head + ": option 'metric': no metric component '" + metric_name + "'");
    Expected<Options> values = parse_component_options(*info, metric_options, "metric-options");
    if (!values) return values.status().with_context(head);
    QFLOW_ASSIGN_OR_RETURN(metric, registry.make_metric(metric_name, *values));
    options.metric = metric.get();
    options.metric_name = metric_name;
  } else if (!metric_options.empty()) {
    return invalid_input(head + ": metric-options given without a metric");
  }

  const std::string target = string_option(stage, "target");
  const auto& target_options = std::get<std::vector<std::string>>(stage.options.at("target-options").value);
  if (!target.empty()) {
    QFLOW_ASSIGN_OR_RETURN(options.oracle, make_target_oracle(registry, target, target_options, head));
  } else if (!target_options.empty()) {
    return invalid_input(head + ": option 'target-options' needs option 'target'");
  }

  SensitivityResult ranking;
  if (auto it = inputs.find("sensitivity"); it != inputs.end()) {
    QFLOW_ASSIGN_OR_RETURN(ranking, read_sensitivity(it->second->bytes, "input 'sensitivity' of " + head));
    options.sensitivity = &ranking;
  }
  if (auto it = inputs.find("statistics"); it != inputs.end()) options.statistics = it->second->statistics.get();
  options.progress = context.progress;
  options.world = context.world;
  ProgressBar bar("stage '" + stage.id + "'", 0);
  options.bar = &bar;
  QFLOW_ASSIGN_OR_RETURN(PrecisionSearchResult result,
                         search_precision(float_model, *inputs.at("qparams")->qparams, context.quantization,
                                          *inputs.at("dataset")->dataset, options));
  StageResult out;
  out.artifact.type = ArtifactType::Report;
  QFLOW_ASSIGN_OR_RETURN(out.artifact.bytes, precision_json(result));
  out.side_files["precision_overrides.toml"] = precision_overrides_file(result);
  char line[160];
  std::snprintf(line, sizeof line, "%s %.6f -> %.6f (target %.6f%s), ", result.target_kind.c_str(), result.before,
                result.after, result.threshold, result.reached ? "" : ", not reached");
  out.printed = "precision search: " + std::string(line) +
                (result.changes.empty() ? std::string("no change needed")
                                        : std::to_string(result.changes.size()) + " node change(s), " +
                                              std::to_string(result.raised_tensors) + " of " +
                                              std::to_string(result.quantized_tensors) + " quantized tensors raised; " +
                                              "overrides in precision_overrides.toml");
  if (!result.reached) out.warnings.push_back(result.miss);
  out.precision = std::move(result);
  return out;
}

}  // namespace qflow

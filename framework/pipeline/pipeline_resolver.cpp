// Pipeline validation: components, options, ports and types, output names, and the stage DAG.
#include <algorithm>
#include <deque>
#include <set>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/strong_components.hpp>
#include <boost/graph/topological_sort.hpp>

#include "framework/pipeline/component_options.h"
#include "framework/pipeline/pass_list.h"
#include "framework/pipeline/pipeline.h"
#include "framework/pipeline/pipeline_text.h"
#include "framework/plugin/component_registry.h"
#include "framework/plugin/option_checks.h"
#include "qflow/core/suggest.h"

namespace qflow {

namespace {

struct HostStage {
  std::string_view name;
  StageKind kind;
  std::vector<OptionSpec> options;
  std::vector<std::string> required;
};

const std::vector<HostStage>& host_stages() {
  static const std::vector<HostStage> stages = {
      {"import-onnx",
       StageKind::ImportOnnx,
       {{"constant-inputs", OptionType::String, std::string(),
         "inputs that become constants: \"sr=16000\" or \"a=1,2;b=0.5\" (declared type and shape); what depends "
         "on them folds, an If on them keeps the branch taken"},
        {"infer-shapes", OptionType::Bool, false,
         "record the shapes ONNX shape inference finds (what shape-dependent stages, e.g. a target check, need)"},
        {"input-shape", OptionType::String, std::string(),
         "fix input shapes: \"1,3,48,320\" (one input) or \"name=1,3,48,320;other=...\"; shapes are inferred again; "
         "\"\" with the input 'dataset': a symbolic single input takes the samples' shape with batch 1"},
        {"min-opset", OptionType::Int, int64_t{0},
         "convert models below this default-domain opset up to it with libonnx's version converter (0: keep)"},
        {"name", OptionType::String, std::string("model"), "model name used in artifact file names"},
        {"path", OptionType::String, std::string(), "the float ONNX model"}},
       {"path"}},
      {"load-data",
       StageKind::LoadData,
       {{"batch-size", OptionType::Int, int64_t{1},
         "samples a sweep reads and hands out per step (each still runs alone); never changes a number"},
        {"color", OptionType::String, std::string("rgb"), "images: channel order rgb, bgr or gray"},
        {"keep-ratio", OptionType::Bool, false,
         "images: resize inside 'resize' keeping the aspect ratio, pad the rest evenly around it"},
        {"layout", OptionType::String, std::string("nchw"), "images: sample shape [C,H,W] (nchw) or [H,W,C] (nhwc)"},
        {"limit", OptionType::Int, int64_t{0}, "use only the first N usable samples in dataset order; 0 = all"},
        {"mean", OptionType::String, std::string("0"),
         "images: subtracted after 'scale'; one number or one per channel (\"a,b,c\")"},
        {"pad-value", OptionType::Float, 0.0, "images: value of padding pixels, in 0..255 pixel units"},
        {"path", OptionType::String, std::string(),
         "a .npy batch (first axis = samples), a folder of such files read in name order, or a folder of "
         "PNG/JPEG images read in name order; NAME=PATH,NAME=PATH gives each model input its own"},
        {"resize", OptionType::String, std::string(), "images: \"HxW\" bilinear (half-pixel) resize; \"\" = keep"},
        {"scale", OptionType::Float, 0.00392156862745098, "images: multiplier of the 0..255 pixel values"},
        {"skip-nonfinite", OptionType::Bool, false,
         "skip samples holding NaN or Inf (with a warning) instead of failing"},
        {"std", OptionType::String, std::string("1"),
         "images: divisor after 'mean'; one non-zero number or one per channel (\"a,b,c\")"}},
       {"path"}},
      {"quantize",
       StageKind::Quantize,
       {{"weights", OptionType::Bool, true,
         "also quantize weights (per-channel QDQ) and biases (int32): the PTQ model; false: activations only, "
         "the calibrated model"},
        {"bias-correction", OptionType::Bool, false,
         "shift each Conv/Gemm bias by the mean output error its weight quantization causes on the calibration "
         "samples (needs input 'dataset')"}},
       {}},
      {"report",
       StageKind::Report,
       {{"samples", OptionType::Int, int64_t{16}, "layer comparison on the first N samples; 0 = all"},
        {"title", OptionType::String, std::string(), "page title; \"\" = \"qflow report: <model name>\""}},
       {}},
      {"compare",
       StageKind::Compare,
       {{"limit", OptionType::Int, int64_t{0}, "compare on the first N samples only; 0 = all"}},
       {}},
      {"sensitivity",
       StageKind::Sensitivity,
       {{"limit", OptionType::Int, int64_t{0}, "measure on the first N samples only; 0 = all"},
        {"when-below", OptionType::Float, 0.0,
         "rank nodes only when the PTQ model's output cosine is below this (a precision search's target); "
         "0 = always"},
        {"method", OptionType::String, std::string("auto"),
         "output (the model's output cosine per node), local (the node's own outputs, one float run), or auto: "
         "output unless it would run more than 50000 GMAC"},
        {"ranking-gmacs", OptionType::Float, 0.0,
         "> 0: the output ranking measures as many of the samples as this many GMAC allow (at least 4); "
         "0 = all of them"}},
       {}},
      {"compare-calibrators",
       StageKind::CompareCalibrators,
       {{"limit", OptionType::Int, int64_t{0}, "evaluate on the first N samples only; 0 = all"},
        {"metric", OptionType::String, std::string(), "a metric component scored beside the output cosine; \"\" = none"},
        {"metric-options", OptionType::StringList, std::vector<std::string>{},
         "the metric's options as \"key=value\" strings"},
        {"weights", OptionType::Bool, true,
         "evaluate the PTQ model (weights and activations quantized); false: the calibrated model (activations only)"}},
       {}},
      {"passes",
       StageKind::Passes,
       {{"passes", OptionType::String, std::string(),
         "graph passes run in memory, in order: \"constant-folding,fold-batchnorm\", options as "
         "\"name<key=value;key=value>\", named pass pipelines (\"float-optimize\") expanded in place"}},
       {"passes"}},
      {"precision-search",
       StageKind::PrecisionSearch,
       {{"limit", OptionType::Int, int64_t{0}, "measure on the first N samples only; 0 = all"},
        {"max-changes", OptionType::Int, int64_t{0}, "stop when the target needs more node changes; 0 = no limit"},
        {"max-evaluations", OptionType::Int, int64_t{0},
         "stop after this many PTQ models built and run; 0 = no limit"},
        {"max-drop", OptionType::Float, 0.01, "with a metric: the largest drop below the float model's score"},
        {"metric", OptionType::String, std::string(), "a metric component for the target; \"\" = output cosine"},
        {"metric-options", OptionType::StringList, std::vector<std::string>{},
         "the metric's options as \"key=value\" strings"},
        {"on-miss", OptionType::String, std::string("warn"),
         "when the target is not reached: \"warn\" keeps the best configuration measured, \"error\" fails the stage"},
        {"prune", OptionType::Bool, true,
         "drop the kept changes the target does not need and measure the value after each; false: the shortest "
         "reaching prefix of the ranking"},
        {"target", OptionType::String, std::string(),
         "target component asked where each node of a PTQ model may run; \"\" = int16 allowed everywhere"},
        {"target-cosine", OptionType::Float, 0.999, "without a metric: the output cosine the PTQ model must reach"},
        {"target-options", OptionType::StringList, std::vector<std::string>{},
         "the target's options as \"key=value\" strings (\"platform=nash\", \"platform-dir=DIR\")"}},
       {}},
  };
  return stages;
}

const HostStage* find_host(std::string_view name) {
  for (const HostStage& host : host_stages())
    if (host.name == name) return &host;
  return nullptr;
}

StageKind kind_of(ComponentKind kind) {
  switch (kind) {
    case ComponentKind::Observer: return StageKind::Observer;
    case ComponentKind::Calibrator: return StageKind::Calibrator;
    case ComponentKind::Pass: return StageKind::Pass;
    case ComponentKind::Metric: break;  // not a stage: stages name metrics in options
    case ComponentKind::Target: break;  // its stage kind comes from the `use` prefix
    case ComponentKind::Command: break;  // not a stage: a CLI subcommand
  }
  return StageKind::Pass;
}

constexpr StageKind kTargetStages[] = {StageKind::TargetCheck, StageKind::TargetEstimate, StageKind::TargetLower,
                                       StageKind::TargetVerify};

// "target-check" -> TargetCheck, ...: the stage kinds a target component serves.
std::optional<StageKind> target_stage_from(std::string_view text) {
  for (StageKind kind : kTargetStages)
    if (stage_kind_name(kind) == text) return kind;
  return std::nullopt;
}

std::optional<ComponentKind> component_kind_from(std::string_view text) {
  for (ComponentKind kind : {ComponentKind::Observer, ComponentKind::Calibrator, ComponentKind::Pass})
    if (component_kind_name(kind) == text) return kind;
  return std::nullopt;
}

std::string qualified(const ComponentInfo& info) {
  return std::string(component_kind_name(info.kind)) + ":" + info.name;
}

// What the stage runs, for messages: "pass 'dead-code-elimination'", "import-onnx".
std::string describe(const PipelineStage& stage) {
  if (is_host_stage(stage.kind)) return stage.component;
  return std::string(stage_kind_name(stage.kind)) + " '" + stage.component + "'";
}

struct Resolved {
  StageKind kind;
  std::string name;
  const std::vector<OptionSpec>* options;
  std::vector<std::string> required;
};

class Resolver {
 public:
  Resolver(Pipeline& pipeline, const ComponentCatalog& catalog) : pipeline_(pipeline), catalog_(catalog) {}

  Status run(const std::vector<std::string>& sets) {
    std::map<std::string, std::vector<SetArgument>> stage_sets;
    for (const std::string& text : sets) {
      QFLOW_ASSIGN_OR_RETURN(SetArgument arg, parse_set_argument(text));
      if (arg.stage.empty() || arg.stage == kQuantizationSet) continue;
      if (const SkippedStage* skipped = find_skipped(arg.stage))
        return invalid_input("--set " + text + ": stage '" + arg.stage + "' is left out of this run (when " + skipped->why + ")");
      if (!index_of(arg.stage))
        return invalid_input("--set " + text + ": no stage '" + arg.stage + "' (stages: " + join(stage_ids(), ", ") + ")");
      stage_sets[arg.stage].push_back(arg);
    }
    QFLOW_RETURN_IF_ERROR(resolve_quantization_target());
    for (PipelineStage& stage : pipeline_.stages) {
      QFLOW_ASSIGN_OR_RETURN(Resolved resolved, resolve_use(stage));
      stage.kind = resolved.kind;
      stage.component = resolved.name;
      stage.output_type = stage_output(stage.kind);
      QFLOW_RETURN_IF_ERROR(resolve_options(stage, resolved, stage_sets[stage.id]));
      if (stage.options.count("metric")) QFLOW_RETURN_IF_ERROR(check_metric(stage));
      if (stage.kind == StageKind::Passes) QFLOW_RETURN_IF_ERROR(resolve_pass_list(stage));
    }
    for (PipelineStage& stage : pipeline_.stages) QFLOW_RETURN_IF_ERROR(resolve_inputs(stage));
    for (const PipelineStage& stage : pipeline_.stages) QFLOW_RETURN_IF_ERROR(check_statistics(stage));
    for (const PipelineStage& stage : pipeline_.stages) QFLOW_RETURN_IF_ERROR(check_pass_samples(stage));
    QFLOW_RETURN_IF_ERROR(resolve_outputs());
    return order();
  }

 private:
  std::vector<std::string> stage_ids() const {
    std::vector<std::string> ids;
    for (const PipelineStage& stage : pipeline_.stages) ids.push_back(stage.id);
    return ids;
  }

  const SkippedStage* find_skipped(const std::string& id) const {
    for (const SkippedStage& skipped : pipeline_.skipped)
      if (skipped.id == id) return &skipped;
    return nullptr;
  }

  // [quantization] target: a target component, its options checked against its declaration.
  Status resolve_quantization_target() const {
    const QuantizationTarget& target = pipeline_.quantization_target;
    if (target.name.empty()) {
      if (target.options.empty()) return Status::ok();
      return invalid_input(target.options_pos.prefix() + "in [quantization]: 'target-options' needs 'target'");
    }
    const ComponentInfo* info = catalog_.find(ComponentKind::Target, target.name);
    if (!info) {
      std::vector<std::string> names;
      for (const ComponentInfo& c : catalog_.components())
        if (c.kind == ComponentKind::Target) names.push_back(c.name);
      std::sort(names.begin(), names.end());
      return not_found(target.pos.prefix() + "in [quantization]: unknown target '" + target.name + "' (targets: " +
                       (names.empty() ? std::string("none installed") : join(names, ", ")) + ")");
    }
    Expected<Options> parsed = parse_component_options(*info, target.options, "target-options");
    if (!parsed) {
      const SourcePos& pos = target.options_pos.line ? target.options_pos : target.pos;
      return invalid_input(pos.prefix() + "in [quantization]: " + parsed.status().message());
    }
    return Status::ok();
  }

  std::optional<std::size_t> index_of(const std::string& id) const {
    for (std::size_t i = 0; i < pipeline_.stages.size(); ++i)
      if (pipeline_.stages[i].id == id) return i;
    return std::nullopt;
  }

  // `stage_kind`: how a suggestion is spelled for a target ("target-lower"), which has no
  // stage kind of its own.
  Status unknown_component(const PipelineStage& stage, const std::string& name, std::optional<ComponentKind> kind,
                           const std::string& stage_kind = "") const {
    std::vector<std::string> close;
    for (const ComponentInfo& info : catalog_.components())
      if ((!kind || info.kind == *kind) && is_similar_name(name, info.name)) {
        if (!stage_kind.empty()) close.push_back(stage_kind + ":" + info.name);
        else if (info.kind != ComponentKind::Target) close.push_back(qualified(info));
        else  // a target is used through one of its stage kinds
          for (StageKind target_stage : kTargetStages)
            close.push_back(std::string(stage_kind_name(target_stage)) + ":" + info.name);
      }
    if (!kind) {
      for (const HostStage& host : host_stages())
        if (is_similar_name(name, host.name)) close.push_back(std::string(host.name));
      // "verify" (a host stage before targets ran their own files) -> "target-verify:<target>".
      for (StageKind target_stage : kTargetStages)
        if (std::string(stage_kind_name(target_stage)) == "target-" + name)
          for (const ComponentInfo& info : catalog_.components())
            if (info.kind == ComponentKind::Target) close.push_back("target-" + name + ":" + info.name);
    }
    std::sort(close.begin(), close.end());
    const std::string what = kind ? std::string(component_kind_name(*kind)) + " '" + name + "'" : "component '" + name + "'";
    const std::string hint = close.empty() ? "see 'qflow plugins' for the installed components"
                                           : "did you mean " + join(close, " or ") + "?";
    return not_found(stage.use_pos.prefix() + "stage '" + stage.id + "': unknown " + what + " (" + hint + ")");
  }

  Expected<Resolved> resolve_use(const PipelineStage& stage) const {
    const std::string& use = stage.use;
    const std::size_t colon = use.find(':');
    if (colon != std::string::npos) {
      const std::string kind_text = use.substr(0, colon);
      const std::string name = use.substr(colon + 1);
      if (const std::optional<StageKind> target_stage = target_stage_from(kind_text)) {
        const ComponentInfo* info = catalog_.find(ComponentKind::Target, name);
        if (!info) return unknown_component(stage, name, ComponentKind::Target, kind_text);
        std::vector<OptionSpec>& options = target_options_.emplace_back(info->options);
        for (const OptionSpec& extra : target_stage_options(*target_stage)) {
          if (find_spec(options, extra.name))
            return invalid_input(stage.use_pos.prefix() + "stage '" + stage.id + "': target '" + name +
                                 "' declares option '" + extra.name + "', which the " +
                                 std::string(stage_kind_name(*target_stage)) + " stage itself takes");
          options.push_back(extra);
        }
        return Resolved{*target_stage, info->name, &options, {}};
      }
      const std::optional<ComponentKind> kind = component_kind_from(kind_text);
      if (!kind)
        return invalid_input(stage.use_pos.prefix() + "stage '" + stage.id + "': unknown component kind '" + kind_text +
                             "' in '" + use +
                             "' (kinds: observer, calibrator, pass, target-check, target-estimate, target-lower, "
                             "target-verify)");
      const ComponentInfo* info = catalog_.find(*kind, name);
      if (!info) return unknown_component(stage, name, kind);
      return Resolved{kind_of(info->kind), info->name, &info->options, {}};
    }
    if (const HostStage* host = find_host(use)) return Resolved{host->kind, use, &host->options, host->required};
    std::vector<const ComponentInfo*> found = catalog_.find_any(use);
    std::erase_if(found, [](const ComponentInfo* info) {
      return info->kind == ComponentKind::Metric || info->kind == ComponentKind::Target;
    });
    if (found.empty()) return unknown_component(stage, use, std::nullopt);
    if (found.size() > 1) {
      std::vector<std::string> spellings;
      for (const ComponentInfo* info : found) {
        std::string spelling = qualified(*info);
        spellings.push_back('\'' + spelling + '\'');
      }
      return invalid_input(stage.use_pos.prefix() + "stage '" + stage.id + "': '" + use +
                           "' names components of several kinds; write " + join(spellings, " or "));
    }
    return Resolved{kind_of(found[0]->kind), found[0]->name, &found[0]->options, {}};
  }

  static const OptionSpec* find_spec(const std::vector<OptionSpec>& specs, const std::string& name) {
    for (const OptionSpec& spec : specs)
      if (spec.name == name) return &spec;
    return nullptr;
  }

  Status resolve_options(PipelineStage& stage, const Resolved& resolved, const std::vector<SetArgument>& sets) const {
    const std::vector<OptionSpec>& specs = *resolved.options;
    for (auto& [name, option] : stage.options) {
      const OptionSpec* spec = find_spec(specs, name);
      if (!spec)
        return invalid_input(option.pos.prefix() + "stage '" + stage.id + "': " +
                             undeclared_option_text(name, describe(stage), specs));
      OptionType given = option_value_type(option.value);
      // An int is a valid float; the canonical form then spells it as a float.
      if (spec->type == OptionType::Float && given == OptionType::Int) {
        option.value = static_cast<double>(std::get<int64_t>(option.value));
        given = OptionType::Float;
      }
      if (given != spec->type)
        return invalid_input(option.pos.prefix() + "stage '" + stage.id + "': option '" + name + "' of " +
                             describe(stage) + " expects " + std::string(option_type_name(spec->type)) + ", got " +
                             std::string(option_type_name(given)));
      // A value that a --set replaces is checked as the --set's value below.
      const bool replaced = std::any_of(sets.begin(), sets.end(), [&](const SetArgument& set) { return set.name == name; });
      Status fits = replaced ? Status::ok() : check_option_value(*spec, option.value, describe(stage));
      if (!fits.is_ok()) return invalid_input(option.pos.prefix() + "stage '" + stage.id + "': " + fits.message());
    }
    for (const SetArgument& set : sets) {
      const std::string text = "--set " + set.stage + "." + set.name + "=" + set.value;
      const OptionSpec* spec = find_spec(specs, set.name);
      if (!spec) return invalid_input(text + ": " + undeclared_option_text(set.name, describe(stage), specs));
      Expected<OptionValue> value = parse_option_text(set.value, spec->type);
      if (!value) return value.status().with_context(text + ": option '" + set.name + "'");
      QFLOW_RETURN_IF_ERROR(check_option_value(*spec, *value, describe(stage)).with_context(text));
      stage.options[set.name] = StageOption{std::move(*value), SourcePos{}, {}};
    }
    for (const OptionSpec& spec : specs)
      if (!stage.options.count(spec.name)) stage.options[spec.name] = StageOption{spec.default_value, SourcePos{}, {}};
    for (const std::string& name : resolved.required) {
      const StageOption& option = stage.options.at(name);
      if (option_value_type(option.value) == OptionType::String && std::get<std::string>(option.value).empty())
        return invalid_input(stage.pos.prefix() + "stage '" + stage.id + "': " + describe(stage) + " needs option '" +
                             name + "'" +
                             (option.var.empty() ? std::string()
                                                 : " (var '" + option.var + "' is empty: --set " + option.var + "=...)"));
    }
    return Status::ok();
  }

  // Host stages that score models name a metric component and its options as strings; both
  // are checked here so that a typo fails before the first stage runs.
  // A passes stage's list: every name a pass or a named pass pipeline, every option declared.
  Status resolve_pass_list(PipelineStage& stage) const {
    const StageOption& option = stage.options.at("passes");
    const std::string& text = std::get<std::string>(option.value);
    Expected<std::vector<PassInvocation>> passes =
        expand_pass_list(text, catalog_, "stage '" + stage.id + "': option 'passes'");
    if (!passes) return invalid_input(option.pos.prefix() + passes.status().message());
    stage.pass_names.clear();
    for (const PassInvocation& pass : *passes) stage.pass_names.push_back(pass.name);
    stage.pass_pipelines.clear();
    for (const PassPipelineInfo* pipeline : pass_pipelines_used(text, catalog_)) stage.pass_pipelines.push_back(*pipeline);
    return Status::ok();
  }

  Status check_metric(const PipelineStage& stage) const {
    const StageOption& metric = stage.options.at("metric");
    const std::string& name = std::get<std::string>(metric.value);
    const StageOption& items = stage.options.at("metric-options");
    const std::string head = "stage '" + stage.id + "': ";
    if (name.empty()) {
      if (std::get<std::vector<std::string>>(items.value).empty()) return Status::ok();
      return invalid_input(items.pos.prefix() + head + "option 'metric-options' is given without a 'metric'");
    }
    const ComponentInfo* info = catalog_.find(ComponentKind::Metric, name);
    if (!info) {
      std::vector<std::string> names;
      for (const ComponentInfo& c : catalog_.components())
        if (c.kind == ComponentKind::Metric) names.push_back(c.name);
      std::sort(names.begin(), names.end());
      return not_found(metric.pos.prefix() + head + "unknown metric '" + name + "' (metrics: " +
                       (names.empty() ? std::string("none installed") : join(names, ", ")) + ")");
    }
    Expected<Options> parsed = parse_component_options(*info, std::get<std::vector<std::string>>(items.value), "metric-options");
    if (!parsed) return invalid_input(items.pos.prefix() + head + parsed.status().message());
    return Status::ok();
  }

  // A pass that reads calibration samples needs its stage to have a dataset input.
  Status check_pass_samples(const PipelineStage& stage) const {
    if (stage.kind != StageKind::Pass && stage.kind != StageKind::Passes) return Status::ok();
    if (stage.inputs.count("dataset")) return Status::ok();
    const std::vector<std::string> names =
        stage.kind == StageKind::Pass ? std::vector<std::string>{stage.component} : stage.pass_names;
    for (const std::string& name : names) {
      const ComponentInfo* info = catalog_.find(ComponentKind::Pass, name);
      if (!info || !info->needs_samples) continue;
      return invalid_input(stage.use_pos.prefix() + "stage '" + stage.id + "': pass '" + name +
                           "' reads calibration samples, and the stage has no 'dataset' input (inputs = { model = ..., "
                           "dataset = \"<load-data stage>.dataset\" })");
    }
    return Status::ok();
  }

  // A calibrator that declares the statistics it reads gets them from an observer that
  // declares publishing them (an undeclared side is not checked: older plugins).
  Status check_statistics(const PipelineStage& stage) const {
    if (stage.kind != StageKind::Calibrator) return Status::ok();
    auto input = stage.inputs.find("statistics");
    if (input == stage.inputs.end()) return Status::ok();
    const std::optional<std::size_t> producer = index_of(input->second.stage);
    if (!producer || pipeline_.stages[*producer].kind != StageKind::Observer) return Status::ok();
    const PipelineStage& observer_stage = pipeline_.stages[*producer];
    const ComponentInfo* calibrator = catalog_.find(ComponentKind::Calibrator, stage.component);
    const ComponentInfo* observer = catalog_.find(ComponentKind::Observer, observer_stage.component);
    if (!calibrator || !observer || observer->published_statistics.empty()) return Status::ok();
    for (const std::string& name : calibrator->required_statistics) {
      const auto& published = observer->published_statistics;
      if (std::find(published.begin(), published.end(), name) != published.end()) continue;
      std::vector<std::string> providers;
      for (const ComponentInfo& info : catalog_.components())
        if (info.kind == ComponentKind::Observer &&
            std::find(info.published_statistics.begin(), info.published_statistics.end(), name) !=
                info.published_statistics.end())
          providers.push_back("observer:" + info.name);
      return invalid_input(input->second.pos.prefix() + "stage '" + stage.id + "': calibrator '" + stage.component +
                           "' requires the statistic '" + name + "', which observer '" + observer->name + "' (stage '" +
                           observer_stage.id + "') does not publish (it publishes " + join(published, ", ") + "; " +
                           (providers.empty() ? std::string("no installed observer does")
                                              : "published by " + join(providers, ", ")) +
                           ")");
    }
    return Status::ok();
  }

  Status resolve_inputs(PipelineStage& stage) {
    const std::vector<InputPort> ports = stage_inputs(stage.kind);
    std::vector<std::string> port_names;
    for (const InputPort& port : ports) port_names.push_back(std::string(port.name) + (port.family ? ".<label>" : ""));
    std::set<std::size_t> dependencies;
    std::vector<std::string> dropped;  // optional inputs from stages this run leaves out
    for (auto& [name, input] : stage.inputs) {
      auto port = std::find_if(ports.begin(), ports.end(), [&input_name = name](const InputPort& p) {
        return port_matches(p, input_name);  // an init-capture: clang before 16 cannot capture a binding
      });
      const std::string head = input.pos.prefix() + "input '" + name + "' of stage '" + stage.id + "'";
      if (port == ports.end())
        return invalid_input(input.pos.prefix() + "stage '" + stage.id + "': " + describe(stage) + " has no input '" +
                             name + "' (" + (ports.empty() ? std::string("it takes no inputs") : "inputs: " + join(port_names, ", ")) +
                             ")");
      if (const SkippedStage* skipped = find_skipped(input.stage)) {
        if (port->required && !port->family)
          return invalid_input(head + ": stage '" + input.stage + "' is left out of this run (when " + skipped->why +
                               "); give stage '" + stage.id + "' the same 'when'");
        dropped.push_back(name);
        continue;
      }
      const std::optional<std::size_t> source = index_of(input.stage);
      if (!source) return not_found(head + ": no stage '" + input.stage + "' (stages: " + join(stage_ids(), ", ") + ")");
      const PipelineStage& producer = pipeline_.stages[*source];
      // Run order: the producer may come later in the file, so its kind is resolved here.
      const StageKind producer_kind = producer_kind_of(*source);
      const std::string output_port(artifact_type_name(stage_output(producer_kind)));
      if (input.port.empty()) input.port = output_port;
      if (input.port != output_port)
        return not_found(head + ": stage '" + producer.id + "' has no output '" + input.port + "' (outputs: " +
                         output_port + ")");
      if (stage_output(producer_kind) != port->type)
        return invalid_input(head + " expects " + std::string(artifact_type_name(port->type)) + ", '" + input.stage +
                             "." + input.port + "' is " + output_port);
      dependencies.insert(*source);
    }
    for (const std::string& name : dropped) stage.inputs.erase(name);
    for (const InputPort& port : ports)
      if (port.required && std::none_of(stage.inputs.begin(), stage.inputs.end(),
                                        [&](const auto& input) { return port_matches(port, input.first); }))
        return invalid_input(stage.pos.prefix() + "stage '" + stage.id + "': missing input '" + std::string(port.name) +
                             (port.family ? ".<label>" : "") + "' (" + describe(stage) + " needs " +
                             required_text(ports) + ")");
    stage.dependencies.assign(dependencies.begin(), dependencies.end());
    return Status::ok();
  }

  // "qparams" names a plain port; "qparams.kl" a member of the family "qparams".
  static bool port_matches(const InputPort& port, const std::string& name) {
    if (!port.family) return port.name == name;
    return name.size() > port.name.size() + 1 && name.starts_with(port.name) && name[port.name.size()] == '.' &&
           is_identifier(std::string_view(name).substr(port.name.size() + 1));
  }

  StageKind producer_kind_of(std::size_t index) const {
    // Every stage's use was resolved before inputs are checked.
    return pipeline_.stages[index].kind;
  }

  static std::string required_text(const std::vector<InputPort>& ports) {
    std::vector<std::string> names;
    for (const InputPort& port : ports)
      if (port.required) names.push_back(port.family ? "at least one " + std::string(port.name) + ".<label>" : std::string(port.name));
    return join_and(names);
  }

  Status resolve_outputs() {
    std::map<std::string, std::size_t> writer;
    for (std::size_t i = 0; i < pipeline_.stages.size(); ++i) {
      PipelineStage& stage = pipeline_.stages[i];
      stage.writes_output = !stage.output.empty() || written_by_default(stage.kind);
      if (stage.output.empty()) stage.output = default_output(stage);
      const SourcePos& pos = stage.output_pos.line ? stage.output_pos : stage.pos;
      if (stage.output == "manifest.json")
        return invalid_input(pos.prefix() + "stage '" + stage.id + "' writes 'manifest.json', which is the run's manifest");
      auto [it, inserted] = writer.emplace(stage.output, i);
      if (!inserted)
        return invalid_input(pos.prefix() + "stages '" + pipeline_.stages[it->second].id + "' and '" + stage.id +
                             "' both write '" + stage.output + "' (give one an 'output')");
    }
    return Status::ok();
  }

  // What a run writes without being asked: the tables, reports and files a user runs the
  // pipeline for. The others feed later stages and are written with --save-intermediate (or
  // an `output`): models between passes, datasets, statistics, a lowering's file list (the
  // lowered files themselves are always written).
  static bool written_by_default(StageKind kind) {
    switch (kind) {
      case StageKind::LoadData:
      case StageKind::Observer:
      case StageKind::Quantize:
      case StageKind::Pass:
      case StageKind::Passes:
      case StageKind::TargetLower: return false;
      case StageKind::ImportOnnx:
      case StageKind::Calibrator:
      case StageKind::Report:
      case StageKind::Compare:
      case StageKind::Sensitivity:
      case StageKind::CompareCalibrators:
      case StageKind::PrecisionSearch:
      case StageKind::TargetCheck:
      case StageKind::TargetEstimate:
      case StageKind::TargetVerify: return true;
    }
    return true;
  }

  static std::string default_output(const PipelineStage& stage) {
    switch (stage.kind) {
      case StageKind::ImportOnnx:
        return std::get<std::string>(stage.options.at("name").value) + "_original_float_model.onnx";
      case StageKind::LoadData: return stage.id + ".dataset.json";
      case StageKind::Observer: return stage.id + ".statistics.json";
      case StageKind::Calibrator: return "calibration_table.json";
      case StageKind::Quantize: return stage.id + ".onnx";
      case StageKind::Pass:
      case StageKind::Passes: return stage.id + ".onnx";
      case StageKind::TargetVerify: return "verify_result.json";
      case StageKind::Report: return "report.html";
      case StageKind::Compare: return "compare_per_layer.json";
      case StageKind::Sensitivity: return "sensitivity.json";
      case StageKind::CompareCalibrators: return "calibrators_compare.json";
      case StageKind::PrecisionSearch: return "precision.json";
      case StageKind::TargetCheck: return "model_check_result.json";
      case StageKind::TargetEstimate: return "model_perf.json";
      case StageKind::TargetLower: return stage.id + ".deployable.json";
    }
    return stage.id;
  }

  Status order() {
    using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;
    const std::size_t n = pipeline_.stages.size();
    Graph graph(n);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t dep : pipeline_.stages[i].dependencies) boost::add_edge(dep, i, graph);
    std::vector<std::size_t> reversed;
    try {
      boost::topological_sort(graph, std::back_inserter(reversed));
    } catch (const boost::not_a_dag&) {
      return cycle_error(graph);
    }
    pipeline_.order.assign(reversed.rbegin(), reversed.rend());
    return Status::ok();
  }

  template <typename Graph>
  Status cycle_error(const Graph& graph) const {
    const std::size_t n = pipeline_.stages.size();
    std::vector<std::size_t> component(n);
    const std::size_t count = boost::strong_components(graph, component.data());
    std::vector<std::size_t> size(count, 0);
    for (std::size_t c : component) ++size[c];
    // The first stage in file order that sits on a cycle names it, with its companions.
    for (std::size_t i = 0; i < n; ++i) {
      const PipelineStage& stage = pipeline_.stages[i];
      const bool self_loop = std::count(stage.dependencies.begin(), stage.dependencies.end(), i) > 0;
      if (size[component[i]] < 2 && !self_loop) continue;
      if (self_loop && size[component[i]] < 2)
        return invalid_input(stage.pos.prefix() + "stage '" + stage.id + "' depends on itself");
      std::vector<std::string> ids;
      for (std::size_t j = 0; j < n; ++j)
        if (component[j] == component[i]) ids.push_back("'" + pipeline_.stages[j].id + "'");
      return invalid_input(stage.pos.prefix() + "stages " + join_and(ids) + " form a cycle");
    }
    return internal_error("the stage graph has a cycle that strong_components did not find");
  }

  Pipeline& pipeline_;
  const ComponentCatalog& catalog_;
  // Per target stage: the target's options and the stage's own (a deque keeps them in place).
  mutable std::deque<std::vector<OptionSpec>> target_options_;
};

}  // namespace

std::string_view artifact_type_name(ArtifactType type) {
  switch (type) {
    case ArtifactType::Model: return "model";
    case ArtifactType::Dataset: return "dataset";
    case ArtifactType::Statistics: return "statistics";
    case ArtifactType::QParams: return "qparams";
    case ArtifactType::Report: return "report";
    case ArtifactType::Deployable: return "deployable";
  }
  return "unknown";
}

std::string_view stage_kind_name(StageKind kind) {
  switch (kind) {
    case StageKind::ImportOnnx: return "import-onnx";
    case StageKind::LoadData: return "load-data";
    case StageKind::Observer: return "observer";
    case StageKind::Calibrator: return "calibrator";
    case StageKind::Quantize: return "quantize";
    case StageKind::Pass: return "pass";
    case StageKind::Passes: return "passes";
    case StageKind::Report: return "report";
    case StageKind::Compare: return "compare";
    case StageKind::Sensitivity: return "sensitivity";
    case StageKind::CompareCalibrators: return "compare-calibrators";
    case StageKind::PrecisionSearch: return "precision-search";
    case StageKind::TargetCheck: return "target-check";
    case StageKind::TargetEstimate: return "target-estimate";
    case StageKind::TargetLower: return "target-lower";
    case StageKind::TargetVerify: return "target-verify";
  }
  return "unknown";
}

std::vector<InputPort> stage_inputs(StageKind kind) {
  switch (kind) {
    case StageKind::ImportOnnx: return {{"dataset", ArtifactType::Dataset, false}};
    case StageKind::LoadData: return {};
    case StageKind::Pass:
    case StageKind::Passes: return {{"dataset", ArtifactType::Dataset, false}, {"model", ArtifactType::Model, true}};
    case StageKind::Observer: return {{"dataset", ArtifactType::Dataset, true}, {"model", ArtifactType::Model, true}};
    case StageKind::Calibrator:
      return {{"dataset", ArtifactType::Dataset, false},
              {"model", ArtifactType::Model, false},
              {"statistics", ArtifactType::Statistics, false}};
    case StageKind::Quantize:
      return {{"dataset", ArtifactType::Dataset, false},
              {"model", ArtifactType::Model, true},
              {"precision", ArtifactType::Report, false},
              {"qparams", ArtifactType::QParams, true},
              {"statistics", ArtifactType::Statistics, false}};
    case StageKind::TargetVerify:
      return {{"dataset", ArtifactType::Dataset, true},
              {"deployable", ArtifactType::Deployable, true},
              {"model", ArtifactType::Model, true}};
    case StageKind::Report:
      return {{"check", ArtifactType::Report, false},
              {"dataset", ArtifactType::Dataset, false},
              {"model", ArtifactType::Model, false},
              {"perf", ArtifactType::Report, false},
              {"precision", ArtifactType::Report, false}, {"ptq", ArtifactType::Model, false},
              {"qparams", ArtifactType::QParams, false},
              {"sensitivity", ArtifactType::Report, false}, {"statistics", ArtifactType::Statistics, false},
              {"verify", ArtifactType::Report, false}};
    case StageKind::Compare:
      return {{"dataset", ArtifactType::Dataset, true}, {"model", ArtifactType::Model, true},
              {"quantized", ArtifactType::Model, true}};
    case StageKind::Sensitivity:
      return {{"dataset", ArtifactType::Dataset, true}, {"model", ArtifactType::Model, true},
              {"qparams", ArtifactType::QParams, true}};
    case StageKind::CompareCalibrators:
      return {{"dataset", ArtifactType::Dataset, true}, {"model", ArtifactType::Model, true},
              {"qparams", ArtifactType::QParams, true, true}};
    case StageKind::PrecisionSearch:
      return {{"dataset", ArtifactType::Dataset, true}, {"model", ArtifactType::Model, true},
              {"qparams", ArtifactType::QParams, true}, {"sensitivity", ArtifactType::Report, false},
              {"statistics", ArtifactType::Statistics, false}};
    case StageKind::TargetCheck:
    case StageKind::TargetLower: return {{"model", ArtifactType::Model, true}};
    case StageKind::TargetEstimate: return {{"model", ArtifactType::Model, true}, {"qparams", ArtifactType::QParams, false}};
  }
  return {};
}

ArtifactType stage_output(StageKind kind) {
  switch (kind) {
    case StageKind::ImportOnnx:
    case StageKind::Quantize:
    case StageKind::Pass:
    case StageKind::Passes: return ArtifactType::Model;
    case StageKind::LoadData: return ArtifactType::Dataset;
    case StageKind::Observer: return ArtifactType::Statistics;
    case StageKind::Calibrator: return ArtifactType::QParams;
    case StageKind::TargetLower: return ArtifactType::Deployable;
    case StageKind::TargetCheck:
    case StageKind::TargetEstimate:
    case StageKind::TargetVerify:
    case StageKind::Report:
    case StageKind::Compare:
    case StageKind::Sensitivity:
    case StageKind::CompareCalibrators:
    case StageKind::PrecisionSearch: return ArtifactType::Report;
  }
  return ArtifactType::Report;
}

std::vector<OptionSpec> target_stage_options(StageKind kind) {
  if (kind == StageKind::TargetLower)
    return {{"name", OptionType::String, std::string(),
             "the deployable files are written as <name><suffix> (\"\": the model's graph name)"}};
  if (kind == StageKind::TargetVerify)
    return {{"limit", OptionType::Int, int64_t{0}, "verify on the first N samples only; 0 = all"}};
  return {};
}

std::string canonical_use(const PipelineStage& stage) {
  if (is_host_stage(stage.kind)) return stage.component;
  return std::string(stage_kind_name(stage.kind)) + ":" + stage.component;
}

ComponentCatalog ComponentCatalog::from_registry(const ComponentRegistry& registry) {
  std::vector<ComponentInfo> components;
  for (const PluginLibrary& library : registry.libraries())
    components.insert(components.end(), library.components.begin(), library.components.end());
  std::vector<PassPipelineInfo> pass_pipelines;
  for (const PassPipelineInfo* pipeline : registry.pass_pipelines()) pass_pipelines.push_back(*pipeline);
  return ComponentCatalog(std::move(components), std::move(pass_pipelines));
}

const PassPipelineInfo* ComponentCatalog::find_pass_pipeline(const std::string& name) const {
  for (const PassPipelineInfo& pipeline : pass_pipelines_)
    if (pipeline.name == name) return &pipeline;
  return nullptr;
}

std::vector<const ComponentInfo*> ComponentCatalog::find_any(const std::string& name) const {
  std::vector<const ComponentInfo*> found;
  for (const ComponentInfo& info : components_)
    if (info.name == name) found.push_back(&info);
  return found;
}

const ComponentInfo* ComponentCatalog::find(ComponentKind kind, const std::string& name) const {
  for (const ComponentInfo& info : components_)
    if (info.kind == kind && info.name == name) return &info;
  return nullptr;
}

Status resolve_pipeline(Pipeline& pipeline, const ComponentCatalog& catalog, const std::vector<std::string>& sets) {
  return Resolver(pipeline, catalog).run(sets);
}

}  // namespace qflow

// Precision search: greedy raises by sensitivity, measured on whole PTQ models, then pruned.
#include "framework/quant/precision_search.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>

#include "qflow/core/json_writer.h"
#include "framework/core/thread_pool.h"
#include "framework/data/input_feeds.h"
#include "framework/distributed/share_units.h"
#include "framework/onnx/onnx_check.h"
#include "framework/quant/classifier_outputs.h"
#include "framework/quant/quantization_settings.h"
#include "framework/quant/output_cosine.h"
#include "framework/quant/qdq_builder.h"
#include "framework/quant/scale_alignment.h"
#include "framework/interpreter/executor.h"
#include "qflow/core/json.h"
#include "qflow/quant/quant_math.h"

namespace qflow {

namespace {

bool is_graph_output(const Graph& graph, const Value* v) {
  return std::find(graph.outputs.begin(), graph.outputs.end(), v) != graph.outputs.end();
}

// An evaluation that runs every sample.
constexpr double kNoCutoff = std::numeric_limits<double>::quiet_NaN();

// Runs models on the kept samples and scores them against the float model. With a cosine
// target in a distributed world each rank runs its slice of the samples (my_slice) and the
// per-sample cosines are shared, so every rank sums all of them in sample order; a metric
// scores all outputs at once, so then every rank runs every sample.
class Evaluator {
 public:
  Evaluator(const Model& float_model, const ClassifierOutputs& classifiers, std::vector<Feeds> samples, int threads,
            const Metric* metric, const World* world)
      : float_model_(float_model),
        classifiers_(classifiers),
        samples_(std::move(samples)),
        pool_(std::max(1, threads)),
        metric_(metric),
        world_(world && world->distributed() && !metric ? world : nullptr),
        slice_(my_slice(world_, static_cast<int64_t>(samples_.size()))) {}

  Status init() {
    QFLOW_ASSIGN_OR_RETURN(reference_, outputs_of(float_model_));
    for (const SampleOutputs& s : reference_) flat_reference_.push_back(classifiers_.reference_values(pointers(s)));
    if (metric_) {
      QFLOW_ASSIGN_OR_RETURN(float_value_, score(reference_));
    }
    return Status::ok();
  }
  double float_value() const { return float_value_; }

  // What an evaluation found: the mean output cosine (or the metric), or, when it stopped
  // early, a bound the mean is below.
  struct Measured {
    double value = 0.0;
    int64_t stopped_after = 0;  // > 0: the samples run before the bound was below the cutoff
  };

  // Mean output cosine over samples, or the metric. With a cosine objective in one process
  // and a `cutoff` (not NaN), the samples run in turn and the evaluation stops once those run
  // prove the mean below it: each cosine is at most 1, so 1 - (sum of 1 - cosine so far) /
  // samples bounds the mean. A model measured below the target is rejected whatever its
  // mean is, and most models of a walk are far below it (the first raises of PP-OCRv4 det
  // miss by 0.01 to 0.02 on every page: one round of samples decides).
  Expected<Measured> value(const Model& model, double cutoff) {
    if (!std::isnan(cutoff) && !metric_ && !world_) return bounded(model, cutoff);
    QFLOW_ASSIGN_OR_RETURN(const double v, value(model));
    return Measured{v, 0};
  }

  Expected<double> value(const Model& model) {
    ++evaluations_;
    if (!world_) {
      QFLOW_ASSIGN_OR_RETURN(std::vector<SampleOutputs> outputs, outputs_of(model));
      return score(outputs);
    }
    std::vector<double> cosines(samples_.size(), 0.0);
    Expected<std::vector<SampleOutputs>> outputs = outputs_of(model);
    if (outputs)
      for (int64_t k = slice_.begin; k < slice_.end; ++k) cosines[static_cast<std::size_t>(k)] = sample_cosine(*outputs, k);
    QFLOW_RETURN_IF_ERROR(share_slices(*world_, kEvaluationTag, cosines, outputs.status()));
    double sum = 0.0;  // in sample order, as one process sums
    for (const double c : cosines) sum += c;
    return sum / static_cast<double>(cosines.size());
  }
  int64_t evaluations() const { return evaluations_; }

 private:
  static constexpr int kEvaluationTag = 7301;

  // Outputs of the samples of this rank's slice (the others stay empty), in sample order.
  Expected<std::vector<SampleOutputs>> outputs_of(const Model& model) {
    QFLOW_ASSIGN_OR_RETURN(std::unique_ptr<Executor> executor, Executor::create(model));
    std::vector<Expected<SampleOutputs>> results(samples_.size(), SampleOutputs{});
    pool_.parallel_for(slice_.end - slice_.begin, [&](int64_t b, int64_t e) {
      for (int64_t i = slice_.begin + b; i < slice_.begin + e; ++i) {
        const auto k = static_cast<std::size_t>(i);
        results[k] = run_sample(*executor, model, k);
      }
    });
    std::vector<SampleOutputs> outputs;
    for (std::size_t k = 0; k < results.size(); ++k) {
      if (!results[k]) return results[k].status().with_context("precision search: sample " + std::to_string(k));
      outputs.push_back(std::move(*results[k]));
    }
    return outputs;
  }

  // Sample k's graph outputs, in output order.
  Expected<SampleOutputs> run_sample(const Executor& executor, const Model& model, std::size_t k) const {
    QFLOW_ASSIGN_OR_RETURN(auto out, executor.run(samples_[k]));
    SampleOutputs ordered;
    for (const Value* o : model.graph->outputs) {
      auto it = out.find(o->name());
      if (it == out.end()) return internal_error("output '" + o->name() + "' was not computed");
      ordered.push_back(std::move(it->second));
    }
    return ordered;
  }

  static std::vector<const Tensor*> pointers(const SampleOutputs& outputs) {
    std::vector<const Tensor*> ordered;
    for (const Tensor& t : outputs) ordered.push_back(&t);
    return ordered;
  }

  double sample_cosine(const SampleOutputs& outputs, std::size_t k) const {
    return classifiers_.cosine(flat_reference_[k], pointers(outputs), pointers(reference_[k]));
  }
  double sample_cosine(const std::vector<SampleOutputs>& outputs, int64_t k) const {
    const auto i = static_cast<std::size_t>(k);
    return sample_cosine(outputs[i], i);
  }

  Expected<double> score(const std::vector<SampleOutputs>& outputs) const {
    if (metric_) {
      MetricInput input;
      input.first_sample = 0;
      input.outputs = &outputs;
      input.reference = &reference_;
      return metric_->evaluate(input);
    }
    double sum = 0.0;  // in sample order: the same for any thread count
    for (std::size_t k = 0; k < outputs.size(); ++k) sum += sample_cosine(outputs, static_cast<int64_t>(k));
    return sum / static_cast<double>(outputs.size());
  }

  Expected<Measured> bounded(const Model& model, double cutoff) {
    ++evaluations_;
    QFLOW_ASSIGN_OR_RETURN(std::unique_ptr<Executor> executor, Executor::create(model));
    const auto n = static_cast<int64_t>(samples_.size());
    // The rounding of n cosines summed in double is far below this margin.
    const double allowed = static_cast<double>(n) * (1.0 - cutoff) + 1e-9;
    std::vector<double> cosines(samples_.size(), 0.0);
    std::vector<Status> status(samples_.size(), Status::ok());
    std::mutex mutex;
    double shortfall = 0.0;  // sum of 1 - cosine over the samples run
    int64_t run = 0;
    bool below = false;
    std::atomic<int64_t> next{0};
    pool_.parallel_for(static_cast<int64_t>(pool_.size()), [&](int64_t, int64_t) {
      for (int64_t k = next++; k < n; k = next++) {
        {
          std::lock_guard lock(mutex);
          if (below) return;
        }
        const auto i = static_cast<std::size_t>(k);
        const Expected<SampleOutputs> out = run_sample(*executor, model, i);
        double c = 0.0;
        if (out) c = sample_cosine(*out, i);
        else status[i] = out.status();
        std::lock_guard lock(mutex);
        cosines[i] = c;
        ++run;
        shortfall += 1.0 - c;
        if (!status[i].is_ok() || shortfall > allowed) below = true;
      }
    });
    for (std::size_t k = 0; k < status.size(); ++k)
      if (!status[k].is_ok()) return status[k].with_context("precision search: sample " + std::to_string(k));
    if (below && run < n) return Measured{1.0 - shortfall / static_cast<double>(n), run};
    double sum = 0.0;  // in sample order: the same for any thread count
    for (const double c : cosines) sum += c;
    return Measured{sum / static_cast<double>(n), 0};
  }

  const Model& float_model_;
  const ClassifierOutputs& classifiers_;
  std::vector<Feeds> samples_;
  ThreadPool pool_;
  const Metric* metric_;
  const World* world_;  // set only when the samples are split between ranks
  ShardRange slice_;
  std::vector<SampleOutputs> reference_;
  std::vector<std::vector<float>> flat_reference_;
  double float_value_ = 1.0;
  int64_t evaluations_ = 0;
};

// Pruning and the values after each change cost at most this many models each.
constexpr std::size_t kPruneSteps = 16;

// value_after of a change whose prefix has not been measured (JSON null).
constexpr double kUnmeasured = std::numeric_limits<double>::quiet_NaN();

bool same_params(const QuantParams& a, const QuantParams& b) {
  return a.dtype == b.dtype && a.bits == b.bits && a.scale == b.scale && a.zero_point == b.zero_point && a.axis == b.axis;
}

// "int8", or "int8 (4-bit)" for a narrowed grid.
std::string grid_text(DType dtype, int bits) {
  const int b = grid_bits(dtype, bits);
  return std::string(dtype_name(dtype)) + (b ? " (" + std::to_string(b) + "-bit)" : "");
}

std::string value_text(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.6f", v);
  return buffer;
}

// Already int16 on the full grid. A narrowed grid in an int16 container (activation-bits
// 12) can still be raised: the raise sets the dtype alone, which means int16's full range.
bool activation_at_full16(const QuantSpec& spec) {
  return spec.activation_dtype == DType::Int16 && grid_bits(DType::Int16, spec.activation_bits) == 0;
}
bool weight_at_full16(const QuantSpec& spec) {
  return spec.weight_dtype == DType::Int16 && (spec.weight_bits == 0 || spec.weight_bits == 16);
}

// What an int16 raise changes from: the activation's grid, or the weight's when only the
// weight is raised.
std::string raised_from(const QuantSpec& spec, bool activation) {
  return activation ? grid_text(spec.activation_dtype, spec.activation_bits)
                    : grid_text(spec.weight_dtype, spec.weight_bits == 16 ? 0 : spec.weight_bits);
}

// A change of the ranked node `row` to `to` ("int16" or "cpu"), its value not measured yet.
PrecisionChange change_of(const SensitivityRow& row, const std::string& to) {
  PrecisionChange change;
  change.node = row.node;
  change.op_type = row.op_type;
  change.sensitivity = row.worst();
  change.value_after = kUnmeasured;
  change.to = to;
  return change;
}

// The activation tensors of `node` the PTQ model quantizes (its outputs in the table).
std::vector<std::string> node_activations(const Graph& graph, const Node& node, const QuantTable& table) {
  std::vector<std::string> names;
  for (const Value* out : node.outputs()) {
    if (!out || !table.count(out->name())) continue;
    if (out->uses().empty() && !is_graph_output(graph, out)) continue;
    names.push_back(out->name());
  }
  return names;
}

}  // namespace

QuantConfig merge_quant_config(const QuantConfig& base, const QuantConfig& overrides) {
  QuantConfig merged = base;
  merged.model.merge_from(overrides.model);
  for (const auto& [op, entry] : overrides.op_types) merged.op_types[op].merge_from(entry);
  for (const auto& [node, entry] : overrides.nodes) merged.nodes[node].merge_from(entry);
  return merged;
}

Expected<QuantTable> table_for_config(const Graph& graph, const QuantTable& table, const QuantConfig* config,
                                      const std::map<std::string, TensorStatistics>* statistics) {
  const QuantConfig defaults;
  const QuantConfig& cfg = config ? *config : defaults;
  QuantTable out = table;
  for (auto& [name, params] : out) {
    const Value* v = graph.find_value(name);
    if (!v || graph.is_initializer(v)) continue;
    const QuantSpec spec = tensor_spec(*v, cfg);
    // Also for a float node's output: it is still quantized where a quantized node reads it
    // (a node moved to the CPU keeps the int16 it was raised to), and a Concat group that
    // holds it shares one type with its other members even where nothing quantizes it.
    if (on_spec_grid(params, spec)) continue;
    if (params.scale.size() != 1 || params.zero_point.size() != 1)
      return invalid_input("precision: tensor '" + name + "' has per-axis parameters; only per-tensor activations change type");
    if (statistics && is_16bit_quant(spec.activation_dtype)) {
      if (auto it = statistics->find(name); it != statistics->end() && it->second.count > 0) {
        QFLOW_ASSIGN_OR_RETURN(params, activation_params(spec, it->second, observed_magnitude(it->second), "max", name));
        continue;
      }
    }
    // Same width, other signedness, asymmetric: the same grid with the zero point moved
    // (uint8 zp -> int8 zp - 128), so a learned scale is kept exactly (a QAT export's uint8
    // activations on a platform that takes int8).
    const QuantRange from = grid_range(params), to = activation_grid(spec);
    if (!spec.symmetric && from.max - from.min == to.max - to.min) {
      params.zero_point[0] += to.min - from.min;
      params.dtype = spec.activation_dtype;
      params.bits = grid_bits(spec.activation_dtype, spec.activation_bits);
      continue;
    }
    const QuantRange range = grid_range(params);
    const double scale = params.scale[0];
    const auto zp = static_cast<double>(params.zero_point[0]);
    // The range the entry represents, as statistics for an asymmetric spec.
    TensorStatistics stats;
    stats.count = 1;
    stats.min = (static_cast<double>(range.min) - zp) * scale;
    stats.max = (static_cast<double>(range.max) - zp) * scale;
    const double threshold =
        params.threshold > 0.0 ? params.threshold : observed_magnitude(stats);
    QFLOW_ASSIGN_OR_RETURN(QuantParams changed,
                           activation_params(spec, stats, threshold, params.method.empty() ? "precision" : params.method, name));
    params = changed;
  }
  return out;
}

Expected<PrecisionSearchResult> search_precision(const Model& float_model, const QuantTable& table,
                                                 const QuantConfig* config, const Dataset& dataset,
                                                 const PrecisionSearchOptions& options) {
  const Graph& graph = *float_model.graph;
  Expected<InputBinding> binding = bind_inputs(graph, dataset);
  if (!binding) return binding.status().with_context("precision search");
  const QuantConfig base = config ? *config : QuantConfig{};
  PrecisionSearchResult result;
  result.target_kind = options.metric ? (options.metric_name.empty() ? "metric" : options.metric_name) : "cosine";
  result.observed_ranges = options.statistics != nullptr;

  QFLOW_ASSIGN_OR_RETURN(std::vector<Feeds> samples, read_feeds(dataset, *binding, options.limit));
  if (samples.empty()) return invalid_input("precision search: the dataset has no samples");
  result.samples = static_cast<int64_t>(samples.size());
  // With the cosine objective, classifier outputs are compared through their logits
  // (classifier_outputs.h): every model scored here computes them as extra outputs.
  Model scoring = float_model.copy();
  const ClassifierOutputs classifiers = options.metric ? ClassifierOutputs{} : ClassifierOutputs::expose(scoring);
  result.classifier_outputs = classifiers.names();
  Evaluator evaluator(scoring, classifiers, std::move(samples), options.threads, options.metric, options.world);
  QFLOW_RETURN_IF_ERROR(evaluator.init());
  result.float_value = evaluator.float_value();
  result.threshold = options.metric ? result.float_value - options.max_drop : options.target_cosine;
  auto meets = [&](double v) { return v >= result.threshold; };

  // Every model the search builds (one per evaluation and one per placement question) is a
  // copy of the float model with shapes inferred, as the quantize stage infers them (the
  // backend's checks need shapes), and quantizes each weight the same way: both are done once.
  Model shaped = scoring.copy();
  (void)infer_shapes(shaped);
  WeightQuantCache weight_cache;
  auto build = [&](const QuantConfig& overrides) -> Expected<Model> {
    const QuantConfig cfg = merge_quant_config(base, overrides);
    Model model = shaped.copy();
    QFLOW_ASSIGN_OR_RETURN(const QuantTable adjusted, table_for_config(*model.graph, table, &cfg, options.statistics));
    QdqOptions qdq;
    qdq.weights = true;
    qdq.weight_cache = &weight_cache;
    QFLOW_RETURN_IF_ERROR(build_qdq_model(model, adjusted, &cfg, qdq));
    return model;
  };
  auto aligned = [&](const QuantConfig& overrides) -> Expected<QuantTable> {
    const QuantConfig cfg = merge_quant_config(base, overrides);
    QFLOW_ASSIGN_OR_RETURN(const QuantTable adjusted, table_for_config(graph, table, &cfg, options.statistics));
    return align_scales(graph, adjusted, &cfg);
  };
  const auto started = std::chrono::steady_clock::now();
  // `cutoff` (NaN: none): the evaluation may stop once the model is proven below it.
  auto evaluate_model = [&](const QuantConfig& overrides, double cutoff) -> Expected<Evaluator::Measured> {
    QFLOW_ASSIGN_OR_RETURN(Model model, build(overrides));
    QFLOW_ASSIGN_OR_RETURN(const Evaluator::Measured m, evaluator.value(model, cutoff));
    if (options.bar) options.bar->advance(1);
    if (options.progress) {
      const auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      const std::string found = m.stopped_after > 0 ? "below " + value_text(cutoff) + " after " +
                                                          std::to_string(m.stopped_after) + " of " +
                                                          std::to_string(result.samples) + " samples"
                                                    : value_text(m.value);
      options.progress("model " + std::to_string(evaluator.evaluations()) + " (" + std::to_string(overrides.nodes.size()) +
                       " node change(s)): " + result.target_kind + " " + found + ", target " +
                       value_text(result.threshold) + ", " + std::to_string(static_cast<int64_t>(seconds)) + " s");
    }
    return m;
  };
  auto evaluate = [&](const QuantConfig& overrides) -> Expected<double> {
    QFLOW_ASSIGN_OR_RETURN(const Evaluator::Measured m, evaluate_model(overrides, kNoCutoff));
    return m.value;
  };

  // What the plain PTQ model quantizes: the denominator of "tensors raised".
  QFLOW_ASSIGN_OR_RETURN(const QuantTable plain_table, aligned(QuantConfig{}));
  for (const auto& [name, params] : plain_table) {
    (void)params;
    const Value* v = graph.find_value(name);
    if (!v || graph.is_initializer(v)) continue;
    if (!v->producer() && std::find(graph.inputs.begin(), graph.inputs.end(), v) == graph.inputs.end()) continue;
    if (quantizes_activation(graph, *v, base)) ++result.quantized_tensors;
  }
  for (const auto& node : graph.nodes())
    if (quantizable_weight(graph, *node, base.resolve(node->name(), node->op_type()))) ++result.quantized_tensors;

  if (options.bar) options.bar->restart("search", "models", options.max_evaluations);
  QFLOW_ASSIGN_OR_RETURN(result.before, evaluate(QuantConfig{}));
  result.after = result.before;
  if (meets(result.before)) {
    result.evaluations = evaluator.evaluations();
    return result;
  }

  // The ranking: given, or measured here (also when the given one was skipped because the
  // PTQ model seemed to reach a target this search does not).
  SensitivityResult measured;
  const SensitivityResult* ranking = options.sensitivity;
  if (!ranking || !ranking->measured) {
    SensitivityOptions ranking_options;
    ranking_options.threads = options.threads;
    ranking_options.limit = options.limit;
    ranking_options.progress = options.progress;
    ranking_options.bar = options.bar;
    ranking_options.world = options.world;
    QFLOW_ASSIGN_OR_RETURN(measured, analyze_sensitivity(float_model, table, &base, dataset, ranking_options));
    ranking = &measured;
    // Back to counting models, on a fresh line, against what is left of the budget.
    if (options.bar)
      options.bar->restart("search", "models",
                           options.max_evaluations > 0 ? options.max_evaluations - evaluator.evaluations() : 0);
  }

  // The overrides of a list of changes; `int16_only` keeps CPU-moved nodes quantized (the
  // oracle's model: a float node is not a placement question), with the int16 they were raised to.
  auto overrides_of = [](const std::vector<PrecisionChange>& changes, bool int16_only) {
    QuantConfig o;
    for (const PrecisionChange& c : changes) {
      // Raised outputs, the Concat group's included, stay int16 through a later CPU move:
      // where quantized nodes read them they are still quantized, and a group shares a type.
      if (c.activation)
        for (const std::string& n : c.with) o.nodes[n].activation_dtype = DType::Int16;
      QuantOverride& entry = o.nodes[c.node];
      if (c.to == "cpu") {
        if (!int16_only) entry.quantize = false;
        if (c.activation) entry.activation_dtype = DType::Int16;
        continue;
      }
      if (c.activation) entry.activation_dtype = DType::Int16;
      if (c.weight) entry.weight_dtype = DType::Int16;
    }
    for (auto it = o.nodes.begin(); it != o.nodes.end();) it = it->second.empty() ? o.nodes.erase(it) : std::next(it);
    return o;
  };
  std::map<std::string, std::string> placement;
  if (options.oracle) {
    QFLOW_ASSIGN_OR_RETURN(Model model, build(QuantConfig{}));
    QFLOW_ASSIGN_OR_RETURN(placement, options.oracle(model));
  }
  std::map<std::string, const Node*> by_name;
  for (const auto& node : graph.nodes()) by_name[node->name()] = node.get();
  auto budget_left = [&] { return options.max_evaluations <= 0 || evaluator.evaluations() < options.max_evaluations; };

  // The int16 raise of a ranked node, or nothing when it has no int16 candidate. With an
  // oracle, a raise the platform refuses becomes a CPU move (`refusal` says why).
  auto int16_candidate = [&](const SensitivityRow& row, const Node& node,
                             const std::vector<PrecisionChange>& kept) -> Expected<std::optional<PrecisionChange>> {
    const QuantSpec spec = merge_quant_config(base, overrides_of(kept, false)).resolve(node.name(), node.op_type());
    if (!spec.quantize) return std::optional<PrecisionChange>();
    PrecisionChange change = change_of(row, "int16");
    // The sensitive side: the one with the lower single-node cosine, and the other one too
    // when, with a cosine target, it misses the target on its own.
    const bool weight_worse = row.has_weight && (!row.has_activation || row.weight_cosine < row.activation_cosine);
    const bool cosine_target = !options.metric;
    change.activation = row.has_activation && !activation_at_full16(spec) &&
                        (!weight_worse || (cosine_target && row.activation_cosine < result.threshold));
    change.weight = row.has_weight && !weight_at_full16(spec) &&
                    (weight_worse || (cosine_target && row.weight_cosine < result.threshold));
    if (!change.activation && !change.weight) return std::optional<PrecisionChange>();
    change.from = raised_from(spec, change.activation);
    const std::vector<std::string> activations = node_activations(graph, node, table);
    const Tensor* weight = quantizable_weight(graph, node, spec);
    if (change.activation) change.tensors = activations;
    if (change.weight && weight) change.tensors.push_back(node.input(1)->name());

    std::vector<PrecisionChange> trial = kept;
    trial.push_back(change);
    // A raise the scale alignment undoes (a pass-through op takes its input's parameters)
    // changes nothing: not a candidate.
    // An output in a Concat group (whose members share one type) is raised with the whole
    // group: every other producer of a member goes to int16 too. A raise the alignment
    // rules still refuse is skipped.
    {
      QFLOW_ASSIGN_OR_RETURN(const QuantTable now, aligned(overrides_of(kept, false)));
      Expected<QuantTable> then = aligned(overrides_of(trial, false));
      if (!then && change.activation) {
        std::set<std::string> with;
        for (const std::string& tensor : activations) {
          QFLOW_ASSIGN_OR_RETURN(const std::vector<std::string> group, concat_group(graph, table, tensor));
          for (const std::string& member : group) {
            const Value* v = graph.find_value(member);
            if (!v || !v->producer()) continue;  // a graph input has no node to raise
            if (v->producer()->name() != node.name()) with.insert(v->producer()->name());
          }
        }
        trial.back().with.assign(with.begin(), with.end());
        for (const std::string& n : trial.back().with)
          if (auto it = by_name.find(n); it != by_name.end())
            for (const Value* out : it->second->outputs())
              if (out && table.count(out->name())) trial.back().tensors.push_back(out->name());
        then = aligned(overrides_of(trial, false));
        if (then) change = trial.back();
      }
      if (!then) return std::optional<PrecisionChange>();
      bool differs = change.weight;
      for (const auto& [name, params] : *then)
        if (auto it = now.find(name); it == now.end() || !same_params(it->second, params)) differs = true;
      if (!differs) return std::optional<PrecisionChange>();
    }
    if (options.oracle) {
      QFLOW_ASSIGN_OR_RETURN(Model model, build(overrides_of(trial, true)));
      QFLOW_ASSIGN_OR_RETURN(const auto after, options.oracle(model));
      for (const auto& [name, reason] : placement) {
        if (!reason.empty()) continue;
        auto it = after.find(name);
        const std::string now = it == after.end() ? "not placed" : it->second;
        if (now.empty()) continue;
        if (change.refusal.empty() || name == change.node) change.refusal = name + ": " + now;
      }
      if (!change.refusal.empty()) {
        // The platform refuses int16 here: the node runs in float on the CPU instead.
        change.to = "cpu";
        change.from = grid_text(spec.activation_dtype, spec.activation_bits);
        change.activation = change.weight = false;
        change.tensors = activations;
        if (weight) change.tensors.push_back(node.input(1)->name());
      } else {
        placement = after;
      }
    }
    return std::optional<PrecisionChange>(std::move(change));
  };

  // The move of a ranked node to float on the CPU, or nothing when the node quantizes
  // nothing any more. The caller removes the node's int16 raise, if any.
  auto cpu_candidate = [&](const SensitivityRow& row, const Node& node,
                           const std::vector<PrecisionChange>& kept) -> std::optional<PrecisionChange> {
    const QuantSpec spec = merge_quant_config(base, overrides_of(kept, false)).resolve(node.name(), node.op_type());
    if (!spec.quantize) return std::nullopt;
    PrecisionChange change = change_of(row, "cpu");
    change.from = grid_text(spec.activation_dtype, spec.activation_bits);
    change.refusal = "int16 did not reach the target";
    change.tensors = node_activations(graph, node, table);
    if (quantizable_weight(graph, node, spec)) change.tensors.push_back(node.input(1)->name());
    if (change.tensors.empty()) return std::nullopt;
    return change;
  };

  // Greedy growth along the ranking, first int16 raises, then (when they do not reach the
  // target) CPU moves. Changes are measured in batches that double while the target is
  // missed (1, 1, 2, 4, ...); the batch that reaches it is bisected for the shortest prefix
  // that does. The best configuration measured is remembered for a miss.
  std::vector<PrecisionChange> kept;
  double value = result.before;
  std::vector<PrecisionChange> best_kept;
  double best_value = result.before;
  bool reached = false;
  std::string stop;  // why the growth stopped short of the target
  // Configurations whose evaluation stopped below the target, with the bound found: only a
  // miss needs their values (the best configuration measured), so only a miss finishes them.
  std::vector<std::pair<std::vector<PrecisionChange>, double>> stopped;
  std::optional<std::size_t> value_stopped;  // `value` is stopped[*value_stopped]'s bound
  auto remember = [&](const std::vector<PrecisionChange>& changes, double v) {
    if (v > best_value) {
      best_value = v;
      best_kept = changes;
    }
  };
  // A search bounded by max-evaluations measures every model whole: its budget counts
  // models, and a miss delivers the best of them without finishing any.
  const double cutoff = options.max_evaluations > 0 ? kNoCutoff : result.threshold;
  auto measure_model = [&](std::vector<PrecisionChange>& changes) -> Expected<Evaluator::Measured> {
    QFLOW_ASSIGN_OR_RETURN(const Evaluator::Measured m, evaluate_model(overrides_of(changes, false), cutoff));
    if (!changes.empty()) changes.back().value_after = m.stopped_after > 0 ? kUnmeasured : m.value;
    if (m.stopped_after > 0) stopped.emplace_back(changes, m.value);
    else remember(changes, m.value);
    return m;
  };
  // The value only: a stopped model's bound, below the target like its mean.
  auto measure = [&](std::vector<PrecisionChange>& changes) -> Expected<double> {
    QFLOW_ASSIGN_OR_RETURN(const Evaluator::Measured m, measure_model(changes));
    return m.value;
  };
  // `halfway` (may be empty) runs once, as soon as the walk cannot measure its next batch
  // before it has gone through half the ranking (each row adds at most one change): a
  // batch that large is not built. When `halfway` reaches the target, the walk ends there.
  auto grow = [&](const std::string_view phase, const std::function<Expected<bool>()>& halfway) -> Status {
    std::size_t measured = kept.size();  // kept[0, measured) has been measured
    std::size_t batch = 1;
    const std::size_t half = ranking->rows.size() / 2;
    bool halfway_tried = !halfway || half < kPruneSteps;
    for (std::size_t r = 0; r <= ranking->rows.size() && !reached && stop.empty(); ++r) {
      const std::size_t waiting = kept.size() - measured;
      if (!halfway_tried && r + batch - std::min(batch, waiting) > half) {
        halfway_tried = true;
        QFLOW_ASSIGN_OR_RETURN(const bool done, halfway());
        if (done) break;
      }
      const bool last = r == ranking->rows.size();
      if (!last) {
        if (options.max_changes > 0 && static_cast<int64_t>(kept.size()) >= options.max_changes) {
          stop = "max-changes (" + std::to_string(options.max_changes) + ") reached";
        } else if (auto node_it = by_name.find(ranking->rows[r].node); node_it != by_name.end()) {
          std::optional<PrecisionChange> change;
          if (phase == "int16") {
            QFLOW_ASSIGN_OR_RETURN(change, int16_candidate(ranking->rows[r], *node_it->second, kept));
          } else {
            change = cpu_candidate(ranking->rows[r], *node_it->second, kept);
            const auto raised = std::find_if(kept.begin(), kept.end(),
                                             [&](const PrecisionChange& c) { return c.node == ranking->rows[r].node; });
            if (change && raised != kept.end()) {
              change->activation = raised->activation;
              change->with = raised->with;
              measured = std::min(measured, static_cast<std::size_t>(raised - kept.begin()));
              kept.erase(raised);
            }
          }
          if (change) kept.push_back(std::move(*change));
        }
      }
      const std::size_t pending = kept.size() - measured;
      if (pending == 0 || (pending < batch && !last && stop.empty())) continue;
      if (!budget_left()) {
        stop = "max-evaluations (" + std::to_string(options.max_evaluations) + ") reached";
        break;
      }
      QFLOW_ASSIGN_OR_RETURN(const Evaluator::Measured m, measure_model(kept));
      value = m.value;
      value_stopped = m.stopped_after > 0 ? std::optional<std::size_t>(stopped.size() - 1) : std::nullopt;
      if (meets(value)) {
        // Bisect the batch: the shortest prefix of kept[measured, end) that reaches the target.
        std::size_t lo = measured, hi = kept.size();
        while (hi - lo > 1 && budget_left()) {
          const std::size_t mid = lo + (hi - lo) / 2;
          std::vector<PrecisionChange> prefix(kept.begin(), kept.begin() + static_cast<std::ptrdiff_t>(mid));
          QFLOW_ASSIGN_OR_RETURN(const double v, measure(prefix));
          if (meets(v)) {
            hi = mid;
            value = v;
          } else {
            lo = mid;
          }
        }
        kept.resize(hi);
        kept.back().value_after = value;
        reached = true;
      }
      measured = kept.size();
      batch *= 2;
    }
    return Status::ok();
  };

  // Where the raises along the ranking miss the target, the model with every node the
  // platform takes at int16 (activations and weights together) may still reach it: raising
  // one side per node never builds it, and an int16 weight needs its input at 16 bits too.
  // From there the least sensitive nodes go back to the plain types in growing batches while
  // the target holds; the batch that breaks it is bisected and the walk ends. Returns whether
  // it reached the target (then `kept` holds the raises left).
  auto lower_from_int16 = [&]() -> Expected<bool> {
    if (options.max_changes > 0) return false;  // a bounded change count is the raise walk's
    std::vector<PrecisionChange> all;
    for (const SensitivityRow& row : ranking->rows) {
      auto it = by_name.find(row.node);
      if (it == by_name.end()) continue;
      const Node& node = *it->second;
      const QuantSpec spec = base.resolve(node.name(), node.op_type());
      if (!spec.quantize) continue;
      PrecisionChange change = change_of(row, "int16");
      const std::vector<std::string> activations = node_activations(graph, node, table);
      const bool has_weight = quantizable_weight(graph, node, spec) != nullptr;
      change.activation = !activations.empty() && !activation_at_full16(spec);
      change.weight = has_weight && !weight_at_full16(spec);
      if (!change.activation && !change.weight) continue;
      change.from = raised_from(spec, change.activation);
      if (change.activation) change.tensors = activations;
      if (change.weight) change.tensors.push_back(node.input(1)->name());
      all.push_back(std::move(change));
    }
    if (all.empty()) return false;

    auto find_change = [](std::vector<PrecisionChange>& changes, const std::string& node) {
      return std::find_if(changes.begin(), changes.end(), [&](const PrecisionChange& c) { return c.node == node; });
    };
    auto drop_activation = [&](std::vector<PrecisionChange>& changes, std::vector<PrecisionChange>::iterator it) {
      if (!it->weight) {
        changes.erase(it);
        return;
      }
      it->activation = false;
      it->tensors = {it->tensors.back()};  // the weight
    };
    // Takes back what the platform refuses until every node the plain PTQ model placed on
    // the accelerator stays there: a refused node loses its weight raise first (an int16
    // weight behind an 8-bit input), then its own raise, then the raises of the producers
    // of its inputs (an op the platform runs at 8 bits only). False when that does not settle.
    auto placeable = [&](std::vector<PrecisionChange>& changes) -> Expected<bool> {
      if (!options.oracle) return true;
      for (int round = 0; round < 8; ++round) {
        QFLOW_ASSIGN_OR_RETURN(Model model, build(overrides_of(changes, true)));
        QFLOW_ASSIGN_OR_RETURN(const auto after, options.oracle(model));
        std::vector<std::string> refused;
        for (const auto& [name, reason] : placement) {
          if (!reason.empty()) continue;
          auto it = after.find(name);
          if (it == after.end() || !it->second.empty()) refused.push_back(name);
        }
        if (refused.empty()) return true;
        for (const std::string& name : refused) {
          if (auto it = find_change(changes, name); it != changes.end()) {
            if (it->weight) {
              it->weight = false;
              if (!it->activation) changes.erase(it);
              else it->tensors.pop_back();
            } else {
              changes.erase(it);
            }
            continue;
          }
          auto node_it = by_name.find(name);
          if (node_it == by_name.end()) continue;
          for (const Value* in : node_it->second->inputs()) {
            if (!in || !in->producer()) continue;
            if (auto p = find_change(changes, in->producer()->name()); p != changes.end() && p->activation)
              drop_activation(changes, p);
          }
        }
      }
      return false;
    };
    // `changes` without the raises of `nodes`; a node whose output the scale alignment ties
    // to a raised one (a Concat group) keeps its raise.
    auto without = [&](const std::vector<PrecisionChange>& changes, const std::vector<std::string>& nodes)
        -> Expected<std::vector<PrecisionChange>> {
      std::vector<PrecisionChange> trial = changes;
      for (const std::string& n : nodes)
        if (auto it = find_change(trial, n); it != trial.end()) trial.erase(it);
      if (aligned(overrides_of(trial, false))) return trial;
      trial = changes;
      for (const std::string& n : nodes) {
        std::vector<PrecisionChange> one = trial;
        if (auto it = find_change(one, n); it != one.end()) one.erase(it);
        if (aligned(overrides_of(one, false))) trial = std::move(one);
      }
      return trial;
    };

    if (!aligned(overrides_of(all, false))) return false;
    QFLOW_ASSIGN_OR_RETURN(const bool placed, placeable(all));
    if (!placed || all.empty() || !budget_left()) return false;
    QFLOW_ASSIGN_OR_RETURN(const double all_value, measure(all));
    if (!meets(all_value)) return false;

    // Least sensitive first.
    std::vector<std::string> order;
    for (auto it = all.rbegin(); it != all.rend(); ++it) order.push_back(it->node);
    std::vector<PrecisionChange> current = all;
    double current_value = all_value;
    std::size_t pos = 0, batch = 1;
    auto trial_of = [&](std::size_t n) -> Expected<std::optional<std::vector<PrecisionChange>>> {
      const std::vector<std::string> nodes(order.begin() + static_cast<std::ptrdiff_t>(pos),
                                           order.begin() + static_cast<std::ptrdiff_t>(pos + n));
      QFLOW_ASSIGN_OR_RETURN(std::vector<PrecisionChange> trial, without(current, nodes));
      QFLOW_ASSIGN_OR_RETURN(const bool ok, placeable(trial));
      if (!ok) return std::optional<std::vector<PrecisionChange>>();
      return std::optional<std::vector<PrecisionChange>>(std::move(trial));
    };
    while (pos < order.size() && budget_left()) {
      const std::size_t n = std::min(batch, order.size() - pos);
      QFLOW_ASSIGN_OR_RETURN(std::optional<std::vector<PrecisionChange>> trial, trial_of(n));
      if (trial) {
        QFLOW_ASSIGN_OR_RETURN(const double v, measure(*trial));
        if (meets(v)) {
          current = std::move(*trial);
          current_value = v;
          pos += n;
          batch *= 2;
          continue;
        }
      }
      // The longest prefix of this batch that still holds, then the walk ends.
      std::size_t lo = 0, hi = n;
      while (hi - lo > 1 && budget_left()) {
        const std::size_t mid = lo + (hi - lo) / 2;
        QFLOW_ASSIGN_OR_RETURN(std::optional<std::vector<PrecisionChange>> part, trial_of(mid));
        double v = -std::numeric_limits<double>::infinity();
        if (part) {
          QFLOW_ASSIGN_OR_RETURN(v, measure(*part));
        }
        if (part && meets(v)) {
          lo = mid;
          current = std::move(*part);
          current_value = v;
        } else {
          hi = mid;
        }
      }
      break;
    }
    for (PrecisionChange& c : current) c.value_after = kUnmeasured;
    if (!current.empty()) current.back().value_after = current_value;
    kept = std::move(current);
    value = current_value;
    reached = true;
    return true;
  };

  // On a ranking of at least 2 * kPruneSteps nodes the lowering walk is tried once the raises
  // would need more than half of it to measure their next batch: a raise walk that needs
  // more than half the nodes costs more placement questions and models than lowering the
  // all-int16 model. Otherwise it is tried after them.
  bool tried_lowering = false;
  auto try_lowering = [&]() -> Expected<bool> {
    tried_lowering = true;
    QFLOW_ASSIGN_OR_RETURN(result.lowered, lower_from_int16());
    return result.lowered;
  };
  QFLOW_RETURN_IF_ERROR(grow("int16", try_lowering));
  if (!reached && stop.empty() && !tried_lowering) QFLOW_RETURN_IF_ERROR(try_lowering().status());
  if (!reached && stop.empty()) QFLOW_RETURN_IF_ERROR(grow("cpu", {}));

  if (!reached) {
    // The best configuration measured, and the value the message names: the stopped
    // evaluations whose bound could beat the best, and the one `value` bounds, are finished
    // first, in the order they were made.
    for (std::size_t i = 0; i < stopped.size(); ++i) {
      auto& [changes, bound] = stopped[i];
      if (!(bound > best_value) && value_stopped != i) continue;
      QFLOW_ASSIGN_OR_RETURN(const double v, evaluate(overrides_of(changes, false)));
      if (!changes.empty()) changes.back().value_after = v;
      remember(changes, v);
      if (value_stopped == i) value = v;
    }
    const std::string message = "precision search: " +
                                (stop.empty() ? "the candidates ran out after " + std::to_string(kept.size()) + " changes"
                                              : stop) +
                                " with " + result.target_kind + " " + value_text(value) + ", target " +
                                value_text(result.threshold) + " (plain PTQ: " + value_text(result.before) + ")";
    if (options.error_on_miss) return invalid_input(message);
    // Deliver the best configuration measured.
    result.miss = message + "; kept the best configuration measured: " + result.target_kind + " " +
                  value_text(best_value) + " with " + std::to_string(best_kept.size()) + " change(s)";
    kept = best_kept;
    value = best_value;
  } else if (options.prune && !result.lowered) {
    // Fewest changes: drop each kept change (latest first) whose removal keeps the target;
    // beyond kPruneSteps changes, blocks of consecutive changes, so that pruning costs at
    // most kPruneSteps models (a large model's search keeps hundreds of changes).
    const std::size_t block = (kept.size() + kPruneSteps - 1) / kPruneSteps;
    bool dropped = false;
    for (std::size_t end = kept.size(); end > 0 && budget_left();) {
      const std::size_t begin = end > block ? end - block : 0;
      std::vector<PrecisionChange> without = kept;
      without.erase(without.begin() + static_cast<std::ptrdiff_t>(begin), without.begin() + static_cast<std::ptrdiff_t>(end));
      end = begin;
      QFLOW_ASSIGN_OR_RETURN(const double v, evaluate(overrides_of(without, false)));
      if (!meets(v)) continue;
      kept = std::move(without);
      value = v;
      dropped = true;
    }
    if (dropped)
      for (PrecisionChange& c : kept) c.value_after = kUnmeasured;
    if (!kept.empty()) kept.back().value_after = value;
  }
  // Values after each change, in order, for what is left: measured where the growth did
  // not (inside a batch, or after pruning), as the evaluation budget allows, and only for
  // up to kPruneSteps changes (one model each).
  for (std::size_t i = 0; i < kept.size() && kept.size() <= kPruneSteps && options.prune && budget_left(); ++i) {
    if (!std::isnan(kept[i].value_after)) continue;
    const std::vector<PrecisionChange> prefix(kept.begin(), kept.begin() + static_cast<std::ptrdiff_t>(i + 1));
    QFLOW_ASSIGN_OR_RETURN(kept[i].value_after, evaluate(overrides_of(prefix, false)));
  }
  result.reached = reached;
  result.after = value;
  result.overrides = overrides_of(kept, false);
  std::set<std::string> raised;
  for (const PrecisionChange& c : kept) raised.insert(c.tensors.begin(), c.tensors.end());
  result.raised_tensors = static_cast<int64_t>(raised.size());
  result.changes = std::move(kept);
  result.evaluations = evaluator.evaluations();
  return result;
}

std::string precision_overrides_toml(const PrecisionSearchResult& result) {
  if (result.overrides.nodes.empty()) return "";
  QuantConfig nodes_only;
  nodes_only.nodes = result.overrides.nodes;
  std::string text = format_quantization(nodes_only);
  // format_quantization opens with the whole-model table; the fragment goes under the
  // pipeline's own [quantization], so only the node tables are kept.
  const std::string head = "[quantization]\n";
  if (text.rfind(head, 0) == 0) text.erase(0, head.size());
  return text;
}

std::string precision_overrides_file(const PrecisionSearchResult& result) {
  std::string text = "# precision search: " + result.target_kind + " " + value_text(result.before) + " -> " +
                     value_text(result.after) + " (target " + value_text(result.threshold) +
                     (result.reached ? "" : ", not reached") + "), " +
                     std::to_string(result.changes.size()) + " node change" + (result.changes.size() == 1 ? "" : "s") +
                     ", " + std::to_string(result.raised_tensors) + " of " + std::to_string(result.quantized_tensors) +
                     " quantized tensors\n";
  for (const std::string& name : result.classifier_outputs)
    text += "# classifier output '" + name + "' compared through its logits (docs/accuracy-debugging.md)\n";
  if (result.changes.empty()) return text + "# no change needed: the PTQ model meets the target as it is\n";
  text += "# Paste under the pipeline's [quantization] table to replay without searching.\n";
  return text + precision_overrides_toml(result);
}

Expected<std::string> precision_json(const PrecisionSearchResult& result) {
  JsonWriter json;
  json.begin_object();
  write_precision_fields(json, result);
  json.field("overrides_toml", precision_overrides_toml(result));
  json.end_object();
  return json.finish();
}

void write_precision_fields(JsonWriter& json, const PrecisionSearchResult& result) {
  json.key("target").begin_object(true);
  json.field("kind", result.target_kind);
  if (!result.classifier_outputs.empty()) {
    json.key("classifier_outputs").begin_array(true);
    for (const std::string& name : result.classifier_outputs) json.value(name);
    json.end_array();
  }
  json.field("threshold", result.threshold);
  json.field("float", result.float_value);
  json.end_object();
  json.field("reached", result.reached);
  if (!result.reached) json.field("miss", result.miss);
  json.field("samples", result.samples);
  json.field("before", result.before);
  json.field("after", result.after);
  json.field("evaluations", result.evaluations);
  json.field("quantized_tensors", result.quantized_tensors);
  json.field("raised_tensors", result.raised_tensors);
  json.field("ranges", result.observed_ranges ? "observed" : "threshold");
  json.field("walk", result.lowered ? "lower" : "raise");
  json.key("changes").begin_array();
  for (const PrecisionChange& c : result.changes) {
    json.begin_object(true);
    json.field("node", c.node);
    json.field("op_type", c.op_type);
    json.key("tensors").begin_array(true);
    for (const std::string& t : c.tensors) json.value(t);
    json.end_array();
    json.field("from", c.from);
    json.field("to", c.to);
    json.field("activation", c.activation);
    if (!c.with.empty()) {
      json.key("with").begin_array(true);
      for (const std::string& n : c.with) json.value(n);
      json.end_array();
    }
    json.field("weight", c.weight);
    json.field("sensitivity", c.sensitivity);
    json.field("value_after", c.value_after);
    if (!c.refusal.empty()) json.field("refusal", c.refusal);
    json.end_object();
  }
  json.end_array();
  json.key("overrides").begin_object();
  for (const auto& [node, entry] : result.overrides.nodes) {
    json.key(node).begin_object(true);
    for (const auto& [key, text] : quantization_fields(entry)) {
      json.key(key);
      if (text == "true" || text == "false") json.value(text == "true");
      else json.value(text.substr(1, text.size() - 2));  // "\"int16\"" -> int16
    }
    json.end_object();
  }
  json.end_object();
}

Expected<PrecisionReplay> precision_replay_from_json(const std::string& text, const std::string& source) {
  QFLOW_ASSIGN_OR_RETURN(Json doc, parse_json(text, source));
  const Json* overrides = json_member(doc, "overrides");
  if (!overrides || !overrides->is_object()) return invalid_input(source + ": no \"overrides\" object (not a precision.json)");
  PrecisionReplay replay;
  if (const Json* ranges = json_member(doc, "ranges")) {
    if (*ranges != "observed" && *ranges != "threshold")
      return invalid_input(source + ": \"ranges\" is neither \"observed\" nor \"threshold\"");
    replay.observed_ranges = *ranges == "observed";
  }
  for (const auto& [node, entry] : overrides->items()) {
    if (!entry.is_object()) return invalid_input(source + ": overrides of node '" + node + "' are not an object");
    QuantOverride& o = replay.overrides.nodes[node];
    for (const auto& [key, value] : entry.items()) {
      OptionValue option;
      if (value.is_boolean()) option = value.get<bool>();
      else if (value.is_string()) option = value.get_ref<const std::string&>();
      else return invalid_input(source + ": node '" + node + "' key '" + key + "' is neither a string nor a bool");
      if (Status s = set_quantization_key(o, key, option); !s.is_ok())
        return s.with_context(source + ": node '" + node + "'");
    }
  }
  return replay;
}

}  // namespace qflow

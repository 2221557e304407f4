// Sensitivity: two single-node QDQ models per quantized node, each run on the cached samples.
#include "framework/quant/sensitivity.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>

#include "qflow/core/json_writer.h"
#include "framework/core/memory_limit.h"
#include "framework/core/thread_pool.h"
#include "framework/data/input_feeds.h"
#include "framework/distributed/share_units.h"
#include "framework/ir/model_stats.h"
#include "framework/quant/classifier_outputs.h"
#include "framework/quant/local_sensitivity.h"
#include "framework/quant/output_cosine.h"
#include "framework/quant/qdq_builder.h"
#include "framework/quant/scale_alignment.h"
#include "framework/interpreter/executor.h"

namespace qflow {

namespace {

bool is_graph_output(const Graph& graph, const Value* v) {
  return std::find(graph.outputs.begin(), graph.outputs.end(), v) != graph.outputs.end();
}

// `config` with quantization switched off everywhere but node `name`: the whole model, every
// op-type entry and every other node entry say quantize = false; the node's own entry says
// quantize = true and keeps its other settings (dtype, per-channel, ...). Graph inputs take
// the whole-model spec, so they stay float too.
QuantConfig only_node(const QuantConfig* config, const std::string& name) {
  QuantConfig only = config ? *config : QuantConfig{};
  only.model.quantize = false;
  for (auto& [op, entry] : only.op_types) entry.quantize = false;
  for (auto& [node, entry] : only.nodes) entry.quantize = false;
  only.nodes[name].quantize = true;
  return only;
}


// The float model's values of one sample: every tensor it computes, the input, the outputs.
struct SampleValues {
  std::unordered_map<std::string, Tensor> tensors;
  std::vector<float> outputs;  // all graph outputs flattened in output order
  std::size_t bytes = 0;
};

// The graph outputs of `run` in output order.
std::vector<const Tensor*> ordered_outputs(const Graph& graph, const std::map<std::string, Tensor>& run) {
  std::vector<const Tensor*> ordered;
  for (const Value* out : graph.outputs) ordered.push_back(&run.at(out->name()));
  return ordered;
}

Status float_values(const Executor& executor, const ClassifierOutputs& classifiers, const Feeds& sample,
                    SampleValues& out) {
  for (const auto& [name, tensor] : sample) out.tensors[name] = tensor;
  QFLOW_ASSIGN_OR_RETURN(auto outputs, executor.run(sample, [&](const Value& value, const Tensor& t) {
    out.tensors[value.name()] = t;
    out.bytes += t.nbytes();
    return Status::ok();
  }));
  out.outputs = classifiers.reference_values(ordered_outputs(*executor.model().graph, outputs));
  return Status::ok();
}

bool has_subgraph(const Node& node) {
  for (const Attribute& a : node.attributes())
    if (a.g || !a.graphs.empty()) return true;
  return false;
}

// Cuts `model` (the float model with only node `node` quantized) down to what differs from
// the float model: `node`, the nodes build_qdq_model added (Q/DQ), and every node that reads
// (transitively) one of their outputs. Every other value has the same name and value as in
// the float model, so the cut model reads those it needs as graph inputs (returned), fed
// from the float run; graph outputs the cut leaves out are taken from the float run too.
// A model whose changed part holds a node with subgraphs (which may read outer values by
// name) is kept whole and fed the sample (its single input).
Expected<std::vector<std::string>> suffix_model(Model& model, const std::set<std::string>& float_nodes,
                                                const std::string& node) {
  Graph& g = *model.graph;
  QFLOW_ASSIGN_OR_RETURN(std::vector<Node*> order, g.topological_order());
  std::set<const Value*> dirty;
  std::vector<Node*> clean;
  for (Node* n : order) {
    bool changed = n->name() == node || !float_nodes.count(n->name()) || n->op_type() == "QuantizeLinear" ||
                   n->op_type() == "DequantizeLinear";
    for (const Value* in : n->inputs()) changed = changed || (in && dirty.count(in));
    if (!changed) {
      clean.push_back(n);
      continue;
    }
    if (has_subgraph(*n)) {
      std::vector<std::string> whole;
      for (const Value* in : g.runtime_inputs()) whole.push_back(in->name());
      return whole;
    }
    for (const Value* out : n->outputs())
      if (out) dirty.insert(out);
  }
  for (Node* n : clean) g.remove_node(n);
  std::vector<Value*> inputs;
  std::set<const Value*> seen;
  for (const auto& n : g.nodes())
    for (Value* in : n->inputs())
      if (in && !in->producer() && !g.is_initializer(in) && seen.insert(in).second) inputs.push_back(in);
  g.inputs = inputs;
  std::vector<Value*> outputs;
  for (Value* out : g.outputs)
    if (out->producer()) outputs.push_back(out);
  g.outputs = outputs;
  std::vector<Value*> unused;
  for (Value* v : g.initializer_order())
    if (v->uses().empty()) unused.push_back(v);
  for (Value* v : unused) g.remove_initializer(v);
  g.prune_unused_values();
  std::vector<std::string> feeds;
  for (const Value* in : inputs) feeds.push_back(in->name());
  return feeds;
}

// cos(float outputs, variant outputs) for one sample: the cut model runs on the float values
// it reads; outputs it does not compute are the float ones.
Expected<double> variant_cosine(const Executor& executor, const ClassifierOutputs& classifiers,
                                const std::vector<std::string>& feeds, const std::vector<std::string>& output_names,
                                const SampleValues& values) {
  std::map<std::string, Tensor> inputs;
  for (const std::string& name : feeds) {
    auto it = values.tensors.find(name);
    if (it == values.tensors.end()) return internal_error("float value '" + name + "' was not computed");
    inputs[name] = it->second;
  }
  QFLOW_ASSIGN_OR_RETURN(auto outputs, executor.run(inputs));
  std::vector<const Tensor*> ordered;
  for (const std::string& name : output_names) {
    if (auto it = outputs.find(name); it != outputs.end()) {
      ordered.push_back(&it->second);
    } else if (auto f = values.tensors.find(name); f != values.tensors.end()) {
      ordered.push_back(&f->second);
    } else {
      return internal_error("output '" + name + "' was not computed");
    }
  }
  std::vector<const Tensor*> reference;
  if (!classifiers.empty())  // the float run's outputs, for the logits
    for (const std::string& name : output_names) {
      auto f = values.tensors.find(name);
      if (f == values.tensors.end()) return internal_error("float output '" + name + "' was not computed");
      reference.push_back(&f->second);
    }
  return classifiers.cosine(values.outputs, ordered, reference);
}

// The mean over samples (in sample order) of the output cosine of the whole PTQ model,
// weights and activations quantized as the quantize stage builds it.
Expected<double> ptq_output_cosine(const Model& float_model, const Executor& float_exec,
                                   const ClassifierOutputs& classifiers, const QuantTable& table,
                                   const QuantConfig* config, const std::vector<Feeds>& samples, ThreadPool& pool) {
  Model model = float_model.copy();
  QdqOptions options;
  options.weights = true;
  if (Status s = build_qdq_model(model, table, config, options); !s.is_ok()) return s.with_context("sensitivity: PTQ model");
  QFLOW_ASSIGN_OR_RETURN(std::unique_ptr<Executor> ptq_exec, Executor::create(model));
  std::vector<Expected<double>> cosines(samples.size(), internal_error("sample not run"));
  pool.parallel_for(static_cast<int64_t>(samples.size()), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const auto k = static_cast<std::size_t>(i);
      auto reference = float_exec.run(samples[k]);
      if (!reference) {
        cosines[k] = reference.status();
        continue;
      }
      auto quantized = ptq_exec->run(samples[k]);
      if (!quantized) {
        cosines[k] = quantized.status();
        continue;
      }
      const std::vector<const Tensor*> f = ordered_outputs(*float_exec.model().graph, *reference);
      cosines[k] = classifiers.cosine(classifiers.reference_values(f), ordered_outputs(*model.graph, *quantized), f);
    }
  });
  double sum = 0.0;
  for (const Expected<double>& c : cosines) {
    if (!c) return c.status().with_context("sensitivity: PTQ model");
    sum += *c;
  }
  return sum / static_cast<double>(samples.size());
}

// What the output ranking runs per sample, in GMAC: for each named node, `variants` models
// from that node on, estimated as the MACs of the nodes at or after it in execution order.
// The shapes are those of one float run (`values`).
Expected<double> output_ranking_gmacs(const Model& float_model, const SampleValues& values,
                                      const std::vector<std::string>& nodes, const std::vector<int>& variants) {
  Model typed = float_model.copy();
  for (Value* v : typed.graph->values()) {
    auto it = values.tensors.find(v->name());
    if (it == values.tensors.end()) continue;
    ValueType type;
    type.dtype = it->second.dtype();
    type.shape.emplace();
    for (int64_t d : it->second.shape()) type.shape->push_back(Dim{d, "", ""});
    v->type = type;
  }
  QFLOW_ASSIGN_OR_RETURN(const ModelStats stats, compute_model_stats(typed));
  std::map<std::string, double> from;  // node -> MACs of it and every later node
  double suffix = 0.0;
  for (auto it = stats.nodes.rbegin(); it != stats.nodes.rend(); ++it) {
    suffix += static_cast<double>(it->macs.value_or(0));
    from.emplace(it->name, suffix);
  }
  double macs = 0.0;
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (auto it = from.find(nodes[i]); it != from.end()) macs += variants[i] * it->second;
  return macs / 1e9;
}

// The tag of the ranking's exchange between ranks.
constexpr int kSensitivityTag = 7201;

// "ranked 120 of 370 nodes (samples 1-16 of 16) in 312 s"
std::string ranked_line(std::size_t done, std::size_t nodes, std::size_t first_sample, std::size_t chunk,
                        std::size_t samples, double seconds) {
  std::string line = "ranked " + std::to_string(done) + " of " + std::to_string(nodes) + " nodes";
  if (chunk < samples)
    line += " (samples " + std::to_string(first_sample + 1) + "-" + std::to_string(first_sample + chunk) + " of " +
            std::to_string(samples) + ")";
  return line + " in " + std::to_string(static_cast<int64_t>(seconds)) + " s";
}

}  // namespace

double SensitivityRow::worst() const {
  double w = 1.0;
  if (has_weight) w = std::min(w, weight_cosine);
  if (has_activation) w = std::min(w, activation_cosine);
  return w;
}

namespace {

Expected<SensitivityResult> analyze(const Model& float_model, const ClassifierOutputs& classifiers,
                                    const QuantTable& table, const QuantConfig* config, const Dataset& dataset,
                                    const SensitivityOptions& options) {
  if (options.method != "auto" && options.method != "output" && options.method != "local")
    return invalid_input("sensitivity: method '" + options.method + "' is none of auto, output, local");
  if (!(options.ranking_gmacs >= 0.0) || !std::isfinite(options.ranking_gmacs))
    return invalid_input("sensitivity: ranking-gmacs must be a finite number >= 0, got " + std::to_string(options.ranking_gmacs));
  const Graph& graph = *float_model.graph;
  Expected<InputBinding> binding = bind_inputs(graph, dataset);
  if (!binding) return binding.status().with_context("sensitivity");
  for (const auto& [name, params] : table) {
    (void)params;
    if (!graph.find_value(name)) return not_found("calibration table: tensor '" + name + "' is not in the model");
  }
  // Each node is tested with the parameters it has in the full model: aligned over all of it.
  QFLOW_ASSIGN_OR_RETURN(const QuantTable aligned, align_scales(graph, table, config));

  // The nodes the full QDQ model quantizes, in execution order.
  const QuantConfig defaults;
  const QuantConfig& cfg = config ? *config : defaults;
  QFLOW_ASSIGN_OR_RETURN(std::vector<Node*> order, graph.topological_order());
  std::map<std::string, int> name_count;
  for (const Node* node : order) ++name_count[node->name()];
  struct Candidate {
    const Node* node = nullptr;
    SensitivityRow row;
    QuantTable activations;  // the node's own output entries
  };
  SensitivityResult result;
  std::vector<Candidate> candidates;
  for (const Node* node : order) {
    const QuantSpec spec = cfg.resolve(node->name(), node->op_type());
    if (!spec.quantize) continue;
    Candidate c;
    c.node = node;
    c.row.node = node->name();
    c.row.op_type = node->op_type();
    for (const Value* out : node->outputs()) {
      if (!out) continue;
      auto it = aligned.find(out->name());
      if (it == aligned.end()) continue;
      if (out->type && out->type->dtype != DType::Undefined && out->type->dtype != DType::Float32) continue;
      if (out->uses().empty() && !is_graph_output(graph, out)) continue;
      c.activations.insert(*it);
    }
    c.row.has_activation = !c.activations.empty();
    c.row.has_weight = quantizable_weight(graph, *node, spec) != nullptr;
    if (!c.row.has_activation && !c.row.has_weight) continue;
    if (node->name().empty() || name_count[node->name()] > 1) {
      result.skipped.push_back(node->name().empty() ? node->op_type() + " (no name)" : node->name());
      continue;
    }
    candidates.push_back(std::move(c));
  }

  // Samples are read once and kept: every model below runs on all of them.
  QFLOW_ASSIGN_OR_RETURN(std::vector<Feeds> samples, read_feeds(dataset, *binding, options.limit));
  if (samples.empty()) return invalid_input("sensitivity: the dataset has no samples");
  result.samples = static_cast<int64_t>(samples.size());

  std::set<std::string> float_nodes;
  for (const Node* node : order) float_nodes.insert(node->name());
  QFLOW_ASSIGN_OR_RETURN(std::unique_ptr<Executor> float_exec, Executor::create(float_model));
  const int threads = std::max(1, options.threads);
  ThreadPool pool(threads);

  if (const double when_below = options.when_below; when_below > 0.0) {
    QFLOW_ASSIGN_OR_RETURN(const double cosine, ptq_output_cosine(float_model, *float_exec, classifiers, table, config, samples, pool));
    result.when_below = when_below;
    result.ptq_cosine = cosine;
    if (cosine >= when_below) {
      result.measured = false;
      return result;
    }
  }

  // Samples go in chunks whose float values (every tensor of the float model) fit in
  // cache_bytes; each chunk runs the float model once and then, per variant, only the part
  // of the variant that differs from the float model (suffix_model above). The results do
  // not depend on the chunking (cosines are summed in sample order), nor, measured, the time:
  // PP-OCRv4 rec (158 MB of values per sample), 16 samples, 2 threads: 40.4 s in one chunk
  // (2.6 GB peak) and 40.6 s in chunks of 2 (0.4 GB). So the budget stays small: 1 GiB, or
  // a quarter of the memory limit (--max-memory; half the machine's memory by default).
  const auto cache_bytes = static_cast<std::size_t>(std::min<int64_t>(int64_t{1} << 30, memory_limit() / 4));
  ThrottledProgress reporter(options.progress, std::chrono::seconds(60));
  std::mutex progress_mutex;
  std::vector<double> weight_sum(candidates.size(), 0.0), activation_sum(candidates.size(), 0.0);
  // The output ranking's cosines, per candidate its weight cosines then its activation
  // cosines, one per sample: candidate i's unit of 2 * samples values at 2 * i * samples (the
  // layout share_units exchanges). Summed once every chunk is done.
  std::vector<double> ranking_cosines;
  const auto weight_cosines = [&](std::size_t i) { return ranking_cosines.data() + 2 * i * samples.size(); };
  const auto activation_cosines = [&](std::size_t i) { return weight_cosines(i) + samples.size(); };
  // The float values of samples [begin, begin + values.size()), `threads` at a time.
  auto run_float = [&](std::size_t begin, std::vector<SampleValues>& values) -> Status {
    std::vector<Status> status(values.size(), Status::ok());
    pool.parallel_for(static_cast<int64_t>(values.size()), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const auto k = static_cast<std::size_t>(i);
        status[k] = float_values(*float_exec, classifiers, samples[begin + k], values[k]);
      }
    });
    for (std::size_t k = 0; k < values.size(); ++k)
      if (!status[k].is_ok())
        return status[k].with_context("sensitivity: " + sample_location(dataset, static_cast<int64_t>(begin + k)));
    return Status::ok();
  };
  std::size_t chunk = 1;
  double gmacs_per_sample = 0.0;  // what the output ranking costs per sample
  {
    std::vector<SampleValues> first(1);
    QFLOW_RETURN_IF_ERROR(run_float(0, first));
    chunk = std::max<std::size_t>({static_cast<std::size_t>(threads), cache_bytes / std::max<std::size_t>(1, first[0].bytes), 1});
    std::vector<int> variants;
    for (const Candidate& c : candidates) variants.push_back(int{c.row.has_weight} + int{c.row.has_activation});
    std::vector<std::string> names;
    for (const Candidate& c : candidates) names.push_back(c.row.node);
    QFLOW_ASSIGN_OR_RETURN(gmacs_per_sample, output_ranking_gmacs(float_model, first[0], names, variants));
  }
  std::size_t ranked = samples.size();  // the samples an output ranking measures
  if (options.ranking_gmacs > 0.0 && gmacs_per_sample > 0.0) {
    const double fit = std::max(static_cast<double>(kMinRankingSamples), std::floor(options.ranking_gmacs / gmacs_per_sample));
    ranked = std::min(samples.size(), static_cast<std::size_t>(fit));
  }
  result.output_gmacs = gmacs_per_sample * static_cast<double>(ranked);
  result.method = options.method != "auto" ? options.method
                  : result.output_gmacs > kAutoOutputBudgetGmacs ? "local"
                                                                  : "output";
  if (result.method == "output" && ranked < samples.size()) {
    samples.resize(ranked);
    result.samples = static_cast<int64_t>(ranked);
  }
  if (result.method == "local") {
    std::vector<LocalProbe> probes;
    for (const Candidate& c : candidates) {
      LocalProbe probe;
      probe.node = c.node;
      probe.activations = c.activations;
      if (c.row.has_weight) {
        const QuantSpec spec = cfg.resolve(probe.node->name(), probe.node->op_type());
        const Tensor* w = quantizable_weight(graph, *probe.node, spec);
        QFLOW_ASSIGN_OR_RETURN(const int64_t axis, weight_channel_axis(*probe.node, *w));
        Expected<QuantizedWeight> quantized = quantize_weight(*w, spec.per_channel ? axis : -1, spec.weight_dtype, spec.reduce_range, spec.weight_bits);
        if (!quantized) return quantized.status().with_context("sensitivity: " + c.row.op_type + " '" + c.row.node + "'");
        probe.weight = dequantize_weight(*quantized);
      }
      probes.push_back(std::move(probe));
    }
    if (options.bar) options.bar->restart("local ranking", "samples", static_cast<int64_t>(samples.size()));
    QFLOW_ASSIGN_OR_RETURN(const std::vector<LocalCosines> cosines, local_cosines(*float_exec, probes, samples, pool, options.bar));
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      weight_sum[i] = cosines[i].weight * static_cast<double>(samples.size());
      activation_sum[i] = cosines[i].activation * static_cast<double>(samples.size());
    }
  }
  if (result.method == "output") {
    ranking_cosines.assign(candidates.size() * 2 * samples.size(), 0.0);
  }
  // In a distributed run each rank measures the candidates it owns and the cosines are
  // shared (share_units) once every chunk is done; a failure stops this rank's chunks
  // but not the exchange, which every rank must reach.
  // Node i goes to rank i mod N: early nodes have the longest suffixes, so dealing them out
  // round-robin keeps the shares close.
  const World* world = options.world && options.world->distributed() ? options.world : nullptr;
  const auto owner = [&](std::size_t i) { return world ? static_cast<int>(i % static_cast<std::size_t>(world->size())) : 0; };
  const int me = world ? world->rank() : 0;
  std::size_t mine = 0;  // the candidates this rank measures: what its progress counts
  for (std::size_t i = 0; i < candidates.size(); ++i) mine += owner(i) == me ? 1 : 0;
  // The terminal bar counts one node measured on one sample as one unit: chunks of samples
  // then advance it evenly, whatever their size.
  if (options.bar && result.method == "output")
    options.bar->restart("ranking", "node-samples", static_cast<int64_t>(mine * samples.size()));
  std::vector<Status> status(candidates.size(), Status::ok());
  bool failed = false;
  for (std::size_t begin = 0; result.method == "output" && begin < samples.size() && !failed; begin += chunk) {
    std::vector<SampleValues> values(std::min(chunk, samples.size() - begin));
    std::atomic<std::size_t> measured{0};
    QFLOW_RETURN_IF_ERROR(run_float(begin, values));
    // The output cosines of one variant on this chunk's samples, into `out` at their sample index.
    auto chunk_cosine = [&](const QuantTable& node_table, const QuantConfig& node_config, bool weights,
                            const std::string& node, const std::string& what, double* out) -> Status {
      Model model = float_model.copy();
      QdqOptions options;
      options.weights = weights;
      if (Status s = build_qdq_model(model, node_table, &node_config, options); !s.is_ok()) return s.with_context(what);
      std::vector<std::string> output_names;
      for (const Value* out : model.graph->outputs) output_names.push_back(out->name());
      QFLOW_ASSIGN_OR_RETURN(const std::vector<std::string> feeds, suffix_model(model, float_nodes, node));
      QFLOW_ASSIGN_OR_RETURN(std::unique_ptr<Executor> executor, Executor::create(model));
      std::vector<Expected<double>> cosines(values.size(), internal_error("sample not run"));
      pool.parallel_for(static_cast<int64_t>(values.size()), [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          const SampleValues& v = values[static_cast<std::size_t>(i)];
          cosines[static_cast<std::size_t>(i)] = variant_cosine(*executor, classifiers, feeds, output_names, v);
        }
      });
      for (std::size_t k = 0; k < cosines.size(); ++k) {
        if (!cosines[k]) return cosines[k].status().with_context(what + ": " + sample_location(dataset, static_cast<int64_t>(begin + k)));
        out[begin + k] = *cosines[k];
      }
      return Status::ok();
    };
    auto measure = [&](std::size_t i) -> Status {
      const Candidate& c = candidates[i];
      const QuantConfig node_config = only_node(config, c.row.node);
      const std::string what = "sensitivity: " + c.row.op_type + " '" + c.row.node + "'";
      // Weights only: an empty table quantizes no activation, so the bias stays float.
      if (c.row.has_weight)
        QFLOW_RETURN_IF_ERROR(chunk_cosine(QuantTable{}, node_config, true, c.row.node, what + " weights", weight_cosines(i)));
      // Activations only: the node's own (aligned) output entries, weights float.
      if (c.row.has_activation)
        QFLOW_RETURN_IF_ERROR(
            chunk_cosine(c.activations, node_config, false, c.row.node, what + " activations", activation_cosines(i)));
      return Status::ok();
    };
    // The candidates go to the threads as they become free (early nodes have the longest
    // suffixes, and on small models building a variant's model and executor is as much work
    // as running it); each cosine lands at its sample's index, so the thread that ran it
    // does not matter.
    // Its sample runs then go inline. Errors: the first candidate's, as a serial loop gives.
    std::atomic<std::size_t> next{0};
    pool.parallel_for(static_cast<int64_t>(pool.size()), [&](int64_t, int64_t) {
      for (std::size_t i = next++; i < candidates.size(); i = next++) {
        if (owner(i) != me) continue;
        status[i] = measure(i);
        const std::size_t done = ++measured;
        if (options.bar) options.bar->advance(static_cast<int64_t>(values.size()));
        std::lock_guard lock(progress_mutex);
        if (reporter.wants_line())
          reporter.say(ranked_line(done, mine, begin, values.size(), samples.size(), reporter.seconds()));
      }
    });
    for (const Status& s : status) {
      if (s.is_ok()) continue;
      if (!world) return s;
      failed = true;
    }
  }
  if (world && result.method == "output")
    QFLOW_RETURN_IF_ERROR(share_units(*world, kSensitivityTag, 2 * samples.size(), owner, ranking_cosines, status));
  // Summed in sample order over all samples: the same values however the samples were chunked.
  if (result.method == "output")
    for (std::size_t i = 0; i < candidates.size(); ++i)
      for (std::size_t k = 0; k < samples.size(); ++k) {
        weight_sum[i] += weight_cosines(i)[k];
        activation_sum[i] += activation_cosines(i)[k];
      }
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    SensitivityRow row = candidates[i].row;
    if (row.has_weight) row.weight_cosine = weight_sum[i] / static_cast<double>(samples.size());
    if (row.has_activation) row.activation_cosine = activation_sum[i] / static_cast<double>(samples.size());
    result.rows.push_back(row);
  }
  std::stable_sort(result.rows.begin(), result.rows.end(), [](const SensitivityRow& a, const SensitivityRow& b) {
    if (a.worst() != b.worst()) return a.worst() < b.worst();
    return a.node < b.node;
  });
  return result;
}

}  // namespace

Expected<SensitivityResult> analyze_sensitivity(const Model& float_model, const QuantTable& table,
                                                const QuantConfig* config, const Dataset& dataset,
                                                const SensitivityOptions& options) {
  // Classifier outputs are compared through their logits (classifier_outputs.h): the models
  // run here compute them as extra outputs.
  Model scoring = float_model.copy();
  const ClassifierOutputs classifiers = ClassifierOutputs::expose(scoring);
  return analyze(classifiers.empty() ? float_model : scoring, classifiers, table, config, dataset, options);
}

namespace {

std::string pad(const std::string& text, std::size_t width) {
  return text.size() >= width ? text : text + std::string(width - text.size(), ' ');
}
std::string cosine_cell(bool has, double v) {
  if (!has) return "        -";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%9.6f", v);
  return buffer;
}
std::size_t shown(const SensitivityResult& result, int64_t top) {
  return top > 0 ? std::min(result.rows.size(), static_cast<std::size_t>(top)) : result.rows.size();
}

}  // namespace

std::string sensitivity_text(const SensitivityResult& result, int64_t top) {
  const std::size_t n = shown(result, top);
  std::size_t nw = 4, ow = 7;
  for (std::size_t i = 0; i < n; ++i) {
    nw = std::max(nw, result.rows[i].node.size());
    ow = std::max(ow, result.rows[i].op_type.size());
  }
  std::string text = "samples: " + std::to_string(result.samples) + "\n";
  if (result.ptq_cosine)
    text += "PTQ model output cosine: " + std::to_string(*result.ptq_cosine) +
            (result.measured ? "" : ", not below " + std::to_string(result.when_below) + ": nodes not ranked") + "\n";
  text += "nodes: " + std::to_string(result.rows.size()) +
          (n < result.rows.size() ? ", the " + std::to_string(n) + " worst shown" : std::string()) +
          (result.method == "local" ? "; cosine of the node's own outputs with only it quantized (local ranking: the output "
                                      "ranking would have run " + std::to_string(static_cast<int64_t>(result.output_gmacs)) +
                                      " GMAC), worst first\n"
                                    : "; output cosine with only that node quantized, worst first\n");
  text += pad("rank", 5) + "  " + pad("node", nw) + "  " + pad("op_type", ow) + "  weight_cos  activation_cos\n";
  for (std::size_t i = 0; i < n; ++i) {
    const SensitivityRow& r = result.rows[i];
    text += pad(std::to_string(i + 1), 5) + "  " + pad(r.node, nw) + "  " + pad(r.op_type, ow) + "   " +
            cosine_cell(r.has_weight, r.weight_cosine) + "       " + cosine_cell(r.has_activation, r.activation_cosine) +
            "\n";
  }
  for (const std::string& name : result.skipped) text += "not tested (no unique node name): " + name + "\n";
  return text;
}

Expected<std::string> sensitivity_json(const SensitivityResult& result, int64_t top) {
  const std::size_t n = shown(result, top);
  JsonWriter json;
  json.begin_object();
  json.field("samples", result.samples);
  json.field("measured", result.measured);
  if (result.measured) json.field("method", result.method);
  if (result.ptq_cosine) {
    json.field("ptq_cosine", *result.ptq_cosine);
    json.field("when_below", result.when_below);
  }
  json.field("nodes", static_cast<int64_t>(result.rows.size()));
  json.key("ranking").begin_array();
  for (std::size_t i = 0; i < n; ++i) {
    const SensitivityRow& r = result.rows[i];
    json.begin_object(true);
    json.field("node", r.node);
    json.field("op_type", r.op_type);
    json.key("weight_cosine");
    if (r.has_weight) json.value(r.weight_cosine);
    else json.null();
    json.key("activation_cosine");
    if (r.has_activation) json.value(r.activation_cosine);
    else json.null();
    json.end_object();
  }
  json.end_array();
  json.key("skipped").begin_array(true);
  for (const std::string& name : result.skipped) json.value(name);
  json.end_array();
  json.end_object();
  return json.finish();
}

}  // namespace qflow

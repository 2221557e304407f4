// Per-layer comparison: the float model and the QDQ model run side by side on every sample,
// one small model per quantized node inside the float run; error sums per tensor merged in
// sample order.
#include "framework/quant/layer_compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>

#include "qflow/core/json_writer.h"
#include "framework/core/thread_pool.h"
#include "framework/data/input_feeds.h"
#include "framework/distributed/share_units.h"
#include "framework/quant/compare_handoff.h"
#include "framework/quant/lane_sums.h"
#include "framework/quant/lockstep_pairs.h"
#include "framework/interpreter/executor.h"
#include "qflow/quant/quant_math.h"

namespace qflow {

namespace {

constexpr int kCompareTag = 7601;

bool is_default_domain(const Node& node) { return node.domain().empty() || node.domain() == "ai.onnx"; }
bool is_op(const Node* node, const char* op) { return node && node->op_type() == op && is_default_domain(*node); }

bool contains(const std::vector<Value*>& values, const Value* v) {
  return std::find(values.begin(), values.end(), v) != values.end();
}

// A constant: an initializer that is not also a graph input, or a Constant node's output.
bool is_constant(const Graph& graph, const Value* v) {
  if (!v) return false;
  if (graph.is_initializer(v) && !contains(graph.inputs, v)) return true;
  return is_op(v->producer(), "Constant");
}

const Tensor* constant_of(const Graph& graph, const Value* v) {
  if (!v) return nullptr;
  if (graph.is_initializer(v) && !contains(graph.inputs, v)) return graph.initializer(v);
  const Node* producer = v->producer();
  if (is_op(producer, "Constant"))
    if (const Attribute* a = producer->find_attribute("value"); a && a->type == AttributeType::Tensor) return &a->t;
  return nullptr;
}

// The Clip that bounds a narrowed activation grid after `dequantize` (qdq_builder.cpp): the
// only reader of its output, whose constant bounds are the dequantized ends of a grid of 2 to
// width-1 bits of the DequantizeLinear's scale and zero point; null when there is none. The
// bounds tell it from a model's own Clip (ReLU6) that reads a DequantizeLinear.
const Node* grid_clip_of(const Graph& graph, const Node& dequantize) {
  const Value* out = dequantize.output(0);
  if (!out || out->uses().size() != 1 || contains(graph.outputs, out)) return nullptr;
  const Node* clip = out->uses().front().first;
  if (!is_op(clip, "Clip") || clip->inputs().size() != 3 || clip->input(0) != out || !clip->output(0)) return nullptr;
  const Tensor* lo = constant_of(graph, clip->input(1));
  const Tensor* hi = constant_of(graph, clip->input(2));
  const Tensor* scale = constant_of(graph, dequantize.input(1));
  const Tensor* zp = constant_of(graph, dequantize.input(2));
  if (!lo || !hi || !scale || !zp || lo->numel() != 1 || hi->numel() != 1 || scale->numel() != 1 || zp->numel() != 1)
    return nullptr;
  const double s = static_cast<float>(scale->to_doubles()[0]);
  const double z = static_cast<double>(zp->to_int64s()[0]);
  const auto lo_value = static_cast<float>(lo->to_doubles()[0]), hi_value = static_cast<float>(hi->to_doubles()[0]);
  for (int bits = 2; bits < quant_bits(zp->dtype()); ++bits) {
    const QuantRange grid = grid_range(zp->dtype(), bits);
    if (static_cast<float>((static_cast<double>(grid.min) - z) * s) == lo_value &&
        static_cast<float>((static_cast<double>(grid.max) - z) * s) == hi_value)
      return clip;
  }
  return nullptr;
}

// What the QDQ model's consumers of a quantized activation read: the DequantizeLinear output,
// or the grid Clip's after it.
const Value* read_value_of(const Graph& graph, const Node& dequantize) {
  const Node* clip = grid_clip_of(graph, dequantize);
  return clip ? clip->output(0) : dequantize.output(0);
}

// One quantized activation of the QDQ model.
struct QdqPair {
  const Node* quantize = nullptr;
  const Node* dequantize = nullptr;
  std::string float_name;  // the tensor's name in the float model
  std::string dq_output;   // what consumers of the QDQ model read
  const Node* clip = nullptr;  // a narrowed grid's Clip after the DequantizeLinear
};

// The name the quantized tensor has in the float model: the QuantizeLinear input, or, when
// what consumers read is a graph output, that output's name (the producer writes
// `<name>_float` then, docs/quantization.md).
std::string float_name_of(const Graph& graph, const Node& quantize, const Node& dequantize) {
  if (const Value* read = read_value_of(graph, dequantize); contains(graph.outputs, read)) return read->name();
  return quantize.input(0)->name();
}

std::vector<QdqPair> find_pairs(const Graph& graph, const std::vector<Node*>& order) {
  std::vector<QdqPair> pairs;
  std::set<std::string> seen;
  for (const Node* node : order) {
    if (!is_op(node, "QuantizeLinear") || !node->input(0) || !node->output(0)) continue;
    if (is_constant(graph, node->input(0))) continue;  // weights
    for (const auto& [user, index] : node->output(0)->uses()) {
      (void)index;
      if (!is_op(user, "DequantizeLinear") || !user->output(0)) continue;
      QdqPair pair{node, user, float_name_of(graph, *node, *user), read_value_of(graph, *user)->name(),
                   grid_clip_of(graph, *user)};
      if (seen.insert(pair.float_name).second) pairs.push_back(pair);
      break;
    }
  }
  return pairs;
}

// A model that runs one node of the QDQ model alone: its inputs come from the float model
// (through the QDQ model's Q/DQ pairs where it quantizes them), its weights as the QDQ model
// holds them, and its quantized outputs leave through their Q/DQ pairs.
struct IsolatedModel {
  Model model;
  std::vector<std::pair<std::string, std::string>> feeds;  // small-model input <- float tensor
  std::vector<std::pair<std::string, std::size_t>> outputs;  // small-model output -> row
  std::unique_ptr<Executor> executor;
};

class IsolatedBuilder {
 public:
  IsolatedBuilder(const Model& qdq, IsolatedModel& out) : qdq_(*qdq.graph), out_(out), g_(*out.model.graph) {
    out.model.ir_version = qdq.ir_version;
    out.model.opset_imports = qdq.opset_imports;
  }

  // The small-model value for QDQ-model value `v`, copying what produces it; false when the
  // node cannot be isolated.
  bool bring(const Value* v, Value*& result) {
    result = nullptr;
    if (!v) return true;
    if (Value* existing = g_.find_value(v->name())) {
      result = existing;
      return true;
    }
    if (qdq_.is_initializer(v) && !contains(qdq_.inputs, v)) {
      result = g_.get_or_create_value(v->name());
      g_.set_initializer(result, *qdq_.initializer(v));
      return true;
    }
    const Node* producer = v->producer();
    if (is_op(producer, "Constant")) return copy_node(*producer, result);
    if (is_op(producer, "QuantizeLinear")) return copy_node(*producer, result);
    // A narrowed grid's Clip: copied with its DequantizeLinear (brought below).
    if (is_op(producer, "Clip") && producer->input(0) && is_op(producer->input(0)->producer(), "DequantizeLinear") &&
        grid_clip_of(qdq_, *producer->input(0)->producer()) == producer)
      return copy_node(*producer, result);
    if (is_op(producer, "DequantizeLinear") && producer->input(0)) {
      const Value* source = producer->input(0);
      const Node* quantize = source->producer();
      if (is_constant(qdq_, source)) return copy_node(*producer, result);  // a weight or bias
      if (!is_op(quantize, "QuantizeLinear") || !quantize->input(0)) return false;
      // A quantized activation: fed with its float value, then quantized as the QDQ model does.
      if (!is_constant(qdq_, quantize->input(0)))
        feed(quantize->input(0)->name(), float_name_of(qdq_, *quantize, *producer));
      return copy_node(*producer, result);
    }
    // An activation the QDQ model does not quantize (or a graph input): its float value.
    feed(v->name(), v->name());
    result = g_.find_value(v->name());
    return true;
  }

  // Copies `node` (and, through bring, its inputs); `result` is its output that was asked for.
  bool copy_node(const Node& node, Value*& result) {
    for (const Attribute& a : node.attributes())
      if (a.g || !a.graphs.empty()) return false;  // subgraphs read outer values: not isolated
    std::vector<Value*> inputs;
    for (const Value* in : node.inputs()) {
      Value* v = nullptr;
      if (!bring(in, v)) return false;
      inputs.push_back(v);
    }
    std::vector<Value*> outputs;
    for (const Value* o : node.outputs()) outputs.push_back(o ? g_.get_or_create_value(o->name()) : nullptr);
    Node* copy = g_.add_node(node.op_type(), inputs, outputs, node.name(), node.domain());
    for (const Attribute& a : node.attributes()) copy->set_attribute(a);
    result = nullptr;
    for (std::size_t i = 0; i < node.outputs().size(); ++i)
      if (outputs[i]) result = outputs[i];
    return true;
  }

  void feed(const std::string& name, const std::string& float_name) {
    if (g_.find_value(name)) return;
    g_.inputs.push_back(g_.get_or_create_value(name));
    out_.feeds.emplace_back(name, float_name);
  }

  // Adds the node producing `pair`'s tensor (null for a graph input) and the pair itself.
  bool add_output(const QdqPair& pair, std::size_t row) {
    const Value* source = pair.quantize->input(0);
    if (const Node* producer = source->producer()) {
      if (!g_.find_value(source->name()) || !g_.find_value(source->name())->producer()) {
        Value* ignored = nullptr;
        if (!copy_node(*producer, ignored)) return false;
      }
    } else {
      feed(source->name(), pair.float_name);
    }
    Value* out = nullptr;
    if (!copy_node(*pair.dequantize, out)) return false;
    if (pair.clip && !copy_node(*pair.clip, out)) return false;
    g_.outputs.push_back(g_.find_value(pair.dq_output));
    out_.outputs.emplace_back(pair.dq_output, row);
    return true;
  }

 private:
  const Graph& qdq_;
  IsolatedModel& out_;
  Graph& g_;
};

// A tensor's values as float32 (a view when it already is).
const float* float_data(const Tensor& t, std::vector<float>& storage) {
  if (t.dtype() == DType::Float32) return t.data<float>();
  storage.clear();
  for (double v : t.to_doubles()) storage.push_back(static_cast<float>(v));
  return storage.data();
}

Status compare_into(ErrorSums& sums, const std::string& name, const Tensor& expected, const Tensor& actual) {
  if (expected.numel() != actual.numel())
    return invalid_input("tensor '" + name + "' has " + std::to_string(expected.numel()) +
                         " elements in the float model and " + std::to_string(actual.numel()) + " in the QDQ model");
  std::vector<float> a, b;
  sums.add(float_data(expected, a), float_data(actual, b), expected.numel());
  return Status::ok();
}

}  // namespace

void ErrorSums::add(const float* x, const float* q, int64_t n) {
  LaneSums s;
  add_lane_sums(x, q, n, 0, true, s);
  dot += lane_tree(s.dot);
  float_sq += lane_tree(s.float_sq);
  quant_sq += lane_tree(s.quant_sq);
  error_sq += lane_tree(s.error_sq);
  for (int64_t l = 0; l < LaneSums::kLanes; ++l) max_abs = std::max(max_abs, s.max_abs[l]);
  count += n;
}

void ErrorSums::merge(const ErrorSums& other) {
  dot += other.dot;
  float_sq += other.float_sq;
  quant_sq += other.quant_sq;
  error_sq += other.error_sq;
  max_abs = std::max(max_abs, other.max_abs);
  count += other.count;
}

ErrorMetrics error_metrics(const ErrorSums& s) {
  ErrorMetrics m;
  if (s.float_sq == 0.0 && s.quant_sq == 0.0) m.cosine = 1.0;
  else if (s.float_sq == 0.0 || s.quant_sq == 0.0) m.cosine = 0.0;
  else m.cosine = s.dot / (std::sqrt(s.float_sq) * std::sqrt(s.quant_sq));
  m.mse = s.count > 0 ? s.error_sq / static_cast<double>(s.count) : 0.0;
  m.max_abs_error = s.max_abs;
  if (s.error_sq == 0.0) m.sqnr_db = std::numeric_limits<double>::infinity();
  else if (s.float_sq == 0.0) m.sqnr_db = -std::numeric_limits<double>::infinity();
  else m.sqnr_db = 10.0 * std::log10(s.float_sq / s.error_sq);
  return m;
}

Expected<LayerComparison> compare_layers(const Model& float_model, const Model& qdq_model, const Dataset& dataset,
                                         int threads, int64_t limit, ProgressBar* progress, const World* world) {
  const Graph& fg = *float_model.graph;
  const Graph& qg = *qdq_model.graph;
  Expected<InputBinding> float_binding = bind_inputs(fg, dataset);
  if (!float_binding) return float_binding.status().with_context("compare: the float model");
  Expected<InputBinding> qdq_binding = bind_inputs(qg, dataset);
  if (!qdq_binding) return qdq_binding.status().with_context("compare: the QDQ model");

  QFLOW_ASSIGN_OR_RETURN(std::vector<Node*> order, qg.topological_order());
  LayerComparison result;
  std::vector<QdqPair> pairs;
  for (const QdqPair& pair : find_pairs(qg, order)) {
    const Value* fv = fg.find_value(pair.float_name);
    if (!fv || (!fv->producer() && !contains(fg.inputs, fv))) {
      result.unmatched.push_back(pair.float_name);
      continue;
    }
    LayerRow row;
    row.tensor = pair.float_name;
    if (const Node* p = fv->producer()) {
      row.node = p->name();
      row.op_type = p->op_type();
    }
    result.rows.push_back(row);
    pairs.push_back(pair);
  }
  if (pairs.empty())
    return invalid_input("compare: the QDQ model has no quantized activation that the float model also has" +
                         std::string(result.unmatched.empty() ? "" : " (first unmatched: '" + result.unmatched[0] + "')"));

  // One small model per producing node (graph-input pairs each alone).
  std::vector<std::unique_ptr<IsolatedModel>> isolated;
  {
    std::vector<std::vector<std::size_t>> groups;  // rows per producer, first-seen order
    std::map<const Node*, std::size_t> group_of;
    for (std::size_t r = 0; r < pairs.size(); ++r) {
      const Node* p = pairs[r].quantize->input(0)->producer();
      if (p && group_of.count(p)) {
        groups[group_of[p]].push_back(r);
        continue;
      }
      if (p) group_of[p] = groups.size();
      groups.push_back({r});  // graph inputs: each alone
    }
    for (const std::vector<std::size_t>& rows : groups) {
      auto model = std::make_unique<IsolatedModel>();
      IsolatedBuilder builder(qdq_model, *model);
      bool ok = true;
      for (std::size_t r : rows) ok = ok && builder.add_output(pairs[r], r);
      for (const auto& [name, float_name] : model->feeds) {
        const Value* fv = fg.find_value(float_name);
        ok = ok && fv && (fv->producer() || contains(fg.inputs, fv) || fg.is_initializer(fv));
      }
      if (!ok || !model->model.graph->validate().is_ok()) continue;
      ExecutorOptions options;
      options.keep_buffers = false;  // hundreds of them, each run once per sample
      auto executor = Executor::create(model->model, options);
      if (!executor) continue;
      model->executor = std::move(executor).value();
      for (std::size_t r : rows) result.rows[r].has_isolated = true;
      isolated.push_back(std::move(model));
    }
  }

  std::unordered_map<std::string, std::size_t> row_of_float, row_of_dq;
  for (std::size_t r = 0; r < pairs.size(); ++r) {
    row_of_float[pairs[r].float_name] = r;
    row_of_dq[pairs[r].dq_output] = r;
  }
  // Float tensors the isolated models read (feeds) or are compared with (outputs).
  std::vector<std::vector<std::string>> isolated_needs(isolated.size());
  std::unordered_map<std::string, std::vector<std::size_t>> needed_by;
  for (std::size_t m = 0; m < isolated.size(); ++m) {
    std::set<std::string> names;
    for (const auto& [name, float_name] : isolated[m]->feeds) names.insert(float_name);
    for (const auto& [name, r] : isolated[m]->outputs) names.insert(pairs[r].float_name);
    isolated_needs[m].assign(names.begin(), names.end());
    for (const std::string& name : names) needed_by[name].push_back(m);
  }

  QFLOW_ASSIGN_OR_RETURN(std::unique_ptr<Executor> float_exec, Executor::create(float_model));
  QFLOW_ASSIGN_OR_RETURN(std::unique_ptr<Executor> qdq_exec, Executor::create(qdq_model));

  const std::size_t rows = pairs.size();
  std::vector<std::string> row_names;
  for (const QdqPair& pair : pairs) row_names.push_back(pair.float_name);
  // Per sample: sums[2r] accumulated, sums[2r + 1] isolated.
  auto run_one = [&](const std::vector<Tensor>& sample) -> Expected<std::vector<ErrorSums>> {
    std::vector<ErrorSums> sums(2 * rows);
    const Feeds float_feeds = make_feeds(*float_binding, sample);

    // The isolated models run inside the float run, each as soon as the float tensors it
    // needs exist; a tensor is held only until the last model needing it has run.
    std::unordered_map<std::string, Tensor> held;
    std::unordered_map<std::string, std::size_t> holders;
    std::vector<std::size_t> missing(isolated.size());
    for (std::size_t m = 0; m < isolated.size(); ++m) missing[m] = isolated_needs[m].size();
    for (const auto& [name, models] : needed_by) holders[name] = models.size();
    auto run_isolated = [&](std::size_t m) -> Status {
      std::map<std::string, Tensor> feeds;
      for (const auto& [name, float_name] : isolated[m]->feeds) feeds[name] = held.at(float_name);
      QFLOW_ASSIGN_OR_RETURN(auto outputs, isolated[m]->executor->run(feeds));
      for (const auto& [name, r] : isolated[m]->outputs)
        QFLOW_RETURN_IF_ERROR(compare_into(sums[2 * r + 1], row_names[r], held.at(row_names[r]), outputs.at(name)));
      for (const std::string& name : isolated_needs[m])
        if (--holders[name] == 0) held.erase(name);
      return Status::ok();
    };
    auto float_available = [&](const std::string& name, const Tensor& tensor) -> Status {
      auto it = needed_by.find(name);
      if (it == needed_by.end() || held.count(name)) return Status::ok();
      held[name] = tensor;
      for (std::size_t m : it->second)
        if (--missing[m] == 0) QFLOW_RETURN_IF_ERROR(run_isolated(m));
      return Status::ok();
    };

    // The float and QDQ runs go side by side, each compared tensor kept only until the
    // other run produces it: a 1024x1024 segmentation model holds gigabytes of activations.
    LockstepPairs lockstep;
    CompareHandoff handoff;
    auto deliver = [&](LockstepPairs::Side side, std::size_t r, const Tensor& tensor) -> Status {
      std::optional<Tensor> partner = lockstep.deposit(side, r, tensor);
      if (!partner) return lockstep.wait_for_room(side);
      // The float side, the busier one, hands its comparisons to the QDQ thread.
      if (side == LockstepPairs::Float &&
          handoff.push([&sums, &row_names, r, x = tensor, q = *partner] { return compare_into(sums[2 * r], row_names[r], x, q); },
                       tensor.nbytes() + partner->nbytes()))
        return Status::ok();
      const Tensor& x = side == LockstepPairs::Float ? tensor : *partner;
      const Tensor& q = side == LockstepPairs::Float ? *partner : tensor;
      return compare_into(sums[2 * r], row_names[r], x, q);
    };
    Status qdq_status = Status::ok();
    std::thread qdq_thread([&] {
      qdq_status = qdq_exec
                       ->run(make_feeds(*qdq_binding, sample),
                             [&](const Value& value, const Tensor& tensor) -> Status {
                               QFLOW_RETURN_IF_ERROR(handoff.drain());
                               auto it = row_of_dq.find(value.name());
                               if (it == row_of_dq.end()) return Status::ok();
                               return deliver(LockstepPairs::Qdq, it->second, tensor);
                             })
                       .status();
      lockstep.finish(LockstepPairs::Qdq, qdq_status.is_ok());
      if (qdq_status.is_ok()) qdq_status = handoff.drain_until_finished();
    });
    auto float_value = [&](const std::string& name, const Tensor& tensor) -> Status {
      QFLOW_RETURN_IF_ERROR(float_available(name, tensor));
      auto it = row_of_float.find(name);
      return it == row_of_float.end() ? Status::ok() : deliver(LockstepPairs::Float, it->second, tensor);
    };
    Status float_status = Status::ok();
    for (const auto& [name, tensor] : float_feeds)
      if (float_status.is_ok()) float_status = float_value(name, tensor);
    for (const Value* v : fg.initializer_order())
      if (float_status.is_ok() && needed_by.count(v->name())) float_status = float_available(v->name(), *fg.initializer(v));
    if (float_status.is_ok())
      float_status = float_exec
                         ->run(float_feeds,
                               [&](const Value& value, const Tensor& tensor) { return float_value(value.name(), tensor); })
                         .status();
    lockstep.finish(LockstepPairs::Float, float_status.is_ok());
    handoff.finish();
    qdq_thread.join();
    // What a failed QDQ thread left, and the failures of what it compared, count as the
    // float run's.
    if (Status left = handoff.drain(); float_status.is_ok()) float_status = left;
    if (lockstep.first_failed() == LockstepPairs::Qdq) return qdq_status;
    QFLOW_RETURN_IF_ERROR(float_status);
    if (std::optional<std::size_t> r = lockstep.unmatched_qdq_row())
      return internal_error("compare: float tensor '" + row_names[*r] + "' was not computed");
    for (std::size_t m = 0; m < isolated.size(); ++m)
      if (missing[m] > 0) return internal_error("compare: float tensor '" + isolated_needs[m].front() + "' was not computed");
    return sums;
  };

  // Each sample runs two threads (its float and QDQ runs).
  const int at_once = std::max(1, threads / 2);
  ThreadPool pool(at_once);
  const std::size_t total_sums = 2 * rows;
  const int64_t count = limit > 0 ? std::min(limit, dataset.count) : dataset.count;
  if (count == 0) return invalid_input("compare: the dataset has no samples");
  // One process merges each sample's sums into the totals as it goes, in sample order. A
  // distributed run keeps each sample's sums as a row of doubles (ErrorSums' six fields) for
  // its slice, shares the rows, and every rank merges them in sample order, as one process
  // does (partial sums per rank would round differently).
  SliceSweep sweep(world, count);
  constexpr std::size_t kFields = 6;
  const std::size_t width = total_sums * kFields;
  std::vector<ErrorSums> total(total_sums);
  std::vector<double> per_sample(sweep.distributed() ? static_cast<std::size_t>(count) * width : 0, 0.0);
  std::vector<std::pair<int64_t, std::vector<Tensor>>> batch;
  auto flush = [&]() -> Status {
    std::vector<Expected<std::vector<ErrorSums>>> done(batch.size(), internal_error("sample not run"));
    pool.parallel_for(static_cast<int64_t>(batch.size()), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        done[static_cast<std::size_t>(i)] = run_one(batch[static_cast<std::size_t>(i)].second);
    });
    for (std::size_t i = 0; i < batch.size() && sweep.status().is_ok(); ++i) {
      const int64_t index = batch[i].first;
      if (!done[i]) {
        sweep.failed(index, done[i].status().with_context("compare: " + sample_location(dataset, index)));
        break;
      }
      if (!sweep.distributed()) {
        for (std::size_t k = 0; k < total.size(); ++k) total[k].merge((*done[i])[k]);
      } else {
        double* row = per_sample.data() + static_cast<std::size_t>(index) * width;
        for (const ErrorSums& sums : *done[i]) {
          *row++ = sums.dot;
          *row++ = sums.float_sq;
          *row++ = sums.quant_sq;
          *row++ = sums.error_sq;
          *row++ = sums.max_abs;
          *row++ = static_cast<double>(sums.count);
        }
      }
      sweep.measured(index);
    }
    if (progress) progress->advance(static_cast<int64_t>(batch.size()));
    batch.clear();
    return sweep.status();
  };
  Status swept = for_each_sample_in(dataset, sweep.slice().begin, sweep.slice().end,
                                    [&](int64_t index, const std::vector<Tensor>& sample) -> Status {
                                      batch.emplace_back(index, sample);
                                      return static_cast<int>(batch.size()) >= at_once ? flush() : Status::ok();
                                    });
  if (swept.is_ok()) swept = flush();
  QFLOW_RETURN_IF_ERROR(sweep.finish(swept, kCompareTag, width, per_sample));
  for (int64_t i = 0; sweep.distributed() && i < count; ++i) {  // the shared rows, in sample order
    const double* row = per_sample.data() + static_cast<std::size_t>(i) * width;
    for (ErrorSums& sums : total) {
      ErrorSums one;
      one.dot = row[0];
      one.float_sq = row[1];
      one.quant_sq = row[2];
      one.error_sq = row[3];
      one.max_abs = row[4];
      one.count = static_cast<int64_t>(row[5]);
      sums.merge(one);
      row += kFields;
    }
  }
  result.samples = count;

  for (std::size_t r = 0; r < rows; ++r) {
    LayerRow& row = result.rows[r];
    row.elements = result.samples > 0 ? total[2 * r].count / result.samples : 0;
    row.accumulated = error_metrics(total[2 * r]);
    if (row.has_isolated) row.isolated = error_metrics(total[2 * r + 1]);
  }
  std::stable_sort(result.rows.begin(), result.rows.end(), [](const LayerRow& a, const LayerRow& b) {
    if (a.accumulated.cosine != b.accumulated.cosine) return a.accumulated.cosine < b.accumulated.cosine;
    return a.tensor < b.tensor;
  });
  return result;
}

std::string format_db(double db, int precision) {
  if (std::isnan(db)) return "nan";
  if (std::isinf(db)) return db > 0 ? "inf" : "-inf";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", precision, db);
  return buffer;
}

namespace {

std::string pad(const std::string& text, std::size_t width) {
  return text.size() >= width ? text : text + std::string(width - text.size(), ' ');
}
std::string pad_left(const std::string& text, std::size_t width) {
  return text.size() >= width ? text : std::string(width - text.size(), ' ') + text;
}
std::string fixed(double v, const char* format) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, v);
  return buffer;
}
std::string metric_cells(const ErrorMetrics& m) {
  return pad_left(fixed(m.cosine, "%.6f"), 9) + "  " + pad_left(fixed(m.mse, "%.4e"), 11) + "  " +
         pad_left(fixed(m.max_abs_error, "%.4e"), 11) + "  " + pad_left(format_db(m.sqnr_db), 8);
}

void metrics_json(JsonWriter& json, const ErrorMetrics& m) {
  json.begin_object(true);
  json.field("cosine", m.cosine);
  json.field("mse", m.mse);
  json.field("max_abs_error", m.max_abs_error);
  if (std::isfinite(m.sqnr_db)) json.field("sqnr_db", m.sqnr_db);
  else json.field("sqnr_db", format_db(m.sqnr_db));
  json.end_object();
}

}  // namespace

std::string layer_comparison_text(const LayerComparison& result) {
  std::size_t tw = 6, nw = 4, ow = 7;
  for (const LayerRow& r : result.rows) {
    tw = std::max(tw, r.tensor.size());
    nw = std::max(nw, r.node.empty() ? std::size_t{1} : r.node.size());
    ow = std::max(ow, r.op_type.size());
  }
  const std::string metrics_header = pad_left("cosine", 9) + "  " + pad_left("mse", 11) + "  " +
                                     pad_left("max_abs", 11) + "  " + pad_left("sqnr_db", 8);
  const std::size_t mw = metrics_header.size();
  std::string text = "samples: " + std::to_string(result.samples) + "\n";
  text += "quantized tensors: " + std::to_string(result.rows.size()) + ", worst first (lowest accumulated cosine)\n";
  text += pad("", tw + nw + ow + 6) + pad("accumulated (float model vs QDQ model)", mw) +
          "    isolated (only the producing node quantized)\n";
  text += pad("tensor", tw) + "  " + pad("node", nw) + "  " + pad("op_type", ow) + "  " + metrics_header + "    " +
          metrics_header + "\n";
  for (const LayerRow& r : result.rows) {
    std::string line = pad(r.tensor, tw) + "  " + pad(r.node.empty() ? "-" : r.node, nw) + "  " +
                       pad(r.op_type.empty() ? "input" : r.op_type, ow) + "  " + metric_cells(r.accumulated) + "    " +
                       (r.has_isolated ? metric_cells(r.isolated) : pad_left("n/a", 9));
    while (!line.empty() && line.back() == ' ') line.pop_back();
    text += line + "\n";
  }
  for (const std::string& name : result.unmatched)
    text += "not in the float model: " + name + "\n";
  return text;
}

Expected<std::string> layer_comparison_json(const LayerComparison& result) {
  JsonWriter json;
  json.begin_object();
  json.field("samples", result.samples);
  json.key("tensors").begin_array();
  for (const LayerRow& r : result.rows) {
    json.begin_object();
    json.field("tensor", r.tensor);
    json.field("node", r.node);
    json.field("op_type", r.op_type);
    json.field("elements", r.elements);
    json.key("accumulated");
    metrics_json(json, r.accumulated);
    json.key("isolated");
    if (r.has_isolated) metrics_json(json, r.isolated);
    else json.null();
    json.end_object();
  }
  json.end_array();
  json.key("unmatched").begin_array(true);
  for (const std::string& name : result.unmatched) json.value(name);
  json.end_array();
  json.end_object();
  return json.finish();
}

}  // namespace qflow

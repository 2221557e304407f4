// ConstantFolding: evaluation of constant subgraphs with the reference kernels, to a fixed point.
#include "constant_folding.h"

#include <algorithm>
#include <unordered_set>
#include <vector>

#include "if_inlining.h"
#include "qflow/interpreter.h"
#include "qflow/ir/captured_values.h"

namespace qflow {

namespace {

// Ops whose results differ from run to run; folding would freeze one draw.
bool is_nondeterministic(const Node& node) {
  static const std::set<std::string> kRandom = {"RandomNormal",     "RandomUniform", "RandomNormalLike",
                                                "RandomUniformLike", "Multinomial",   "Bernoulli"};
  if (!node.domain().empty() && node.domain() != "ai.onnx") return false;
  if (kRandom.count(node.op_type())) return true;
  // Dropout draws a mask only in training mode, which its third input switches on.
  return node.op_type() == "Dropout" && node.input(2) != nullptr;
}

bool has_subgraph(const Node& node) {
  return std::any_of(node.attributes().begin(), node.attributes().end(),
                     [](const Attribute& a) { return a.g != nullptr || !a.graphs.empty(); });
}

bool contains(const std::vector<Value*>& values, const Value* v) {
  return std::find(values.begin(), values.end(), v) != values.end();
}

// Size of the result known before running the node, or -1: a guard against evaluating
// something huge only to throw it away.
int64_t predicted_bytes(const Node& node, const Graph& graph) {
  int64_t bytes = 0;
  for (const Value* out : node.outputs()) {
    if (!out || !out->type) continue;
    const auto shape = out->type->static_shape();
    const std::size_t element = dtype_size(out->type->dtype);
    if (!shape || element == 0) continue;
    const int64_t numel = shape_numel(*shape);
    if (numel < 0) return -1;
    bytes += numel * static_cast<int64_t>(element);
  }
  if (node.op_type() == "ConstantOfShape" && node.input(0)) {
    if (const Tensor* shape = graph.initializer(node.input(0))) {
      const int64_t numel = shape_numel(shape->to_int64s());
      if (numel < 0) return -1;
      // The fill value may be any dtype; 8 bytes bounds them all.
      bytes = std::max(bytes, numel * 8);
    }
  }
  return bytes;
}

// Whether the node may be folded now, ignoring the caller's filter.
bool is_foldable(const Node& node, const Graph& graph, int64_t opset) {
  if (is_nondeterministic(node) || has_subgraph(node)) return false;
  for (const Value* in : node.inputs())
    if (in && (!graph.is_initializer(in) || contains(graph.inputs, in))) return false;
  for (const Value* out : node.outputs())
    if (out && contains(graph.outputs, out)) return false;
  return can_evaluate(node, opset);
}

// Evaluates one node and replaces it by initializers; false when skipped (too large or the
// kernel refused: the node then simply stays for the runtime to report).
// `captured`: the names subgraphs read from this graph (subgraph_referenced_names).
bool fold_node(Graph& graph, Node* node, int64_t opset, int64_t max_bytes, const std::set<std::string>& captured,
               std::vector<Value*>& orphan_candidates) {
  const int64_t predicted = predicted_bytes(*node, graph);
  if (predicted < 0 || predicted > max_bytes) return false;
  std::vector<const Tensor*> inputs;
  for (const Value* in : node->inputs()) inputs.push_back(in ? graph.initializer(in) : nullptr);
  auto results = evaluate_node(*node, inputs, opset);
  if (!results) return false;
  int64_t bytes = 0;
  for (const Tensor& t : *results) bytes += static_cast<int64_t>(t.nbytes());
  if (bytes > max_bytes) return false;

  const std::vector<Value*> outputs = node->outputs();
  for (Value* in : node->inputs())
    if (in) orphan_candidates.push_back(in);
  graph.remove_node(node);
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    Value* out = outputs[i];
    // An output nothing reads (no node, no subgraph) would only become a dead initializer.
    if (out && (!out->uses().empty() || captured.count(out->name()))) graph.set_initializer(out, (*results)[i]);
  }
  return true;
}

}  // namespace

namespace folding {

std::set<std::string> subgraph_referenced_names(const Graph& graph) {
  std::set<std::string> names;
  for (const auto& node : graph.nodes())
    for (std::string& name : captured_value_names(*node)) names.insert(std::move(name));
  return names;
}

int64_t remove_orphaned_initializers(Graph& graph, const std::vector<Value*>& candidates) {
  std::set<std::string> referenced;
  bool referenced_known = false;
  std::unordered_set<const Value*> seen;
  int64_t removed = 0;
  for (Value* v : candidates) {
    if (!v || !seen.insert(v).second || !graph.is_initializer(v) || !v->uses().empty()) continue;
    if (contains(graph.inputs, v) || contains(graph.outputs, v)) continue;
    if (!referenced_known) {
      referenced = subgraph_referenced_names(graph);
      referenced_known = true;
    }
    if (referenced.count(v->name())) continue;
    graph.remove_initializer(v);
    ++removed;
  }
  return removed;
}

Expected<FoldStats> fold_constants(Model& model, int64_t max_bytes,
                                   const std::function<bool(const Node&)>& eligible) {
  Graph& graph = *model.graph;
  FoldStats stats;
  std::vector<Value*> orphan_candidates;
  const std::vector<Value*> original_initializers = graph.initializer_order();
  // In topological order a node's constant producers fold before it is visited, so one
  // sweep usually reaches the fixed point; the loop covers anything a sweep exposes late.
  for (bool changed = true; changed;) {
    changed = false;
    QFLOW_ASSIGN_OR_RETURN(const std::vector<Node*> order, graph.topological_order());
    // Folding leaves subgraphs as they are; inlining an If changes them, and ends the sweep.
    const std::set<std::string> captured = subgraph_referenced_names(graph);
    for (Node* node : order) {
      if (eligible && !eligible(*node)) continue;
      if (node->op_type() == "If") {
        QFLOW_ASSIGN_OR_RETURN(const bool inlined, inline_constant_if(graph, node));
        if (!inlined) continue;
        ++stats.ifs_inlined;
        changed = true;
        break;
      }
      const int64_t opset = model.opset(node->domain());
      if (!is_foldable(*node, graph, opset)) continue;
      if (!fold_node(graph, node, opset, max_bytes, captured, orphan_candidates)) continue;
      ++stats.nodes_folded;
      changed = true;
    }
  }
  remove_orphaned_initializers(graph, orphan_candidates);
  // Intermediate results folded into a later node come and go; only the model's own count.
  for (const Value* v : original_initializers)
    if (!graph.is_initializer(v)) ++stats.initializers_removed;
  // Drops the values of removed initializers and outputs nobody read, with their value_info.
  if (stats.nodes_folded > 0 || stats.ifs_inlined > 0) graph.prune_unused_values();
  return stats;
}

}  // namespace folding

ComponentInfo ConstantFolding::info() {
  ComponentInfo info;
  info.kind = ComponentKind::Pass;
  info.name = "constant-folding";
  info.summary = "Evaluate nodes whose inputs are all constant and replace them by initializers";
  info.options.push_back(OptionSpec{"max-bytes", OptionType::Int, OptionValue{kDefaultMaxBytes},
                                    "largest folded result in bytes; larger results stay computed at run time",
                                    {.min = 0.0}});
  return info;
}

Expected<std::unique_ptr<Pass>> ConstantFolding::create(const Options& options) {
  const int64_t max_bytes = options.has("max-bytes") ? options.get_int("max-bytes") : kDefaultMaxBytes;
  if (max_bytes < 0) return invalid_input("constant-folding: max-bytes must be >= 0, got " + std::to_string(max_bytes));
  return std::unique_ptr<Pass>(std::make_unique<ConstantFolding>(max_bytes));
}

bool ConstantFolding::matches(const Model& model) const { return model.graph && model.graph->node_count() > 0; }

Expected<PassResult> ConstantFolding::run_impl(Model& model) {
  QFLOW_ASSIGN_OR_RETURN(const folding::FoldStats stats, folding::fold_constants(model, max_bytes_, {}));
  PassResult result;
  result.counters["nodes-folded"] = stats.nodes_folded;
  result.counters["initializers-removed"] = stats.initializers_removed;
  result.counters["if-inlined"] = stats.ifs_inlined;
  result.changed = stats.nodes_folded > 0 || stats.ifs_inlined > 0;
  // Inlined branch nodes carry no types; with them, shape-folding can fold their Shape chains.
  result.types_stale = stats.ifs_inlined > 0;
  return result;
}

}  // namespace qflow

// If, Loop and Scan: each subgraph gets an executor once, run per branch taken or iteration
// with the values it captures from enclosing graphs.
#include <algorithm>
#include <cstring>
#include <map>
#include <string>

#include "framework/interpreter/executor.h"
#include "framework/interpreter/kernels/control_flow.h"
#include "qflow/ir/captured_values.h"

namespace qflow {

namespace {

// A subgraph with its executor: inputs bound by position, captured values by name.
class Subgraph {
 public:
  static Expected<std::unique_ptr<Subgraph>> create(const std::shared_ptr<Graph>& graph,
                                                    const std::vector<OpsetImport>& opsets,
                                                    const KernelRegistry& registry, const std::string& what) {
    std::unique_ptr<Subgraph> sub(new Subgraph());
    sub->model_.opset_imports = opsets;
    sub->model_.graph = graph;
    ExecutorOptions options;
    options.subgraph = true;
    options.outer_values = captured_value_names(*graph);
    auto executor = Executor::create(sub->model_, options, registry);
    if (!executor) return executor.status().with_context(what);
    sub->executor_ = std::move(executor).value();
    sub->outer_ = options.outer_values;
    return sub;
  }

  const Graph& graph() const { return *model_.graph; }
  std::size_t input_count() const { return model_.graph->inputs.size(); }
  std::size_t output_count() const { return model_.graph->outputs.size(); }

  Expected<std::vector<Tensor>> run(const std::vector<Tensor>& inputs, const KernelContext& context) const {
    const Graph& g = *model_.graph;
    if (inputs.size() != g.inputs.size())
      return context.error("subgraph '" + g.name + "' takes " + std::to_string(g.inputs.size()) + " inputs, given " +
                           std::to_string(inputs.size()));
    std::map<std::string, Tensor> feeds;
    for (std::size_t i = 0; i < inputs.size(); ++i) feeds[g.inputs[i]->name()] = inputs[i];
    for (const std::string& name : outer_) {
      auto it = std::find_if(context.captured.begin(), context.captured.end(),
                             [&name](const auto& c) { return c.first == name; });
      if (it == context.captured.end()) return context.error("the value '" + name + "' a subgraph reads was not given");
      feeds[name] = *it->second;
    }
    QFLOW_ASSIGN_OR_RETURN(auto results, executor_->run(feeds));
    std::vector<Tensor> outputs;
    for (const Value* out : g.outputs) outputs.push_back(results.at(out->name()));
    return outputs;
  }

 private:
  Subgraph() = default;
  Model model_;
  std::unique_ptr<Executor> executor_;
  std::vector<std::string> outer_;
};

Expected<std::unique_ptr<Subgraph>> subgraph_attribute(const Node& node, const char* name,
                                                       const std::vector<OpsetImport>& opsets,
                                                       const KernelRegistry& registry) {
  const Attribute* a = node.find_attribute(name);
  if (!a || a->type != AttributeType::Graph || !a->g)
    return invalid_input(node.op_type() + " '" + node.name() + "' has no graph attribute '" + name + "'");
  return Subgraph::create(a->g, opsets, registry, node.op_type() + " '" + node.name() + "' " + name);
}

Expected<bool> truth_of(const KernelContext& context, const Tensor& t, const char* what) {
  if (t.numel() != 1)
    return context.error(std::string(what) + " must hold one value, it has shape " + shape_to_string(t.shape()));
  return t.to_doubles()[0] != 0.0;
}

Tensor bool_scalar(bool value) {
  Tensor t(DType::Bool, {});
  *t.data<bool>() = value;
  return t;
}

// Element `index` of `t` along `axis`: the tensor without that axis.
Tensor slice_axis(const Tensor& t, int64_t axis, int64_t index) {
  Shape shape = t.shape();
  const int64_t extent = shape[static_cast<std::size_t>(axis)];
  shape.erase(shape.begin() + axis);
  Tensor out(t.dtype(), shape);
  int64_t outer = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= t.dim(i);
  const std::size_t inner = out.nbytes() / static_cast<std::size_t>(std::max<int64_t>(outer, 1));
  for (int64_t o = 0; o < outer && inner > 0; ++o)
    std::memcpy(out.raw_data() + static_cast<std::size_t>(o) * inner,
                t.raw_data() + static_cast<std::size_t>(o * extent + index) * inner, inner);
  return out;
}

// `parts` (equal dtypes and shapes) stacked along a new axis `axis`.
Expected<Tensor> stack_axis(const KernelContext& context, const std::vector<Tensor>& parts, int64_t axis,
                            const std::string& what) {
  const Tensor& first = parts.front();
  for (std::size_t k = 1; k < parts.size(); ++k)
    if (parts[k].dtype() != first.dtype() || parts[k].shape() != first.shape())
      return context.error(what + ": iteration " + std::to_string(k) + " gave " + shape_to_string(parts[k].shape()) +
                           ", iteration 0 gave " + shape_to_string(first.shape()) + "; they cannot be stacked");
  Shape shape = first.shape();
  shape.insert(shape.begin() + axis, static_cast<int64_t>(parts.size()));
  QFLOW_ASSIGN_OR_RETURN(Tensor out, context.allocate(first.dtype(), shape));
  int64_t outer = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= first.dim(i);
  const std::size_t inner = first.nbytes() / static_cast<std::size_t>(std::max<int64_t>(outer, 1));
  const auto count = static_cast<int64_t>(parts.size());
  for (int64_t o = 0; o < outer && inner > 0; ++o)
    for (int64_t k = 0; k < count; ++k)
      std::memcpy(out.raw_data() + static_cast<std::size_t>(o * count + k) * inner,
                  parts[static_cast<std::size_t>(k)].raw_data() + static_cast<std::size_t>(o) * inner, inner);
  return out;
}

// A scan output of no iterations: shape [0] followed by the body's declared static
// dimensions (none when unknown), of its declared dtype (float when unknown).
Tensor empty_scan_output(const Value& body_output) {
  DType dtype = DType::Float32;
  Shape shape{0};
  if (body_output.type) {
    if (body_output.type->dtype != DType::Undefined) dtype = body_output.type->dtype;
    if (body_output.type->shape)
      for (const Dim& d : *body_output.type->shape) shape.push_back(d.value ? *d.value : 0);
  }
  return Tensor(dtype, shape);
}

class IfKernel : public Kernel {
 public:
  IfKernel(std::unique_ptr<Subgraph> then_branch, std::unique_ptr<Subgraph> else_branch)
      : then_(std::move(then_branch)), else_(std::move(else_branch)) {}

  Status compute(KernelContext& context) const override {
    QFLOW_ASSIGN_OR_RETURN(const Tensor* cond, context.required_input(0));
    QFLOW_ASSIGN_OR_RETURN(const bool taken, truth_of(context, *cond, "the condition"));
    const Subgraph& branch = taken ? *then_ : *else_;
    QFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, branch.run({}, context));
    if (outputs.size() != context.outputs.size())
      return context.error(std::string(taken ? "then" : "else") + "_branch has " + std::to_string(outputs.size()) +
                           " outputs, the node " + std::to_string(context.outputs.size()));
    for (std::size_t i = 0; i < outputs.size(); ++i) context.outputs[i] = std::move(outputs[i]);
    return Status::ok();
  }

 private:
  std::unique_ptr<Subgraph> then_, else_;
};

// Loop: inputs M (trip count), cond, N carried values; body (i, cond, carried...) ->
// (cond, carried..., K scan elements); outputs the final carried values, then the K scan
// outputs stacked along a new first axis.
class LoopKernel : public Kernel {
 public:
  explicit LoopKernel(std::unique_ptr<Subgraph> body) : body_(std::move(body)) {}

  Status compute(KernelContext& context) const override {
    const std::size_t carried_count = context.input_count() >= 2 ? context.input_count() - 2 : 0;
    if (body_->input_count() != carried_count + 2)
      return context.error("the body takes " + std::to_string(body_->input_count()) + " inputs, expected " +
                           std::to_string(carried_count + 2) + " (iteration, condition and the carried values)");
    if (body_->output_count() < carried_count + 1)
      return context.error("the body has " + std::to_string(body_->output_count()) + " outputs, fewer than " +
                           std::to_string(carried_count + 1));
    const std::size_t scan_count = body_->output_count() - 1 - carried_count;
    if (context.outputs.size() != carried_count + scan_count)
      return context.error("the node has " + std::to_string(context.outputs.size()) + " outputs, the body gives " +
                           std::to_string(carried_count + scan_count));
    int64_t trips = -1;  // unbounded
    if (const Tensor* m = context.input(0)) {
      if (m->numel() != 1) return context.error("M must hold one value");
      trips = m->to_int64s()[0];
    }
    bool cond = true;
    const bool has_cond = context.input(1) != nullptr;
    if (has_cond) {
      QFLOW_ASSIGN_OR_RETURN(cond, truth_of(context, *context.input(1), "cond"));
    }
    if (trips < 0 && !has_cond) return context.error("neither M nor cond is given: the loop would never end");
    std::vector<Tensor> carried;
    for (std::size_t i = 0; i < carried_count; ++i) {
      const Tensor* v = context.input(2 + i);
      if (!v) return context.error("carried value " + std::to_string(i) + " is missing");
      carried.push_back(*v);
    }
    std::vector<std::vector<Tensor>> scans(scan_count);
    for (int64_t i = 0; (trips < 0 || i < trips) && cond; ++i) {
      std::vector<Tensor> inputs{Tensor::scalar<int64_t>(i), bool_scalar(cond)};
      inputs.insert(inputs.end(), carried.begin(), carried.end());
      QFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, body_->run(inputs, context));
      QFLOW_ASSIGN_OR_RETURN(cond, truth_of(context, outputs[0], "the body's condition"));
      for (std::size_t c = 0; c < carried_count; ++c) carried[c] = std::move(outputs[1 + c]);
      for (std::size_t k = 0; k < scan_count; ++k) scans[k].push_back(std::move(outputs[1 + carried_count + k]));
    }
    for (std::size_t c = 0; c < carried_count; ++c) context.outputs[c] = std::move(carried[c]);
    for (std::size_t k = 0; k < scan_count; ++k) {
      const std::string what = "scan output " + std::to_string(k);
      if (scans[k].empty()) {
        context.outputs[carried_count + k] = empty_scan_output(*body_->graph().outputs[1 + carried_count + k]);
        continue;
      }
      QFLOW_ASSIGN_OR_RETURN(context.outputs[carried_count + k], stack_axis(context, scans[k], 0, what));
    }
    return Status::ok();
  }

 private:
  std::unique_ptr<Subgraph> body_;
};

// Scan (opset 9 and later; opset 8 adds a batch axis and sequence_lens): inputs N states
// and M scan inputs; body (states..., one slice per scan input) -> (states..., K scan
// elements); outputs the final states, then the K scan outputs stacked.
class ScanKernel : public Kernel {
 public:
  ScanKernel(std::unique_ptr<Subgraph> body, int64_t opset, int64_t scan_inputs, std::vector<int64_t> input_axes,
             std::vector<int64_t> input_directions, std::vector<int64_t> output_axes,
             std::vector<int64_t> output_directions)
      : body_(std::move(body)), batched_(opset < 9), scan_inputs_(scan_inputs), input_axes_(std::move(input_axes)),
        input_directions_(std::move(input_directions)), output_axes_(std::move(output_axes)),
        output_directions_(std::move(output_directions)) {}

  Status compute(KernelContext& context) const override {
    const std::size_t first = batched_ ? 1 : 0;  // opset 8: input 0 is sequence_lens
    if (context.input_count() < first + static_cast<std::size_t>(scan_inputs_))
      return context.error("fewer inputs than num_scan_inputs");
    const std::size_t states = context.input_count() - first - static_cast<std::size_t>(scan_inputs_);
    std::vector<Tensor> inputs;
    for (std::size_t i = first; i < context.input_count(); ++i) {
      const Tensor* t = context.input(i);
      if (!t) return context.error("input " + std::to_string(i) + " is missing");
      inputs.push_back(*t);
    }
    if (!batched_) {
      QFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, scan(context, inputs, states));
      for (std::size_t i = 0; i < outputs.size(); ++i) context.outputs[i] = std::move(outputs[i]);
      return Status::ok();
    }
    // Opset 8: every input has a batch axis first; each batch entry is one scan.
    if (inputs.empty() || inputs[0].rank() == 0) return context.error("inputs need a batch axis");
    const int64_t batch = inputs[0].dim(0);
    if (const Tensor* lens = context.input(0)) {
      for (int64_t len : lens->to_int64s())
        for (std::size_t j = states; j < inputs.size(); ++j)
          if (inputs[j].rank() < 2 || len != inputs[j].dim(1))
            return context.error("sequence_lens shorter than the sequence is not supported");
    }
    std::vector<std::vector<Tensor>> per_output;
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<Tensor> entry;
      for (const Tensor& t : inputs) {
        if (t.rank() == 0 || t.dim(0) != batch) return context.error("inputs disagree on the batch size");
        entry.push_back(slice_axis(t, 0, b));
      }
      QFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, scan(context, entry, states));
      per_output.resize(outputs.size());
      for (std::size_t i = 0; i < outputs.size(); ++i) per_output[i].push_back(std::move(outputs[i]));
    }
    for (std::size_t i = 0; i < per_output.size(); ++i) {
      QFLOW_ASSIGN_OR_RETURN(context.outputs[i], stack_axis(context, per_output[i], 0, "output " + std::to_string(i)));
    }
    return Status::ok();
  }

 private:
  static int64_t attribute_or(const std::vector<int64_t>& values, std::size_t i, int64_t fallback) {
    return i < values.size() ? values[i] : fallback;
  }

  Expected<std::vector<Tensor>> scan(const KernelContext& context, const std::vector<Tensor>& inputs,
                                     std::size_t states) const {
    const std::size_t scan_count = inputs.size() - states;
    if (body_->input_count() != inputs.size())
      return context.error("the body takes " + std::to_string(body_->input_count()) + " inputs, the node gives " +
                           std::to_string(inputs.size()));
    if (body_->output_count() < states) return context.error("the body gives fewer outputs than there are states");
    const std::size_t outputs_count = body_->output_count() - states;
    int64_t length = -1;
    std::vector<int64_t> axes(scan_count);
    for (std::size_t j = 0; j < scan_count; ++j) {
      const Tensor& t = inputs[states + j];
      int64_t axis = batched_ ? 0 : attribute_or(input_axes_, j, 0);
      if (axis < 0) axis += t.rank();
      if (axis < 0 || axis >= t.rank()) return context.error("scan input " + std::to_string(j) + " has no axis " + std::to_string(axis));
      axes[j] = axis;
      if (length >= 0 && t.dim(axis) != length) return context.error("scan inputs differ in sequence length");
      length = t.dim(axis);
    }
    if (length < 0) return context.error("no scan input");
    std::vector<Tensor> carried(inputs.begin(), inputs.begin() + static_cast<std::ptrdiff_t>(states));
    std::vector<std::vector<Tensor>> scans(outputs_count);
    for (int64_t step = 0; step < length; ++step) {
      std::vector<Tensor> feeds = carried;
      for (std::size_t j = 0; j < scan_count; ++j) {
        const bool reverse = attribute_or(input_directions_, j, 0) != 0;
        feeds.push_back(slice_axis(inputs[states + j], axes[j], reverse ? length - 1 - step : step));
      }
      QFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, body_->run(feeds, context));
      for (std::size_t c = 0; c < states; ++c) carried[c] = std::move(outputs[c]);
      for (std::size_t k = 0; k < outputs_count; ++k) scans[k].push_back(std::move(outputs[states + k]));
    }
    std::vector<Tensor> results = std::move(carried);
    for (std::size_t k = 0; k < outputs_count; ++k) {
      if (scans[k].empty()) {
        results.push_back(empty_scan_output(*body_->graph().outputs[states + k]));
        continue;
      }
      if (attribute_or(output_directions_, k, 0) != 0) std::reverse(scans[k].begin(), scans[k].end());
      int64_t axis = batched_ ? 0 : attribute_or(output_axes_, k, 0);
      const int64_t rank = scans[k].front().rank() + 1;
      if (axis < 0) axis += rank;
      if (axis < 0 || axis >= rank) return context.error("scan output " + std::to_string(k) + " has no axis " + std::to_string(axis));
      QFLOW_ASSIGN_OR_RETURN(Tensor stacked, stack_axis(context, scans[k], axis, "scan output " + std::to_string(k)));
      results.push_back(std::move(stacked));
    }
    return results;
  }

  std::unique_ptr<Subgraph> body_;
  bool batched_;
  int64_t scan_inputs_;
  std::vector<int64_t> input_axes_, input_directions_, output_axes_, output_directions_;
};

}  // namespace

bool is_control_flow(const Node& node) {
  if (!node.domain().empty() && node.domain() != "ai.onnx") return false;
  return node.op_type() == "If" || node.op_type() == "Loop" || node.op_type() == "Scan";
}

Expected<std::unique_ptr<Kernel>> make_control_flow_kernel(const Node& node, const std::vector<OpsetImport>& opsets,
                                                           const KernelRegistry& registry) {
  int64_t opset = 0;
  for (const OpsetImport& o : opsets)
    if (o.domain.empty() || o.domain == "ai.onnx") opset = o.version;
  if (node.op_type() == "If") {
    QFLOW_ASSIGN_OR_RETURN(auto then_branch, subgraph_attribute(node, "then_branch", opsets, registry));
    QFLOW_ASSIGN_OR_RETURN(auto else_branch, subgraph_attribute(node, "else_branch", opsets, registry));
    return std::unique_ptr<Kernel>(new IfKernel(std::move(then_branch), std::move(else_branch)));
  }
  QFLOW_ASSIGN_OR_RETURN(auto body, subgraph_attribute(node, "body", opsets, registry));
  if (node.op_type() == "Loop") return std::unique_ptr<Kernel>(new LoopKernel(std::move(body)));
  const int64_t scan_inputs = node.attr_int("num_scan_inputs", -1);
  if (scan_inputs < 1) return invalid_input("Scan '" + node.name() + "' needs num_scan_inputs >= 1");
  if (opset < 9)
    return std::unique_ptr<Kernel>(
        new ScanKernel(std::move(body), opset, scan_inputs, {}, node.attr_ints("directions"), {}, {}));
  return std::unique_ptr<Kernel>(new ScanKernel(std::move(body), opset, scan_inputs, node.attr_ints("scan_input_axes"),
                                                node.attr_ints("scan_input_directions"),
                                                node.attr_ints("scan_output_axes"),
                                                node.attr_ints("scan_output_directions")));
}

void register_control_flow_kernels(KernelRegistry& registry) {
  for (const char* op : {"If", "Loop", "Scan"}) {
    registry.add("", op, 1, kLatestOpset,
                 [](const Node& node, int64_t opset, const std::vector<const Tensor*>&) {
                   return make_control_flow_kernel(node, {{"", opset}}, KernelRegistry::builtin());
                 });
  }
}

}  // namespace qflow

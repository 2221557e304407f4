#include "framework/pipeline/input_shapes.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <vector>

#include "framework/onnx/onnx_check.h"
#include "framework/interpreter/executor.h"

namespace qflow {

namespace {

Expected<Shape> parse_dims(const std::string& text, const std::string& spec) {
  Shape dims;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find_first_of(",x", start);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(start, end - start);
    int64_t dim = 0;
    auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), dim);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size() || dim <= 0)
      return invalid_input("input-shape '" + spec + "': '" + item + "' is not a positive dimension");
    dims.push_back(dim);
    start = end + 1;
  }
  return dims;
}

Expected<std::map<std::string, Shape>> parse_spec(const Graph& graph, const std::string& spec) {
  std::map<std::string, Shape> shapes;
  const std::vector<Value*> inputs = graph.runtime_inputs();
  size_t start = 0;
  while (start < spec.size()) {
    size_t end = spec.find(';', start);
    if (end == std::string::npos) end = spec.size();
    const std::string entry = spec.substr(start, end - start);
    start = end + 1;
    const size_t eq = entry.find('=');
    std::string name;
    if (eq == std::string::npos) {
      if (inputs.size() != 1)
        return invalid_input("input-shape '" + spec + "': the model has " + std::to_string(inputs.size()) +
                             " inputs, name each as name=dims;...");
      name = inputs.front()->name();
    } else {
      name = entry.substr(0, eq);
    }
    const bool known =
        std::any_of(inputs.begin(), inputs.end(), [&](const Value* value) { return value->name() == name; });
    if (!known) return invalid_input("input-shape '" + spec + "': the model has no input '" + name + "'");
    QFLOW_ASSIGN_OR_RETURN(Shape dims, parse_dims(eq == std::string::npos ? entry : entry.substr(eq + 1), spec));
    if (!shapes.emplace(name, std::move(dims)).second)
      return invalid_input("input-shape '" + spec + "': input '" + name + "' is given twice");
  }
  if (shapes.empty()) return invalid_input("input-shape is empty");
  return shapes;
}

// With every input static, one run of the interpreter on zeros gives every value's shape,
// including those behind shape computations ONNX inference cannot follow (Shape -> Cast ->
// Concat -> Reshape chains). They are declared where inference left a value without a
// static shape. A model the interpreter cannot run keeps what inference found.
void declare_run_shapes(Model& model) {
  Graph& graph = *model.graph;
  std::map<std::string, Tensor> feeds;
  for (const Value* input : graph.runtime_inputs()) {
    if (!input->type) return;
    std::optional<Shape> shape = input->type->static_shape();
    if (!shape) return;
    feeds.emplace(input->name(), Tensor(input->type->dtype, *shape));
  }
  Expected<std::unique_ptr<Executor>> executor = Executor::create(model);
  if (!executor) return;
  std::map<std::string, std::pair<DType, Shape>> seen;
  auto outputs = (*executor)->run(feeds, [&](const Value& value, const Tensor& tensor) {
    seen[value.name()] = {tensor.dtype(), tensor.shape()};
    return Status::ok();
  });
  if (!outputs) return;
  auto listed = [](const std::vector<Value*>& list, const Value* value) {
    return std::find(list.begin(), list.end(), value) != list.end();
  };
  for (const auto& [name, type] : seen) {
    Value* value = graph.find_value(name);
    if (!value || graph.is_initializer(value) || (value->type && value->type->static_shape())) continue;
    if (value->type && value->type->dtype != type.first) continue;
    std::vector<Dim> dims;
    for (int64_t dim : type.second) dims.push_back(Dim{dim, "", ""});
    value->type = ValueType{type.first, std::move(dims), "", ""};
    if (!listed(graph.inputs, value) && !listed(graph.outputs, value) && !listed(graph.value_info, value))
      graph.value_info.push_back(value);
  }
}

}  // namespace

Status set_input_shapes(Model& model, const std::string& spec) {
  Graph& graph = *model.graph;
  QFLOW_ASSIGN_OR_RETURN(auto shapes, parse_spec(graph, spec));
  for (const auto& [name, dims] : shapes) {
    Value* value = graph.find_value(name);
    if (!value->type) return invalid_input("input-shape: input '" + name + "' has no declared type");
    ValueType& type = *value->type;
    if (type.shape) {
      if (type.shape->size() != dims.size())
        return invalid_input("input-shape: input '" + name + "' has rank " + std::to_string(type.shape->size()) +
                             ", the shape given has rank " + std::to_string(dims.size()));
      for (size_t axis = 0; axis < dims.size(); ++axis) {
        const Dim& dim = (*type.shape)[axis];
        if (dim.value && *dim.value != dims[axis])
          return invalid_input("input-shape: input '" + name + "' dimension " + std::to_string(axis) + " is " +
                               std::to_string(*dim.value) + ", the shape given says " + std::to_string(dims[axis]));
      }
    }
    std::vector<Dim> fixed;
    for (int64_t dim : dims) fixed.push_back(Dim{dim, "", ""});
    type.shape = std::move(fixed);
  }
  return reinfer_shapes(model);
}

Status reinfer_shapes(Model& model) {
  Graph& graph = *model.graph;
  // Inferred types follow the old input shapes: drop them (outputs keep their declared type
  // when inference cannot say more) and infer again.
  std::map<Value*, ValueType> declared_outputs;
  for (Value* output : graph.outputs)
    if (output->type && output->producer()) {
      declared_outputs.emplace(output, *output->type);
      output->type.reset();
    }
  for (Value* value : graph.value_info) value->type.reset();
  graph.value_info.clear();
  Status inferred = infer_shapes(model);
  // Where inference could not say more than a type (a shape computed at run time), the
  // outputs keep their declaration and other values stay undeclared.
  for (auto& [output, type] : declared_outputs)
    if (!output->type || !output->type->shape) output->type = type;
  std::vector<Value*> shaped;
  for (Value* value : graph.value_info) {
    if (value->type && value->type->shape) {
      shaped.push_back(value);
    } else {
      value->type.reset();
    }
  }
  graph.value_info = std::move(shaped);
  if (inferred) declare_run_shapes(model);
  return inferred;
}

}  // namespace qflow

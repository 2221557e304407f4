// constant-inputs: parses "name=v,v;name=v" and replaces those inputs by initializers.
#include "framework/pipeline/constant_inputs.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <vector>

namespace qflow {

namespace {

Expected<std::vector<double>> parse_values(const std::string& text, const std::string& entry) {
  std::vector<double> values;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    double v = 0.0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size() || !std::isfinite(v))
      return invalid_input("constant-inputs '" + entry + "': '" + item + "' is not a finite number");
    values.push_back(v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return values;
}

}  // namespace

Status set_constant_inputs(Model& model, const std::string& spec) {
  Graph& graph = *model.graph;
  std::size_t start = 0;
  while (start < spec.size()) {
    std::size_t end = spec.find(';', start);
    if (end == std::string::npos) end = spec.size();
    const std::string entry = spec.substr(start, end - start);
    start = end + 1;
    const std::size_t eq = entry.find('=');
    if (eq == 0 || eq == std::string::npos)
      return invalid_input("constant-inputs '" + entry + "': expected NAME=VALUE[,VALUE...]");
    const std::string name = entry.substr(0, eq);
    const std::vector<Value*> inputs = graph.runtime_inputs();
    auto it = std::find_if(inputs.begin(), inputs.end(), [&](const Value* v) { return v->name() == name; });
    if (it == inputs.end()) return invalid_input("constant-inputs: the model has no input '" + name + "'");
    Value* input = *it;
    if (!input->type || input->type->dtype == DType::Undefined)
      return invalid_input("constant-inputs: input '" + name + "' declares no element type");
    QFLOW_ASSIGN_OR_RETURN(const std::vector<double> values, parse_values(entry.substr(eq + 1), entry));
    Shape shape;
    if (input->type->shape && !input->type->shape->empty()) {
      const std::optional<Shape> declared = input->type->static_shape();
      if (!declared)
        return invalid_input("constant-inputs: input '" + name + "' has symbolic dimensions; fix them with input-shape");
      shape = *declared;
    } else if (values.size() != 1) {
      return invalid_input("constant-inputs: input '" + name + "' is a scalar, got " + std::to_string(values.size()) +
                           " values");
    }
    if (shape_numel(shape) != static_cast<int64_t>(values.size()))
      return invalid_input("constant-inputs: input '" + name + "' of shape " + shape_to_string(shape) + " holds " +
                           std::to_string(shape_numel(shape)) + " elements, got " + std::to_string(values.size()));
    const Tensor constant = Tensor::from_vector<double>(shape, values).cast(input->type->dtype);
    graph.inputs.erase(std::find(graph.inputs.begin(), graph.inputs.end(), input));
    graph.set_initializer(input, constant);
  }
  return Status::ok();
}

}  // namespace qflow

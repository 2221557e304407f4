// Attribute factory helpers.
#include "qflow/ir/attribute.h"

namespace qflow {

Attribute Attribute::make_float(std::string name, float value) {
  Attribute a;
  a.name = std::move(name);
  a.type = AttributeType::Float;
  a.f = value;
  return a;
}

Attribute Attribute::make_int(std::string name, int64_t value) {
  Attribute a;
  a.name = std::move(name);
  a.type = AttributeType::Int;
  a.i = value;
  return a;
}

Attribute Attribute::make_string(std::string name, std::string value) {
  Attribute a;
  a.name = std::move(name);
  a.type = AttributeType::String;
  a.s = std::move(value);
  return a;
}

Attribute Attribute::make_graph(std::string name, std::shared_ptr<Graph> value) {
  Attribute a;
  a.name = std::move(name);
  a.type = AttributeType::Graph;
  a.g = std::move(value);
  return a;
}

Attribute Attribute::make_tensor(std::string name, Tensor value) {
  Attribute a;
  a.name = std::move(name);
  a.type = AttributeType::Tensor;
  a.t = std::move(value);
  return a;
}

Attribute Attribute::make_floats(std::string name, std::vector<float> values) {
  Attribute a;
  a.name = std::move(name);
  a.type = AttributeType::Floats;
  a.floats = std::move(values);
  return a;
}

Attribute Attribute::make_ints(std::string name, std::vector<int64_t> values) {
  Attribute a;
  a.name = std::move(name);
  a.type = AttributeType::Ints;
  a.ints = std::move(values);
  return a;
}

Attribute Attribute::make_strings(std::string name, std::vector<std::string> values) {
  Attribute a;
  a.name = std::move(name);
  a.type = AttributeType::Strings;
  a.strings = std::move(values);
  return a;
}

}  // namespace qflow

// Attribute: a node's named constant parameter, mirroring ONNX AttributeProto.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "qflow/ir/tensor.h"

namespace qflow {

class Graph;

enum class AttributeType {
  Undefined = 0,
  Float = 1,
  Int = 2,
  String = 3,
  Tensor = 4,
  Graph = 5,
  Floats = 6,
  Ints = 7,
  Strings = 8,
  Tensors = 9,
  Graphs = 10,
};

struct Attribute {
  std::string name;
  AttributeType type = AttributeType::Undefined;
  float f = 0.0f;
  int64_t i = 0;
  std::string s;  // raw bytes for String
  Tensor t;
  std::shared_ptr<Graph> g;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::vector<Tensor> tensors;
  std::vector<std::shared_ptr<Graph>> graphs;
  std::string doc_string;
  std::string ref_attr_name;  // set inside function bodies; kept for lossless round-trip

  static Attribute make_float(std::string name, float value);
  static Attribute make_int(std::string name, int64_t value);
  static Attribute make_string(std::string name, std::string value);
  static Attribute make_tensor(std::string name, Tensor value);
  static Attribute make_graph(std::string name, std::shared_ptr<Graph> value);  // an If branch, a Loop body
  static Attribute make_floats(std::string name, std::vector<float> values);
  static Attribute make_ints(std::string name, std::vector<int64_t> values);
  static Attribute make_strings(std::string name, std::vector<std::string> values);
};

}  // namespace qflow

// Graph text: formats nodes, attributes and the graph interface as short readable lines.
#include "framework/pipeline/graph_text.h"

#include <cstdio>
#include <sstream>
#include <string_view>
#include <vector>

namespace qflow {

namespace {

constexpr std::size_t kMaxListItems = 8;

std::string float_text(float value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.9g", static_cast<double>(value));
  return buffer;
}

std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

template <typename T, typename Format>
std::string list_text(const std::vector<T>& items, Format format) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size() && i < kMaxListItems; ++i) {
    if (i > 0) out += ", ";
    out += format(items[i]);
  }
  if (items.size() > kMaxListItems) out += ", +" + std::to_string(items.size() - kMaxListItems);
  return out + "]";
}

// Built by appending: GCC 12 warns falsely (-Wrestrict) on "literal" + std::string&&.
std::string bracketed(std::string_view head, const std::string& body, std::string_view tail) {
  std::string out(head);
  out += body;
  out += tail;
  return out;
}

std::string tensor_text(const Tensor& tensor) {
  return bracketed("tensor<", std::string(dtype_name(tensor.dtype())) + " " + shape_to_string(tensor.shape()), ">");
}

std::string attribute_text(const Attribute& a) {
  switch (a.type) {
    case AttributeType::Float: return float_text(a.f);
    case AttributeType::Int: return std::to_string(a.i);
    case AttributeType::String: return quoted(a.s);
    case AttributeType::Tensor: return tensor_text(a.t);
    case AttributeType::Graph: return bracketed("<graph ", a.g ? a.g->name : std::string(), ">");
    case AttributeType::Floats: return list_text(a.floats, float_text);
    case AttributeType::Ints: return list_text(a.ints, [](int64_t v) { return std::to_string(v); });
    case AttributeType::Strings: return list_text(a.strings, quoted);
    case AttributeType::Tensors: return list_text(a.tensors, tensor_text);
    case AttributeType::Graphs: return bracketed("<", std::to_string(a.graphs.size()), " graphs>");
    case AttributeType::Undefined: break;
  }
  return "<undefined>";
}

std::string names(const std::vector<Value*>& values) {
  std::string out;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ", ";
    out += values[i] && !values[i]->name().empty() ? values[i]->name() : "\"\"";
  }
  return out;
}

std::string node_text(const Node& node) {
  std::string op = node.domain().empty() ? node.op_type() : node.domain() + "::" + node.op_type();
  std::string line = (node.name().empty() ? std::string("<unnamed>") : node.name()) + ": " + op + "(" +
                     names(node.inputs()) + ") -> " + names(node.outputs());
  if (!node.attributes().empty()) {
    line += " {";
    for (std::size_t i = 0; i < node.attributes().size(); ++i) {
      const Attribute& a = node.attributes()[i];
      if (i > 0) line += ", ";
      line += a.name + "=" + attribute_text(a);
    }
    line += "}";
  }
  return line;
}

}  // namespace

std::string graph_text(const Graph& graph) {
  std::vector<const Node*> order;
  if (Expected<std::vector<Node*>> sorted = graph.topological_order()) {
    order.assign(sorted->begin(), sorted->end());
  } else {
    for (const auto& node : graph.nodes()) order.push_back(node.get());
  }
  std::ostringstream out;
  out << "graph " << (graph.name.empty() ? std::string("<unnamed>") : graph.name) << " (" << order.size()
      << " nodes)\n";
  out << "  inputs: " << names(graph.runtime_inputs()) << "\n";
  for (const Node* node : order) out << "  " << node_text(*node) << "\n";
  out << "  outputs: " << names(graph.outputs) << "\n";
  out << "  initializers: " << graph.initializer_order().size() << "\n";
  return out.str();
}

}  // namespace qflow

// Graph, Node and Value: qflow's in-memory form of an ONNX model, with def-use links.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "qflow/core/status.h"
#include "qflow/ir/attribute.h"
#include "qflow/ir/tensor.h"

namespace qflow {

class Node;

// One dimension of a declared value shape: a number, a symbolic name, or unknown.
struct Dim {
  std::optional<int64_t> value;
  std::string param;  // symbolic name ("batch"); empty when unnamed
  std::string denotation;
  bool operator==(const Dim&) const = default;
  bool is_static() const { return value.has_value(); }
};

// Declared type of a value. Non-tensor ONNX types (sequence, map, optional) are kept as
// the serialized TypeProto in `opaque` so export reproduces them.
struct ValueType {
  DType dtype = DType::Undefined;
  std::optional<std::vector<Dim>> shape;  // nullopt: rank unknown
  std::string denotation;
  std::string opaque;
  bool operator==(const ValueType&) const = default;
  // All dimensions known: the static shape; otherwise nullopt.
  std::optional<Shape> static_shape() const;
};

// A named edge: produced by one node (or a graph input / initializer), used by many.
class Value {
 public:
  const std::string& name() const { return name_; }
  Node* producer() const { return producer_; }
  int producer_output_index() const { return producer_index_; }
  // Each use is (node, input index); a node using the value twice appears twice.
  const std::vector<std::pair<Node*, int>>& uses() const { return uses_; }

  std::optional<ValueType> type;  // declared type (input/output/value_info), if any
  std::string doc_string;

 private:
  friend class Graph;
  friend class Node;
  explicit Value(std::string name) : name_(std::move(name)) {}
  std::string name_;
  Node* producer_ = nullptr;
  int producer_index_ = -1;
  std::vector<std::pair<Node*, int>> uses_;
};

class Node {
 public:
  const std::string& name() const { return name_; }
  const std::string& op_type() const { return op_type_; }
  const std::string& domain() const { return domain_; }  // "" is the default ONNX domain
  // Missing optional inputs/outputs are nullptr (ONNX spells them "").
  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  Value* input(std::size_t i) const { return i < inputs_.size() ? inputs_[i] : nullptr; }
  Value* output(std::size_t i) const { return i < outputs_.size() ? outputs_[i] : nullptr; }

  const std::vector<Attribute>& attributes() const { return attributes_; }
  const Attribute* find_attribute(const std::string& name) const;
  void set_attribute(Attribute attribute);  // replaces one with the same name
  bool remove_attribute(const std::string& name);

  // Typed lookups with defaults; wrong-typed attributes read as the default.
  int64_t attr_int(const std::string& name, int64_t fallback) const;
  float attr_float(const std::string& name, float fallback) const;
  std::string attr_string(const std::string& name, const std::string& fallback) const;
  std::vector<int64_t> attr_ints(const std::string& name, const std::vector<int64_t>& fallback = {}) const;
  std::vector<float> attr_floats(const std::string& name, const std::vector<float>& fallback = {}) const;

  void set_name(std::string name) { name_ = std::move(name); }
  void set_op_type(std::string op_type) { op_type_ = std::move(op_type); }
  void set_domain(std::string domain) { domain_ = std::move(domain); }
  // Rewires input i (appending nullptrs as needed); keeps use lists consistent.
  void set_input(std::size_t i, Value* value);
  void set_inputs(const std::vector<Value*>& values);

  std::string doc_string;
  // Free-form name of the kernel the node must run with (overload), ONNX `overload` field.
  std::string overload;

 private:
  friend class Graph;
  Node() = default;
  std::string name_;
  std::string op_type_;
  std::string domain_;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  std::vector<Attribute> attributes_;
};

// Owns nodes and values. Nodes keep insertion order (file order after import);
// topological_order() gives an execution order.
class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  Graph(Graph&&) = default;
  Graph& operator=(Graph&&) = default;

  std::string name;
  std::string doc_string;

  // Values ---------------------------------------------------------------------------
  Value* find_value(const std::string& name) const;
  // Returns the existing value of that name or creates it.
  Value* get_or_create_value(const std::string& name);
  // Creates a value with a name not yet used, derived from `hint`.
  Value* create_unique_value(const std::string& hint);
  std::vector<Value*> values() const;  // sorted by name, for determinism

  // Initializers (constant tensors bound to values) -------------------------------------
  void set_initializer(Value* value, Tensor tensor);
  const Tensor* initializer(const Value* value) const;
  bool is_initializer(const Value* value) const { return initializer(value) != nullptr; }
  void remove_initializer(Value* value);
  // In insertion order (file order after import).
  const std::vector<Value*>& initializer_order() const { return initializer_order_; }

  // Graph interface ------------------------------------------------------------------------
  std::vector<Value*> inputs;   // may include initializers (old ONNX IR versions do)
  std::vector<Value*> outputs;
  // Inputs that are not initializers: what a caller must feed.
  std::vector<Value*> runtime_inputs() const;
  // Values that carry value_info declarations on export (not inputs/outputs).
  std::vector<Value*> value_info;

  // Nodes ------------------------------------------------------------------------------------
  Node* add_node(const std::string& op_type, const std::vector<Value*>& inputs,
                 const std::vector<Value*>& outputs, const std::string& name = "",
                 const std::string& domain = "");
  const std::list<std::unique_ptr<Node>>& nodes() const { return nodes_; }
  std::size_t node_count() const { return nodes_.size(); }
  // Detaches the node from its inputs and outputs and destroys it.
  void remove_node(Node* node);
  // Every use of `from` now uses `to`; graph outputs included.
  void replace_all_uses(Value* from, Value* to);
  // Moves the node to the end of the insertion order (after nodes it now depends on).
  void move_node_to_end(Node* node);
  // Moves the listed nodes, in that order, to the end of the insertion order: one pass, where
  // move_node_to_end per node searches the list each time. Nodes not in the graph are skipped.
  void move_nodes_to_end(const std::vector<Node*>& nodes);

  // Analyses -----------------------------------------------------------------------------------
  // Execution order (stable: ties follow insertion order). Fails naming a node on a cycle.
  Expected<std::vector<Node*>> topological_order() const;
  // Structural checks: every used value is produced, is an input or initializer; each value
  // has at most one producer; outputs exist; no cycle. The message names the offender.
  Status validate() const;
  // Removes values with no producer, no use, that are not inputs/outputs/initializers.
  void prune_unused_values();

  // An independent copy: its own nodes and values (subgraphs copied too), initializers
  // sharing storage with this graph's (Tensor copies are handles; nothing in qflow writes
  // an initializer in place). Far cheaper than an export/import round trip on large models.
  std::shared_ptr<Graph> copy() const;

 private:
  std::list<std::unique_ptr<Node>> nodes_;
  std::unordered_map<std::string, std::unique_ptr<Value>> values_;
  std::unordered_map<const Value*, Tensor> initializers_;
  std::vector<Value*> initializer_order_;
  uint64_t unique_counter_ = 0;
};

// A whole model: the graph plus the model-level fields of ONNX ModelProto.
struct OpsetImport {
  std::string domain;
  int64_t version = 0;
  bool operator==(const OpsetImport&) const = default;
};

struct Model {
  int64_t ir_version = 8;
  std::vector<OpsetImport> opset_imports;
  std::string producer_name;
  std::string producer_version;
  std::string domain;
  int64_t model_version = 0;
  std::string doc_string;
  std::vector<std::pair<std::string, std::string>> metadata;  // metadata_props, in order
  // Model-local functions and training info are kept serialized for lossless export.
  std::vector<std::string> opaque_functions;
  std::vector<std::string> opaque_training_info;
  std::shared_ptr<Graph> graph = std::make_shared<Graph>();

  // Opset version imported for `domain` ("" and "ai.onnx" are the same); 0 if absent.
  int64_t opset(const std::string& domain = "") const;
  // The model with graph->copy(): edits of the copy leave this model as it is.
  Model copy() const;
};

}  // namespace qflow

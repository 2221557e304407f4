// qflow IR -> ONNX ModelProto: field order follows the IR (file order after import) so export is stable.
#include "framework/onnx/onnx_export.h"

#include <cstring>
#include <exception>
#include <vector>

#include "framework/core/file_io.h"
#include "framework/onnx/proto_convert.h"

namespace qflow {

namespace {

Status graph_to_proto(const Graph& graph, onnx::GraphProto& proto);

Status attribute_to_proto(const Attribute& a, onnx::AttributeProto& p) {
  using A = onnx::AttributeProto;
  p.set_name(a.name);
  if (!a.doc_string.empty()) p.set_doc_string(a.doc_string);
  if (!a.ref_attr_name.empty()) p.set_ref_attr_name(a.ref_attr_name);
  switch (a.type) {
    case AttributeType::Undefined:
      break;
    case AttributeType::Float:
      p.set_type(A::FLOAT);
      p.set_f(a.f);
      break;
    case AttributeType::Int:
      p.set_type(A::INT);
      p.set_i(a.i);
      break;
    case AttributeType::String:
      p.set_type(A::STRING);
      p.set_s(a.s);
      break;
    case AttributeType::Tensor:
      p.set_type(A::TENSOR);
      onnx_proto::tensor_to_proto(a.t, "", *p.mutable_t());
      break;
    case AttributeType::Graph:
      p.set_type(A::GRAPH);
      if (!a.g) return internal_error("graph attribute '" + a.name + "' holds no graph");
      QFLOW_RETURN_IF_ERROR(graph_to_proto(*a.g, *p.mutable_g()));
      break;
    case AttributeType::Floats:
      p.set_type(A::FLOATS);
      for (float v : a.floats) p.add_floats(v);
      break;
    case AttributeType::Ints:
      p.set_type(A::INTS);
      for (int64_t v : a.ints) p.add_ints(v);
      break;
    case AttributeType::Strings:
      p.set_type(A::STRINGS);
      for (const std::string& v : a.strings) p.add_strings(v);
      break;
    case AttributeType::Tensors:
      p.set_type(A::TENSORS);
      for (const Tensor& t : a.tensors) onnx_proto::tensor_to_proto(t, "", *p.add_tensors());
      break;
    case AttributeType::Graphs:
      p.set_type(A::GRAPHS);
      for (const auto& g : a.graphs) {
        if (!g) return internal_error("graphs attribute '" + a.name + "' holds an empty graph");
        QFLOW_RETURN_IF_ERROR(graph_to_proto(*g, *p.add_graphs()));
      }
      break;
  }
  return Status::ok();
}

Status value_info_to_proto(const Value& value, onnx::ValueInfoProto& proto) {
  proto.set_name(value.name());
  if (!value.doc_string.empty()) proto.set_doc_string(value.doc_string);
  if (value.type) {
    Status s = onnx_proto::value_type_to_proto(*value.type, *proto.mutable_type());
    if (!s) return s.with_context("value '" + value.name() + "'");
  }
  return Status::ok();
}

Status graph_to_proto(const Graph& graph, onnx::GraphProto& proto) {
  if (!graph.name.empty()) proto.set_name(graph.name);
  if (!graph.doc_string.empty()) proto.set_doc_string(graph.doc_string);
  // ONNX requires producers before consumers; a pass that adds a node at the end of the list
  // may leave it later than its readers. A graph with a cycle (invalid anyway) keeps its order.
  Expected<std::vector<Node*>> sorted = graph.topological_order();
  std::vector<const Node*> order;
  if (sorted) {
    order.assign(sorted->begin(), sorted->end());
  } else {
    for (const auto& node : graph.nodes()) order.push_back(node.get());
  }
  for (const Node* node : order) {
    onnx::NodeProto& np = *proto.add_node();
    for (const Value* v : node->inputs()) np.add_input(v ? v->name() : std::string());
    for (const Value* v : node->outputs()) np.add_output(v ? v->name() : std::string());
    if (!node->name().empty()) np.set_name(node->name());
    np.set_op_type(node->op_type());
    if (!node->domain().empty()) np.set_domain(node->domain());
    if (!node->doc_string.empty()) np.set_doc_string(node->doc_string);
    for (const Attribute& a : node->attributes()) {
      Status s = attribute_to_proto(a, *np.add_attribute());
      if (!s) return s.with_context("node " + node->op_type() + " '" + node->name() + "'");
    }
  }
  for (const Value* v : graph.initializer_order())
    onnx_proto::tensor_to_proto(*graph.initializer(v), v->name(), *proto.add_initializer());
  for (const Value* v : graph.inputs) QFLOW_RETURN_IF_ERROR(value_info_to_proto(*v, *proto.add_input()));
  for (const Value* v : graph.outputs) QFLOW_RETURN_IF_ERROR(value_info_to_proto(*v, *proto.add_output()));
  for (const Value* v : graph.value_info) QFLOW_RETURN_IF_ERROR(value_info_to_proto(*v, *proto.add_value_info()));
  return Status::ok();
}

}  // namespace

namespace onnx_proto {

void tensor_to_proto(const Tensor& tensor, const std::string& name, onnx::TensorProto& proto) {
  for (int64_t d : tensor.shape()) proto.add_dims(d);
  proto.set_data_type(static_cast<int32_t>(tensor.dtype()));
  if (!name.empty()) proto.set_name(name);
  if (tensor.dtype() == DType::String) {
    for (const std::string& text : tensor.strings()) proto.add_string_data(text);
    return;
  }
  proto.set_raw_data(reinterpret_cast<const char*>(tensor.raw_data()), tensor.nbytes());
}

Status value_type_to_proto(const ValueType& type, onnx::TypeProto& proto) {
  if (!type.opaque.empty()) {
    if (!proto.ParseFromString(type.opaque)) return internal_error("its serialized non-tensor type does not parse");
    return Status::ok();
  }
  onnx::TypeProto::Tensor& tt = *proto.mutable_tensor_type();
  if (type.dtype != DType::Undefined) tt.set_elem_type(static_cast<int32_t>(type.dtype));
  if (type.shape) {
    onnx::TensorShapeProto& shape = *tt.mutable_shape();
    for (const Dim& d : *type.shape) {
      onnx::TensorShapeProto::Dimension& dim = *shape.add_dim();
      if (d.value) dim.set_dim_value(*d.value);
      else if (!d.param.empty()) dim.set_dim_param(d.param);
      if (!d.denotation.empty()) dim.set_denotation(d.denotation);
    }
  }
  if (!type.denotation.empty()) proto.set_denotation(type.denotation);
  return Status::ok();
}

Status model_to_proto(const Model& model, onnx::ModelProto& proto) {
  proto.set_ir_version(model.ir_version);
  for (const OpsetImport& op : model.opset_imports) {
    onnx::OperatorSetIdProto& p = *proto.add_opset_import();
    p.set_domain(op.domain);
    p.set_version(op.version);
  }
  if (!model.producer_name.empty()) proto.set_producer_name(model.producer_name);
  if (!model.producer_version.empty()) proto.set_producer_version(model.producer_version);
  if (!model.domain.empty()) proto.set_domain(model.domain);
  if (model.model_version != 0) proto.set_model_version(model.model_version);
  if (!model.doc_string.empty()) proto.set_doc_string(model.doc_string);
  for (const auto& [key, value] : model.metadata) {
    onnx::StringStringEntryProto& e = *proto.add_metadata_props();
    e.set_key(key);
    e.set_value(value);
  }
  for (const std::string& f : model.opaque_functions)
    if (!proto.add_functions()->ParseFromString(f)) return internal_error("a serialized model function does not parse");
  for (const std::string& t : model.opaque_training_info)
    if (!proto.add_training_info()->ParseFromString(t))
      return internal_error("a serialized training_info entry does not parse");
  if (!model.graph) return internal_error("the model has no graph");
  return graph_to_proto(*model.graph, *proto.mutable_graph());
}

}  // namespace onnx_proto

Expected<std::string> export_onnx_bytes(const Model& model) {
  try {
    onnx::ModelProto proto;
    QFLOW_RETURN_IF_ERROR(onnx_proto::model_to_proto(model, proto));
    if (proto.ByteSizeLong() > static_cast<std::size_t>(INT32_MAX))
      return unsupported("the model needs more than 2 GiB as a protobuf, and qflow does not write external data");
    std::string bytes;
    if (!proto.SerializeToString(&bytes)) return internal_error("protobuf serialization of the model failed");
    return bytes;
  } catch (const std::bad_alloc&) {
    return internal_error("out of memory while exporting the model");
  } catch (const std::exception& e) {
    return internal_error(std::string("unexpected error while exporting the model: ") + e.what());
  }
}

Status export_onnx_file(const Model& model, const std::string& path) {
  auto bytes = export_onnx_bytes(model);
  if (!bytes) return bytes.status().with_context("cannot export '" + path + "'");
  return write_file_atomic(path, *bytes);
}

}  // namespace qflow

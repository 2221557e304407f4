// ONNX ModelProto/TensorProto -> qflow IR, checking every size read from the file before allocating.
#include "framework/onnx/onnx_import.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <climits>
#include <cstring>
#include <exception>
#include <filesystem>
#include <iostream>

#include <onnx/defs/schema.h>

#include "framework/core/file_io.h"
#include "framework/core/memory_limit.h"
#include "framework/onnx/onnx_schemas.h"
#include "framework/onnx/proto_convert.h"
#include "framework/onnx/proto_topological_sort.h"
#include "framework/onnx/tensor_pb.h"

namespace qflow {

static_assert(std::endian::native == std::endian::little, "ONNX raw_data is little-endian; qflow copies it as is");

namespace {

void warn(const ImportOptions& options, const std::string& line) {
  if (options.warning) options.warning(line);
  else std::cerr << "qflow: warning: " << line << std::endl;
}

// Protobuf cannot parse messages of 2 GiB or more.
constexpr int64_t kMaxProtoBytes = int64_t{INT_MAX};

std::string dims_to_string(const onnx::TensorProto& proto) {
  std::string out = "[";
  for (int i = 0; i < proto.dims_size(); ++i) out += (i ? ", " : "") + std::to_string(proto.dims(i));
  return out + "]";
}

Status size_mismatch(const std::string& what, const std::string& shape, int64_t needed, const char* unit,
                     const char* field, std::size_t found) {
  return invalid_input(what + ": declared shape " + shape + " needs " + std::to_string(needed) + " " + unit + " but " +
                       field + " has " + std::to_string(found));
}

// Copies a repeated typed field into the tensor, converting each element to T.
template <typename T, typename Repeated>
void fill_from(Tensor& tensor, const Repeated& field) {
  T* out = tensor.data<T>();
  for (int i = 0; i < field.size(); ++i) out[i] = static_cast<T>(field.Get(i));
}

Status check_typed_count(const std::string& what, const std::string& shape, int64_t numel, const char* field,
                         int count) {
  if (count != numel) return size_mismatch(what, shape, numel, "values", field, static_cast<std::size_t>(count));
  return Status::ok();
}

Expected<Attribute> attribute_from_proto(const onnx::AttributeProto& proto, const std::string& node_what,
                                         const ImportOptions& options);

Status graph_from_proto(const onnx::GraphProto& proto, Graph& graph, const ImportOptions& options);

Expected<std::shared_ptr<Graph>> subgraph_from_proto(const onnx::GraphProto& proto, const ImportOptions& options) {
  auto graph = std::make_shared<Graph>();
  QFLOW_RETURN_IF_ERROR(graph_from_proto(proto, *graph, options));
  return graph;
}

// Very old files leave AttributeProto.type unset; the populated field tells the type.
onnx::AttributeProto::AttributeType infer_attribute_type(const onnx::AttributeProto& p) {
  using A = onnx::AttributeProto;
  if (p.type() != A::UNDEFINED) return p.type();
  if (p.has_f()) return A::FLOAT;
  if (p.has_i()) return A::INT;
  if (p.has_s()) return A::STRING;
  if (p.has_t()) return A::TENSOR;
  if (p.has_g()) return A::GRAPH;
  if (p.floats_size()) return A::FLOATS;
  if (p.ints_size()) return A::INTS;
  if (p.strings_size()) return A::STRINGS;
  if (p.tensors_size()) return A::TENSORS;
  if (p.graphs_size()) return A::GRAPHS;
  if (p.has_sparse_tensor()) return A::SPARSE_TENSOR;
  if (p.sparse_tensors_size()) return A::SPARSE_TENSORS;
  if (p.has_tp()) return A::TYPE_PROTO;
  if (p.type_protos_size()) return A::TYPE_PROTOS;
  return A::UNDEFINED;
}

Expected<Attribute> attribute_from_proto(const onnx::AttributeProto& p, const std::string& node_what,
                                         const ImportOptions& options) {
  using A = onnx::AttributeProto;
  Attribute a;
  a.name = p.name();
  a.doc_string = p.doc_string();
  a.ref_attr_name = p.ref_attr_name();
  const std::string what = "attribute '" + p.name() + "' of " + node_what;
  switch (infer_attribute_type(p)) {
    case A::UNDEFINED:
      a.type = AttributeType::Undefined;
      break;
    case A::FLOAT:
      a.type = AttributeType::Float;
      a.f = p.f();
      break;
    case A::INT:
      a.type = AttributeType::Int;
      a.i = p.i();
      break;
    case A::STRING:
      a.type = AttributeType::String;
      a.s = p.s();
      break;
    case A::TENSOR: {
      a.type = AttributeType::Tensor;
      QFLOW_ASSIGN_OR_RETURN(a.t, onnx_proto::tensor_from_proto(p.t(), what, options.max_tensor_bytes));
      break;
    }
    case A::GRAPH: {
      a.type = AttributeType::Graph;
      QFLOW_ASSIGN_OR_RETURN(a.g, subgraph_from_proto(p.g(), options));
      break;
    }
    case A::FLOATS:
      a.type = AttributeType::Floats;
      a.floats.assign(p.floats().begin(), p.floats().end());
      break;
    case A::INTS:
      a.type = AttributeType::Ints;
      a.ints.assign(p.ints().begin(), p.ints().end());
      break;
    case A::STRINGS:
      a.type = AttributeType::Strings;
      a.strings.assign(p.strings().begin(), p.strings().end());
      break;
    case A::TENSORS:
      a.type = AttributeType::Tensors;
      for (int i = 0; i < p.tensors_size(); ++i) {
        QFLOW_ASSIGN_OR_RETURN(Tensor t, onnx_proto::tensor_from_proto(p.tensors(i), what + " (tensor " + std::to_string(i) + ")",
                                                           options.max_tensor_bytes));
        a.tensors.push_back(std::move(t));
      }
      break;
    case A::GRAPHS:
      a.type = AttributeType::Graphs;
      for (int i = 0; i < p.graphs_size(); ++i) {
        QFLOW_ASSIGN_OR_RETURN(auto g, subgraph_from_proto(p.graphs(i), options));
        a.graphs.push_back(std::move(g));
      }
      break;
    default:
      return unsupported(what + " has type " + A::AttributeType_Name(p.type()) +
                         ", which qflow does not support");
  }
  return a;
}

// A fully static declared shape is refused when it cannot be held (overflow, memory limit):
// the interpreter would allocate it later, so the model fails here, before anything runs.
Status check_declared_size(const ValueType& type, const std::string& what, int64_t max_bytes) {
  const std::optional<Shape> shape = type.static_shape();
  if (!shape || type.dtype == DType::Undefined) return Status::ok();
  for (int64_t d : *shape)
    if (d < 0) return Status::ok();  // negative dims are the checker's to report
  const int64_t numel = shape_numel(*shape);
  const int64_t elem = static_cast<int64_t>(dtype_size(type.dtype));
  if (numel < 0 || (elem > 0 && numel > INT64_MAX / elem))
    return invalid_input(what + ": declared shape " + shape_to_string(*shape) + " has more elements than fit in 64 bits");
  if (numel * elem > max_bytes)
    return invalid_input(what + ": declared shape " + shape_to_string(*shape) + " needs " + std::to_string(numel * elem) +
                         " bytes, more than the memory limit of " + std::to_string(max_bytes) + " bytes (--max-memory)");
  return Status::ok();
}

Status graph_from_proto(const onnx::GraphProto& proto, Graph& graph, const ImportOptions& options) {
  const std::string graph_what = "graph '" + proto.name() + "'";
  if (proto.sparse_initializer_size() > 0) {
    const onnx::SparseTensorProto& s = proto.sparse_initializer(0);
    const std::string name = s.has_values() ? s.values().name() : std::string();
    return unsupported(graph_what + " has sparse initializer '" + name + "', which qflow does not support");
  }
  if (proto.quantization_annotation_size() > 0)
    return unsupported(graph_what + " has quantization_annotation entries, which qflow does not support");
  graph.name = proto.name();
  graph.doc_string = proto.doc_string();

  auto declare = [&](const onnx::ValueInfoProto& info, const char* role) -> Expected<Value*> {
    if (info.name().empty()) return invalid_input(graph_what + " has a " + std::string(role) + " with no name");
    Value* value = graph.get_or_create_value(info.name());
    if (info.has_type()) {
      auto type = onnx_proto::value_type_from_proto(info.type());
      if (!type) return type.status().with_context(std::string(role) + " '" + info.name() + "'");
      value->type = std::move(type).value();
      QFLOW_RETURN_IF_ERROR(check_declared_size(*value->type, std::string(role) + " '" + info.name() + "'",
                                                options.max_tensor_bytes));
    }
    value->doc_string = info.doc_string();
    return value;
  };
  for (const auto& info : proto.input()) {
    QFLOW_ASSIGN_OR_RETURN(Value * v, declare(info, "input"));
    graph.inputs.push_back(v);
  }
  for (const auto& info : proto.output()) {
    QFLOW_ASSIGN_OR_RETURN(Value * v, declare(info, "output"));
    graph.outputs.push_back(v);
  }
  for (const auto& info : proto.value_info()) {
    QFLOW_ASSIGN_OR_RETURN(Value * v, declare(info, "value_info"));
    graph.value_info.push_back(v);
  }
  for (const auto& init : proto.initializer()) {
    if (init.name().empty()) return invalid_input(graph_what + " has an initializer with no name");
    QFLOW_ASSIGN_OR_RETURN(Tensor t, onnx_proto::tensor_from_proto(init, "initializer '" + init.name() + "'",
                                                                   options.max_tensor_bytes));
    Value* value = graph.get_or_create_value(init.name());
    if (graph.is_initializer(value))
      return invalid_input(graph_what + " has two initializers named '" + init.name() + "'");
    graph.set_initializer(value, std::move(t));
  }
  for (const auto& np : proto.node()) {
    std::vector<Value*> ins, outs;
    for (const auto& name : np.input()) ins.push_back(name.empty() ? nullptr : graph.get_or_create_value(name));
    for (const auto& name : np.output()) outs.push_back(name.empty() ? nullptr : graph.get_or_create_value(name));
    Node* node = graph.add_node(np.op_type(), ins, outs, np.name(), np.domain());
    node->doc_string = np.doc_string();
    const std::string node_what = "node " + np.op_type() + " '" + np.name() + "'";
    for (const auto& ap : np.attribute()) {
      QFLOW_ASSIGN_OR_RETURN(Attribute a, attribute_from_proto(ap, node_what, options));
      node->set_attribute(std::move(a));
    }
  }
  return Status::ok();
}

// libonnx's checker. A complaint about a node (an op without a schema, attributes or inputs
// its schema refuses) is an error: the node's meaning is unknown. Graph and model bookkeeping
// that runtimes do not enforce (value_info without shapes, initializers missing from an old
// IR's inputs, ...) is a warning: qflow's own structural check has passed.
Status run_checker(const onnx::ModelProto& proto, const std::string& source_name, const ImportOptions& options) {
  try {
    check_model_proto(proto);
  } catch (const std::exception& e) {
    const std::string message = e.what();
    const bool about_a_node = message.find("No Op registered") != std::string::npos ||
                              message.find("Bad node spec") != std::string::npos;
    if (about_a_node) return invalid_input(source_name + ": " + message);
    warn(options, source_name + ": the ONNX checker complains, qflow continues: " + message);
  }
  return Status::ok();
}

// Operator semantics are defined per opset; a default-domain opset newer than libonnx's
// schemas has ops whose meaning neither the checker nor the interpreter knows.
Status check_opset_known(const onnx::ModelProto& proto, const std::string& source_name) {
  const auto& ranges = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  const auto known = ranges.find(onnx::ONNX_DOMAIN);
  if (known == ranges.end()) return Status::ok();
  // qflow itself writes opset 21 for 16-bit Q/DQ (ensure_quant_opset, which raises a model
  // only when the interpreter has every op at 21): its own int16 PTQ models must read back.
  constexpr int64_t kQflowWrittenOpset = 21;
  const int64_t newest = std::max<int64_t>(known->second.second, kQflowWrittenOpset);
  for (const auto& opset : proto.opset_import()) {
    if ((opset.domain().empty() || opset.domain() == "ai.onnx") && opset.version() > newest)
      return unsupported(source_name + ": default-domain opset " + std::to_string(opset.version()) +
                         " is newer than the operator definitions qflow knows (up to opset " +
                         std::to_string(newest) + ")");
  }
  return Status::ok();
}

Status check_proto_size(uint64_t size, const std::string& source_name) {
  if (size > static_cast<uint64_t>(kMaxProtoBytes))
    return invalid_input("'" + source_name + "' is " + std::to_string(size) +
                         " bytes; ONNX protobuf files are limited to 2 GiB and qflow does not support external data");
  return Status::ok();
}

Expected<Model> import_bytes_unguarded(std::string_view bytes, const std::string& source_name,
                                       const ImportOptions& options) {
  QFLOW_RETURN_IF_ERROR(check_proto_size(bytes.size(), source_name));
  onnx::ModelProto proto;
  if (!proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return invalid_input("'" + source_name + "' is not a valid ONNX model (protobuf parse failed)");
  if (!proto.has_graph())
    return invalid_input("'" + source_name + "' is not a valid ONNX model (it has no graph)");
  QFLOW_RETURN_IF_ERROR(check_opset_known(proto, source_name));
  if (onnx_proto::sort_nodes_topologically(*proto.mutable_graph()))
    warn(options, source_name + ": nodes were not in topological order; sorted (producers before consumers)");
  auto model = onnx_proto::model_from_proto(proto, options);
  if (!model) return model.status().with_context(source_name);
  // qflow's own structural check runs before libonnx's checker: its messages name the
  // cycle or the dangling value, where the checker only says nodes are not sorted.
  // Subgraphs may use values of enclosing graphs, so only the top graph is self-contained.
  Status valid = model->graph->validate();
  if (!valid) return valid.with_context(source_name);
  if (options.run_checker) QFLOW_RETURN_IF_ERROR(run_checker(proto, source_name, options));
  return model;
}

Expected<NamedTensor> load_named_unguarded(const std::string& path, const ImportOptions& options) {
  QFLOW_ASSIGN_OR_RETURN(std::string bytes, read_file(path, kMaxProtoBytes));
  onnx::TensorProto proto;
  if (!proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return invalid_input("'" + path + "' is not a valid ONNX tensor (protobuf parse failed)");
  auto tensor = onnx_proto::tensor_from_proto(proto, "tensor '" + proto.name() + "'", options.max_tensor_bytes);
  if (!tensor) return tensor.status().with_context(path);
  return NamedTensor{proto.name(), std::move(tensor).value()};
}

}  // namespace

namespace onnx_proto {

Expected<Tensor> tensor_from_proto(const onnx::TensorProto& p, const std::string& what, int64_t max_bytes) {
  if (p.data_location() == onnx::TensorProto::EXTERNAL)
    return unsupported(what + " uses external data, which qflow does not support");
  if (p.has_segment()) return unsupported(what + " is segmented, which qflow does not support");
  const DType dtype = dtype_from_onnx(p.data_type());
  if (dtype == DType::Undefined) {
    if (p.data_type() == onnx::TensorProto::UNDEFINED) return invalid_input(what + " has no data type");
    if (!onnx::TensorProto::DataType_IsValid(p.data_type()))
      return invalid_input(what + " has unknown data type " + std::to_string(p.data_type()));
    std::string name = onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(p.data_type()));
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return unsupported(what + " has data type " + name + ", which qflow does not support");
  }
  const std::string shape_text = dims_to_string(p);
  Shape shape(p.dims().begin(), p.dims().end());
  for (int64_t d : shape)
    if (d < 0) return invalid_input(what + ": declared shape " + shape_text + " has a negative dimension");
  const int64_t numel = shape_numel(shape);
  if (numel < 0) return invalid_input(what + ": declared shape " + shape_text + " has more elements than fit in 64 bits");
  if (dtype == DType::String) {
    if (p.has_raw_data()) return invalid_input(what + " is a string tensor with raw_data; strings go in string_data");
    QFLOW_RETURN_IF_ERROR(check_typed_count(what, shape_text, numel, "string_data", p.string_data_size()));
    int64_t bytes = 0;
    for (const std::string& text : p.string_data()) bytes += static_cast<int64_t>(text.size());
    if (bytes > max_bytes)
      return invalid_input(what + ": its strings hold " + std::to_string(bytes) + " bytes, more than the memory limit of " +
                           std::to_string(max_bytes) + " bytes (--max-memory)");
    return Tensor::from_strings(shape, std::vector<std::string>(p.string_data().begin(), p.string_data().end()));
  }
  const int64_t elem = static_cast<int64_t>(dtype_size(dtype));
  if (numel > INT64_MAX / elem)
    return invalid_input(what + ": declared shape " + shape_text + " has more bytes than fit in 64 bits");
  if (numel * elem > max_bytes)
    return invalid_input(what + ": declared shape " + shape_text + " needs " + std::to_string(numel * elem) +
                         " bytes, more than the memory limit of " + std::to_string(max_bytes) + " bytes (--max-memory)");
  const int64_t nbytes = numel * elem;

  if (p.has_raw_data()) {
    if (static_cast<int64_t>(p.raw_data().size()) != nbytes)
      return size_mismatch(what, shape_text, nbytes, "bytes", "raw_data", p.raw_data().size());
    QFLOW_ASSIGN_OR_RETURN(Tensor t, Tensor::make(dtype, shape, max_bytes));
    if (nbytes > 0) std::memcpy(t.raw_data(), p.raw_data().data(), static_cast<std::size_t>(nbytes));
    return t;
  }

  switch (dtype) {
    case DType::Float32:
      QFLOW_RETURN_IF_ERROR(check_typed_count(what, shape_text, numel, "float_data", p.float_data_size()));
      break;
    case DType::Int64:
      QFLOW_RETURN_IF_ERROR(check_typed_count(what, shape_text, numel, "int64_data", p.int64_data_size()));
      break;
    case DType::Float64:
      QFLOW_RETURN_IF_ERROR(check_typed_count(what, shape_text, numel, "double_data", p.double_data_size()));
      break;
    case DType::UInt32:
    case DType::UInt64:
      QFLOW_RETURN_IF_ERROR(check_typed_count(what, shape_text, numel, "uint64_data", p.uint64_data_size()));
      break;
    default:
      QFLOW_RETURN_IF_ERROR(check_typed_count(what, shape_text, numel, "int32_data", p.int32_data_size()));
      break;
  }
  QFLOW_ASSIGN_OR_RETURN(Tensor t, Tensor::make(dtype, shape, max_bytes));
  switch (dtype) {
    case DType::Float32: fill_from<float>(t, p.float_data()); break;
    case DType::Float64: fill_from<double>(t, p.double_data()); break;
    case DType::Int64: fill_from<int64_t>(t, p.int64_data()); break;
    case DType::UInt64: fill_from<uint64_t>(t, p.uint64_data()); break;
    case DType::UInt32: fill_from<uint32_t>(t, p.uint64_data()); break;
    case DType::Int32: fill_from<int32_t>(t, p.int32_data()); break;
    case DType::Int16: fill_from<int16_t>(t, p.int32_data()); break;
    case DType::UInt16:
    case DType::Float16:
    case DType::BFloat16: fill_from<uint16_t>(t, p.int32_data()); break;
    case DType::Int8: fill_from<int8_t>(t, p.int32_data()); break;
    case DType::UInt8: fill_from<uint8_t>(t, p.int32_data()); break;
    case DType::Bool: {
      bool* out = t.data<bool>();
      for (int i = 0; i < p.int32_data_size(); ++i) out[i] = p.int32_data(i) != 0;
      break;
    }
    case DType::String: case DType::Undefined: break;
  }
  return t;
}

Expected<ValueType> value_type_from_proto(const onnx::TypeProto& proto) {
  ValueType type;
  const bool plain_tensor =
      proto.has_tensor_type() && (proto.tensor_type().elem_type() == onnx::TensorProto::UNDEFINED ||
                                  dtype_from_onnx(proto.tensor_type().elem_type()) != DType::Undefined);
  if (!plain_tensor) {
    // Sequences, maps, optionals and tensors of types qflow cannot hold travel through unchanged.
    type.opaque = proto.SerializeAsString();
    return type;
  }
  const onnx::TypeProto::Tensor& tt = proto.tensor_type();
  type.dtype = dtype_from_onnx(tt.elem_type());
  type.denotation = proto.denotation();
  if (tt.has_shape()) {
    std::vector<Dim> dims;
    dims.reserve(static_cast<std::size_t>(tt.shape().dim_size()));
    for (const auto& d : tt.shape().dim()) {
      Dim dim;
      if (d.has_dim_value()) dim.value = d.dim_value();
      if (d.has_dim_param()) dim.param = d.dim_param();
      dim.denotation = d.denotation();
      dims.push_back(std::move(dim));
    }
    type.shape = std::move(dims);
  }
  return type;
}

Expected<Model> model_from_proto(const onnx::ModelProto& proto, const ImportOptions& options) {
  Model model;
  model.ir_version = proto.ir_version();
  for (const auto& op : proto.opset_import()) model.opset_imports.push_back({op.domain(), op.version()});
  model.producer_name = proto.producer_name();
  model.producer_version = proto.producer_version();
  model.domain = proto.domain();
  model.model_version = proto.model_version();
  model.doc_string = proto.doc_string();
  for (const auto& kv : proto.metadata_props()) model.metadata.emplace_back(kv.key(), kv.value());
  for (const auto& f : proto.functions()) model.opaque_functions.push_back(f.SerializeAsString());
  for (const auto& t : proto.training_info()) model.opaque_training_info.push_back(t.SerializeAsString());
  QFLOW_RETURN_IF_ERROR(graph_from_proto(proto.graph(), *model.graph, options));
  return model;
}

}  // namespace onnx_proto

Expected<Model> import_onnx_bytes(std::string_view bytes, const std::string& source_name,
                                  const ImportOptions& options) {
  try {
    return import_bytes_unguarded(bytes, source_name, options);
  } catch (const std::bad_alloc&) {
    return invalid_input("'" + source_name + "': out of memory while importing");
  } catch (const std::exception& e) {
    return internal_error("'" + source_name + "': unexpected error while importing: " + e.what());
  } catch (...) {
    return internal_error("'" + source_name + "': unexpected error while importing");
  }
}

Expected<Model> import_exported_copy(std::string_view bytes, const std::string& source_name) {
  ImportOptions options;
  options.run_checker = false;
  return import_onnx_bytes(bytes, source_name, options);
}

Expected<Model> import_onnx_file(const std::string& path, const ImportOptions& options) {
  // Refuse before reading: protobuf could not parse it anyway.
  std::error_code error;
  const auto size = std::filesystem::file_size(path, error);
  if (!error) QFLOW_RETURN_IF_ERROR(check_proto_size(size, path));
  QFLOW_ASSIGN_OR_RETURN(std::string bytes, read_file(path, kMaxProtoBytes));
  return import_onnx_bytes(bytes, path, options);
}

Expected<NamedTensor> load_named_tensor_pb_file(const std::string& path, const ImportOptions& options) {
  try {
    return load_named_unguarded(path, options);
  } catch (const std::bad_alloc&) {
    return invalid_input("'" + path + "': out of memory while loading the tensor");
  } catch (const std::exception& e) {
    return internal_error("'" + path + "': unexpected error while loading the tensor: " + e.what());
  }
}

Expected<Tensor> load_tensor_pb_file(const std::string& path, const ImportOptions& options) {
  QFLOW_ASSIGN_OR_RETURN(NamedTensor named, load_named_tensor_pb_file(path, options));
  return std::move(named.tensor);
}

}  // namespace qflow

// ONNX import/export: round trips over the ONNX test models, a hand-built model, and exact errors for bad files.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include "framework/core/file_io.h"
#include "framework/core/memory_limit.h"
#include "framework/onnx/onnx_check.h"
#include "framework/onnx/onnx_export.h"
#include "framework/onnx/onnx_import.h"

using namespace qflow;

namespace {

namespace fs = std::filesystem;

// Minimal protobuf wire encoder: lets the tests write malformed ONNX messages that the IR
// cannot represent (field numbers follow onnx.proto).
class Pb {
 public:
  Pb& varint(int field, uint64_t value) {
    key(field, 0);
    put_varint(value);
    return *this;
  }
  Pb& bytes(int field, std::string_view value) {
    key(field, 2);
    put_varint(value.size());
    out_.append(value);
    return *this;
  }
  Pb& message(int field, const Pb& value) { return bytes(field, value.out_); }
  const std::string& str() const { return out_; }

 private:
  void key(int field, int wire) { put_varint(static_cast<uint64_t>(field) << 3 | static_cast<uint64_t>(wire)); }
  void put_varint(uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    out_.push_back(static_cast<char>(v));
  }
  std::string out_;
};

// TensorProto fields.
constexpr int kDims = 1, kDataType = 2, kInt32Data = 5, kTensorName = 8, kRawData = 9, kExternalData = 13,
              kDataLocation = 14;

Pb tensor(const std::string& name, std::vector<int64_t> dims, int data_type) {
  Pb t;
  for (int64_t d : dims) t.varint(kDims, static_cast<uint64_t>(d));
  t.varint(kDataType, static_cast<uint64_t>(data_type)).bytes(kTensorName, name);
  return t;
}

// ValueInfoProto `name`: float of shape [1].
Pb float1_info(const std::string& name) {
  Pb dim;
  dim.varint(1, 1);
  Pb shape;
  shape.message(1, dim);
  Pb tensor_type;
  tensor_type.varint(1, 1).message(2, shape);
  Pb type;
  type.message(1, tensor_type);
  Pb info;
  info.bytes(1, name).message(2, type);
  return info;
}

// ModelProto of `graph`: IR 8, default-domain opset 17.
std::string model_of(const Pb& graph) {
  Pb opset;
  opset.varint(2, 17);
  Pb model;
  model.varint(1, 8).message(8, opset).message(7, graph);
  return model.str();
}

// ModelProto with one initializer `init` feeding Identity -> y.
std::string model_with_initializer(const Pb& init) {
  Pb node;
  node.bytes(1, "w").bytes(2, "y").bytes(4, "Identity");
  Pb graph;
  graph.message(1, node).bytes(2, "g").message(5, init).message(12, float1_info("y"));
  return model_of(graph);
}

std::string import_error(const std::string& bytes) {
  ImportOptions options;
  options.run_checker = false;
  auto model = import_onnx_bytes(bytes, "bad.onnx", options);
  return model ? std::string("(imported)") : model.status().message();
}

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("qflow_test_onnx_io_" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

// Structural comparison; returns the first difference or "".
std::string diff_graphs(const Graph& a, const Graph& b, const std::string& where);

std::string diff_tensors(const Tensor& a, const Tensor& b, const std::string& where) {
  return a.bitwise_equal(b) ? "" : where + ": tensors differ";
}

std::string diff_attributes(const Attribute& a, const Attribute& b, const std::string& where) {
  if (a.name != b.name || a.type != b.type) return where + ": name or type differs";
  if (a.f != b.f || a.i != b.i || a.s != b.s || a.floats != b.floats || a.ints != b.ints || a.strings != b.strings ||
      a.doc_string != b.doc_string || a.ref_attr_name != b.ref_attr_name)
    return where + ": scalar or list value differs";
  if (std::string d = diff_tensors(a.t, b.t, where); !d.empty()) return d;
  if (a.tensors.size() != b.tensors.size()) return where + ": tensor count differs";
  for (std::size_t i = 0; i < a.tensors.size(); ++i)
    if (std::string d = diff_tensors(a.tensors[i], b.tensors[i], where); !d.empty()) return d;
  if (bool(a.g) != bool(b.g)) return where + ": graph presence differs";
  if (a.g)
    if (std::string d = diff_graphs(*a.g, *b.g, where + "/g"); !d.empty()) return d;
  if (a.graphs.size() != b.graphs.size()) return where + ": graph count differs";
  for (std::size_t i = 0; i < a.graphs.size(); ++i)
    if (std::string d = diff_graphs(*a.graphs[i], *b.graphs[i], where + "/graphs"); !d.empty()) return d;
  return "";
}

std::string diff_value_lists(const std::vector<Value*>& a, const std::vector<Value*>& b, const std::string& where) {
  if (a.size() != b.size()) return where + ": count differs";
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i]->name() != b[i]->name()) return where + ": name differs at " + std::to_string(i);
    if (a[i]->type != b[i]->type) return where + ": type of '" + a[i]->name() + "' differs";
    if (a[i]->doc_string != b[i]->doc_string) return where + ": doc of '" + a[i]->name() + "' differs";
  }
  return "";
}

std::string name_of(const Value* v) { return v ? v->name() : std::string("<none>"); }

std::string diff_graphs(const Graph& a, const Graph& b, const std::string& where) {
  if (a.name != b.name || a.doc_string != b.doc_string) return where + ": name or doc differs";
  for (auto [la, lb, what] : {std::tuple{&a.inputs, &b.inputs, "inputs"}, {&a.outputs, &b.outputs, "outputs"},
                              {&a.value_info, &b.value_info, "value_info"}})
    if (std::string d = diff_value_lists(*la, *lb, where + " " + what); !d.empty()) return d;
  const auto& ia = a.initializer_order();
  const auto& ib = b.initializer_order();
  if (ia.size() != ib.size()) return where + ": initializer count differs";
  for (std::size_t i = 0; i < ia.size(); ++i) {
    if (ia[i]->name() != ib[i]->name()) return where + ": initializer order differs";
    if (std::string d = diff_tensors(*a.initializer(ia[i]), *b.initializer(ib[i]), where + " " + ia[i]->name());
        !d.empty())
      return d;
  }
  if (a.node_count() != b.node_count()) return where + ": node count differs";
  auto nb = b.nodes().begin();
  for (const auto& na : a.nodes()) {
    const Node& x = *na;
    const Node& y = **nb++;
    const std::string at = where + " node '" + x.name() + "'";
    if (x.name() != y.name() || x.op_type() != y.op_type() || x.domain() != y.domain() || x.doc_string != y.doc_string)
      return at + ": header differs";
    if (x.inputs().size() != y.inputs().size() || x.outputs().size() != y.outputs().size())
      return at + ": arity differs";
    for (std::size_t i = 0; i < x.inputs().size(); ++i)
      if (name_of(x.inputs()[i]) != name_of(y.inputs()[i])) return at + ": input differs";
    for (std::size_t i = 0; i < x.outputs().size(); ++i)
      if (name_of(x.outputs()[i]) != name_of(y.outputs()[i])) return at + ": output differs";
    if (x.attributes().size() != y.attributes().size()) return at + ": attribute count differs";
    for (std::size_t i = 0; i < x.attributes().size(); ++i)
      if (std::string d = diff_attributes(x.attributes()[i], y.attributes()[i], at + " attr " + x.attributes()[i].name);
          !d.empty())
        return d;
  }
  return "";
}

std::string diff_models(const Model& a, const Model& b) {
  if (a.ir_version != b.ir_version || a.opset_imports != b.opset_imports || a.producer_name != b.producer_name ||
      a.producer_version != b.producer_version || a.domain != b.domain || a.model_version != b.model_version ||
      a.doc_string != b.doc_string || a.metadata != b.metadata || a.opaque_functions != b.opaque_functions ||
      a.opaque_training_info != b.opaque_training_info)
    return "model fields differ";
  return diff_graphs(*a.graph, *b.graph, "graph");
}

std::vector<fs::path> all_test_models() {
  std::vector<fs::path> models;
  for (const char* suite : {"node", "pytorch-converted", "pytorch-operator", "simple"}) {
    const fs::path dir = fs::path(QFLOW_ONNX_TESTDATA_DIR) / suite;
    std::error_code error;
    for (const auto& entry : fs::directory_iterator(dir, error))
      if (fs::exists(entry.path() / "model.onnx")) models.push_back(entry.path() / "model.onnx");
  }
  std::sort(models.begin(), models.end());
  return models;
}

}  // namespace

TEST_CASE("onnx_io: every test model round-trips to identical bytes and an equal graph") {
  const auto models = all_test_models();
  REQUIRE(models.size() > 1000);
  int imported = 0;
  for (const fs::path& path : models) {
    auto first = import_onnx_file(path.string());
    if (!first) {
      // Only features qflow declares unsupported may keep a conformance model out.
      CHECK_MESSAGE(first.status().code() == StatusCode::Unsupported, first.status().message());
      continue;
    }
    ++imported;
    auto bytes1 = export_onnx_bytes(*first);
    REQUIRE_MESSAGE(bytes1, bytes1.status().message());
    auto second = import_onnx_bytes(*bytes1, path.string() + " (exported)");
    REQUIRE_MESSAGE(second, second.status().message());
    auto bytes2 = export_onnx_bytes(*second);
    REQUIRE(bytes2);
    CHECK_MESSAGE(*bytes1 == *bytes2, path.string());
    const std::string diff = diff_models(*first, *second);
    CHECK_MESSAGE(diff.empty(), (path.string() + ": " + diff));
  }
  CHECK(imported > 1000);
}

TEST_CASE("onnx_io: a hand-built model with every attribute kind exports and re-imports") {
  Model model;
  model.ir_version = 8;
  model.opset_imports = {{"", 17}, {"com.example", 2}};
  model.producer_name = "qflow-test";
  model.producer_version = "1.0";
  model.domain = "org.example";
  model.model_version = 42;
  model.doc_string = "hand built";
  model.metadata = {{"b", "2"}, {"a", "1"}};
  Graph& g = *model.graph;
  g.name = "main";
  g.doc_string = "main graph";
  Value* x = g.get_or_create_value("x");
  x->type = ValueType{DType::Float32, std::vector<Dim>{{std::nullopt, "batch", "N"}, {3, "", ""}}, "IMAGE", ""};
  x->doc_string = "input x";
  g.inputs = {x};
  Value* w = g.get_or_create_value("w");
  g.set_initializer(w, Tensor::from_vector<int8_t>({2}, {-7, 9}));
  Value* h = g.get_or_create_value("h");
  Tensor half(DType::Float16, {3});
  half.data<uint16_t>()[0] = float_to_half(1.5f);
  half.data<uint16_t>()[2] = float_to_half(-2.0f);
  g.set_initializer(h, half);
  Value* y = g.get_or_create_value("y");
  y->type = ValueType{DType::Float32, std::nullopt, "", ""};
  g.value_info = {y};
  Value* z = g.get_or_create_value("z");
  g.outputs = {z};

  auto body = std::make_shared<Graph>();
  body->name = "body";
  Value* bin = body->get_or_create_value("b_in");
  Value* bout = body->get_or_create_value("b_out");
  body->inputs = {bin};
  body->outputs = {bout};
  body->add_node("Neg", {bin}, {bout}, "neg_in_body");

  Node* n = g.add_node("Custom", {x, nullptr, w}, {y, nullptr}, "custom", "com.example");
  n->doc_string = "a node";
  n->set_attribute(Attribute::make_ints("ints", {1, -2, 3}));
  n->set_attribute(Attribute::make_float("f", 0.25f));
  n->set_attribute(Attribute::make_int("i", -5));
  n->set_attribute(Attribute::make_string("s", std::string("a\0b", 3)));
  n->set_attribute(Attribute::make_floats("fs", {1.5f, -0.5f}));
  n->set_attribute(Attribute::make_strings("ss", {"p", "q"}));
  n->set_attribute(Attribute::make_tensor("t", Tensor::from_vector<bool>({3}, {true, false, true})));
  Attribute ts;
  ts.name = "ts";
  ts.type = AttributeType::Tensors;
  ts.tensors = {Tensor::scalar<int64_t>(7), Tensor::from_vector<double>({2}, {0.5, 2.0})};
  n->set_attribute(ts);
  Attribute ga;
  ga.name = "body";
  ga.type = AttributeType::Graph;
  ga.g = body;
  ga.doc_string = "subgraph";
  n->set_attribute(ga);
  Attribute gs;
  gs.name = "branches";
  gs.type = AttributeType::Graphs;
  gs.graphs = {body, body};
  n->set_attribute(gs);
  g.add_node("Relu", {y}, {z}, "relu");

  auto bytes = export_onnx_bytes(model);
  REQUIRE_MESSAGE(bytes, bytes.status().message());
  ImportOptions options;
  options.run_checker = false;  // the custom domain has no schema
  auto back = import_onnx_bytes(*bytes, "hand.onnx", options);
  REQUIRE_MESSAGE(back, back.status().message());
  CHECK(diff_models(model, *back) == "");

  const Graph& g2 = *back->graph;
  const Node& n2 = *g2.nodes().front();
  CHECK(n2.inputs()[1] == nullptr);
  CHECK(n2.outputs()[1] == nullptr);
  CHECK(n2.attributes().front().name == "ints");  // attribute order kept
  CHECK(n2.attr_float("f", 0) == 0.25f);
  CHECK(n2.attr_string("s", "").size() == 3);
  CHECK(g2.find_value("x")->type->shape->at(0).param == "batch");
  CHECK(g2.find_value("x")->type->shape->at(0).denotation == "N");
  CHECK(g2.initializer(g2.find_value("w"))->data<int8_t>()[0] == -7);
  CHECK(g2.initializer_order()[1]->name() == "h");
  CHECK(back->metadata.front().first == "b");
  CHECK(n2.find_attribute("branches")->graphs[1]->nodes().front()->op_type() == "Neg");
  // The comparison used by the round-trip test must notice a one-field change.
  back->graph->nodes().front()->set_attribute(Attribute::make_int("i", -6));
  CHECK(diff_models(model, *back) == "graph node 'custom' attr i: scalar or list value differs");

  TempDir dir;
  const std::string path = (dir.path / "hand.onnx").string();
  REQUIRE(export_onnx_file(model, path).is_ok());
  auto from_file = import_onnx_file(path, options);
  REQUIRE(from_file);
  CHECK(diff_models(model, *from_file) == "");
}

TEST_CASE("onnx_io: typed data fields decode to the declared dtype") {
  Pb t = tensor("w", {3}, 3);  // int8 in int32_data
  t.bytes(kInt32Data, [] {
    std::string packed;
    for (uint64_t v : {uint64_t(-1), uint64_t(2), uint64_t(127)}) {
      while (v >= 0x80) {
        packed.push_back(static_cast<char>((v & 0x7f) | 0x80));
        v >>= 7;
      }
      packed.push_back(static_cast<char>(v));
    }
    return packed;
  }());
  ImportOptions options;
  options.run_checker = false;
  auto model = import_onnx_bytes(model_with_initializer(t), "typed.onnx", options);
  REQUIRE_MESSAGE(model, model.status().message());
  const Tensor* w = model->graph->initializer(model->graph->find_value("w"));
  REQUIRE(w);
  CHECK(w->dtype() == DType::Int8);
  CHECK(w->data<int8_t>()[0] == -1);
  CHECK(w->data<int8_t>()[1] == 2);
  CHECK(w->data<int8_t>()[2] == 127);
}

TEST_CASE("onnx_io: malformed tensors are refused with a message naming them") {
  SUBCASE("raw_data size disagrees with dims") {
    Pb t = tensor("w", {3, 4}, 1);
    t.bytes(kRawData, std::string(40, '\0'));
    CHECK(import_error(model_with_initializer(t)) ==
          "bad.onnx: initializer 'w': declared shape [3, 4] needs 48 bytes but raw_data has 40");
  }
  SUBCASE("typed data count disagrees with dims") {
    Pb t = tensor("w", {2}, 6);
    t.bytes(kInt32Data, std::string("\x01", 1));
    CHECK(import_error(model_with_initializer(t)) ==
          "bad.onnx: initializer 'w': declared shape [2] needs 2 values but int32_data has 1");
  }
  SUBCASE("dims overflow") {
    Pb t = tensor("w", {int64_t{1} << 40, int64_t{1} << 40}, 1);
    CHECK(import_error(model_with_initializer(t)) ==
          "bad.onnx: initializer 'w': declared shape [1099511627776, 1099511627776] has more elements than fit in "
          "64 bits");
  }
  SUBCASE("dims beyond the byte limit") {
    Pb t = tensor("w", {int64_t{1} << 40}, 1);
    CHECK(import_error(model_with_initializer(t)) ==
          "bad.onnx: initializer 'w': declared shape [1099511627776] needs 4398046511104 bytes, more than the memory "
          "limit of " + std::to_string(memory_limit()) + " bytes (--max-memory)");
  }
  SUBCASE("negative dim") {
    Pb t = tensor("w", {3, -4}, 1);
    CHECK(import_error(model_with_initializer(t)) ==
          "bad.onnx: initializer 'w': declared shape [3, -4] has a negative dimension");
  }
  SUBCASE("external data") {
    Pb entry;
    entry.bytes(1, "location").bytes(2, "w.bin");
    Pb t = tensor("w", {4}, 1);
    t.message(kExternalData, entry).varint(kDataLocation, 1);
    CHECK(import_error(model_with_initializer(t)) ==
          "bad.onnx: initializer 'w' uses external data, which qflow does not support");
  }
  SUBCASE("unknown dtype") {
    Pb t = tensor("w", {1}, 99);
    CHECK(import_error(model_with_initializer(t)) == "bad.onnx: initializer 'w' has unknown data type 99");
  }
  SUBCASE("unsupported dtype") {
    Pb t = tensor("w", {1}, 14);
    auto model = import_onnx_bytes(model_with_initializer(t), "bad.onnx", ImportOptions{Tensor::kDefaultMaxBytes, false});
    REQUIRE_FALSE(model);
    CHECK(model.status().code() == StatusCode::Unsupported);
    CHECK(model.status().message() == "bad.onnx: initializer 'w' has data type complex64, which qflow does not support");
  }
  SUBCASE("strings missing") {
    Pb t = tensor("w", {1}, 8);
    CHECK(import_error(model_with_initializer(t)) ==
          "bad.onnx: initializer 'w': declared shape [1] needs 1 values but string_data has 0");
  }
}

TEST_CASE("onnx_io: unreadable files are refused with the path in the message") {
  TempDir dir;
  SUBCASE("truncated model") {
    const std::string source = std::string(QFLOW_ONNX_TESTDATA_DIR) + "/node/test_conv_with_strides_padding/model.onnx";
    auto bytes = read_file(source);
    REQUIRE(bytes);
    const std::string path = (dir.path / "half.onnx").string();
    REQUIRE(write_file_atomic(path, std::string_view(*bytes).substr(0, bytes->size() / 2)).is_ok());
    auto model = import_onnx_file(path);
    REQUIRE_FALSE(model);
    CHECK(model.status().code() == StatusCode::InvalidInput);
    CHECK(model.status().message() == "'" + path + "' is not a valid ONNX model (protobuf parse failed)");
  }
  SUBCASE("garbage bytes") {
    const std::string path = (dir.path / "garbage.onnx").string();
    REQUIRE(write_file_atomic(path, std::string(64, '\xff')).is_ok());
    auto model = import_onnx_file(path);
    REQUIRE_FALSE(model);
    CHECK(model.status().message() == "'" + path + "' is not a valid ONNX model (protobuf parse failed)");
  }
  SUBCASE("checker failure names the file") {
    Pb t = tensor("w", {1}, 1);
    t.bytes(kRawData, std::string(4, '\0'));
    std::string bytes = model_with_initializer(t);
    // Same model with an op no schema knows.
    const std::string::size_type at = bytes.find("Identity");
    REQUIRE(at != std::string::npos);
    bytes.replace(at, 8, "Identitx");
    auto model = import_onnx_bytes(bytes, "unknown_op.onnx");
    REQUIRE_FALSE(model);
    CHECK(model.status().code() == StatusCode::InvalidInput);
    CHECK(model.status().message().rfind("unknown_op.onnx: No Op registered for Identitx with domain_version of 17", 0) ==
          0);
  }
  SUBCASE("file over 2 GiB") {
    const std::string path = (dir.path / "huge.onnx").string();
    { std::ofstream create(path); }
    // Sparse on every common filesystem: nothing is written, and the importer must not read it.
    REQUIRE(::truncate(path.c_str(), (int64_t{1} << 31) + 1) == 0);
    auto model = import_onnx_file(path);
    REQUIRE_FALSE(model);
    CHECK(model.status().message() == "'" + path +
                                          "' is 2147483649 bytes; ONNX protobuf files are limited to 2 GiB and qflow "
                                          "does not support external data");
  }
  SUBCASE("missing file") {
    auto model = import_onnx_file((dir.path / "absent.onnx").string());
    REQUIRE_FALSE(model);
    CHECK(model.status().code() == StatusCode::NotFound);
  }
  SUBCASE("tensor .pb file") {
    Pb t = tensor("x", {2}, 7);
    t.bytes(kRawData, std::string("\x05\0\0\0\0\0\0\0\xfd\xff\xff\xff\xff\xff\xff\xff", 16));
    const std::string path = (dir.path / "x.pb").string();
    REQUIRE(write_file_atomic(path, t.str()).is_ok());
    auto tensor_or = load_tensor_pb_file(path);
    REQUIRE_MESSAGE(tensor_or, tensor_or.status().message());
    CHECK(tensor_or->dtype() == DType::Int64);
    CHECK(tensor_or->data<int64_t>()[0] == 5);
    CHECK(tensor_or->data<int64_t>()[1] == -3);
  }
}

TEST_CASE("onnx_io: shape inference fills missing types and refines declared symbolic dimensions") {
  Model model;
  model.opset_imports = {{"", 17}};
  Graph& g = *model.graph;
  g.name = "g";
  Value* x = g.get_or_create_value("x");
  x->type = ValueType{DType::Float32, std::vector<Dim>{{2, "", ""}, {3, "", ""}}, "", ""};
  Value* y = g.get_or_create_value("y");
  Value* z = g.get_or_create_value("z");
  // A declared type with symbolic dimensions: inference fills them.
  z->type = ValueType{DType::Float32, std::vector<Dim>{{std::nullopt, "batch", ""}, {std::nullopt, "", ""}}, "", ""};
  g.inputs = {x};
  g.outputs = {z};
  g.add_node("Relu", {x}, {y}, "relu");
  g.add_node("Neg", {y}, {z}, "neg");
  REQUIRE(check_model(model).is_ok());
  REQUIRE(infer_shapes(model).is_ok());
  REQUIRE(y->type.has_value());
  CHECK(y->type->dtype == DType::Float32);
  CHECK(y->type->static_shape() == Shape{2, 3});
  CHECK(z->type->static_shape() == Shape{2, 3});
  CHECK(g.value_info == std::vector<Value*>{y});

  g.add_node("NoSuchOp", {y}, {g.get_or_create_value("w")}, "bad");
  const Status status = check_model(model);
  CHECK(status.code() == StatusCode::InvalidInput);
  CHECK(status.message().find("No Op registered for NoSuchOp") != std::string::npos);
}

TEST_CASE("onnx_io: nodes out of order are sorted and checker bookkeeping complaints are warnings") {
  Pb init = tensor("w", {1}, 1);
  init.bytes(kRawData, std::string(4, '\0'));
  std::vector<std::string> warnings;
  ImportOptions options;
  options.warning = [&warnings](const std::string& line) { warnings.push_back(line); };

  SUBCASE("a consumer listed before its producer") {
    Pb consumer, producer;
    consumer.bytes(1, "t").bytes(2, "y").bytes(3, "second").bytes(4, "Identity");
    producer.bytes(1, "w").bytes(2, "t").bytes(3, "first").bytes(4, "Identity");
    Pb graph;
    graph.message(1, consumer).message(1, producer).bytes(2, "g").message(5, init).message(12, float1_info("y"));
    auto imported = import_onnx_bytes(model_of(graph), "unsorted.onnx", options);
    REQUIRE_MESSAGE(imported, imported.status().message());
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0] == "unsorted.onnx: nodes were not in topological order; sorted (producers before consumers)");
    CHECK(imported->graph->nodes().front()->name() == "first");
  }
  SUBCASE("a graph output without a type") {
    Pb out_info;
    out_info.bytes(1, "y");
    Pb node;
    node.bytes(1, "w").bytes(2, "y").bytes(4, "Identity");
    Pb graph;
    graph.message(1, node).bytes(2, "g").message(5, init).message(12, out_info);
    auto imported = import_onnx_bytes(model_of(graph), "untyped.onnx", options);
    REQUIRE_MESSAGE(imported, imported.status().message());
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0].rfind("untyped.onnx: the ONNX checker complains, qflow continues: ", 0) == 0);
  }
}

TEST_CASE("onnx_io: a node added after its readers is exported before them") {
  // Passes append the nodes they build; the file must still list producers first.
  Model model;
  model.opset_imports = {{"", 17}};
  Graph& g = *model.graph;
  g.name = "g";
  Value* x = g.get_or_create_value("x");
  x->type = ValueType{DType::Float32, std::vector<Dim>{{2, "", ""}}, "", ""};
  g.inputs = {x};
  Value* t = g.get_or_create_value("t");
  Value* y = g.get_or_create_value("y");
  y->type = x->type;
  g.outputs = {y};
  g.add_node("Relu", {t}, {y}, "second");
  g.add_node("Neg", {x}, {t}, "first");
  REQUIRE(g.nodes().front()->name() == "second");
  auto bytes = export_onnx_bytes(model);
  REQUIRE_MESSAGE(bytes, bytes.status().message());
  std::vector<std::string> warnings;
  ImportOptions options;
  options.warning = [&warnings](const std::string& line) { warnings.push_back(line); };
  auto imported = import_onnx_bytes(*bytes, "appended.onnx", options);
  REQUIRE_MESSAGE(imported, imported.status().message());
  CHECK(warnings.empty());
  CHECK(imported->graph->nodes().front()->name() == "first");
  CHECK(imported->graph->nodes().back()->name() == "second");
}

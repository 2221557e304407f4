// String tensors: elements beside the byte storage, Cast to and from numbers, ONNX
// string_data, and the executor refusing them to ops that only move bytes.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "framework/onnx/onnx_export.h"
#include "framework/onnx/onnx_import.h"
#include "framework/interpreter/executor.h"
#include "test_model_util.h"

namespace qflow {

TEST_CASE("string tensors: copies share, clones do not, bytes stay empty") {
  Tensor words = Tensor::from_strings({2}, {"monday", "tuesday"});
  CHECK(words.dtype() == DType::String);
  CHECK(words.nbytes() == 0);
  Tensor view = words.reshaped({1, 2});
  Tensor copy = words.clone();
  words.strings()[0] = "friday";
  CHECK(view.strings()[0] == "friday");
  CHECK(copy.strings()[0] == "monday");
  CHECK_FALSE(copy.bitwise_equal(words));
  copy.strings()[0] = "friday";
  CHECK(copy.bitwise_equal(words));
}

TEST_CASE("string tensors: Cast writes shortest round-trip text and reads it back") {
  const Tensor x = Tensor::from_vector<float>({4}, {0.9767611f, 0.039187793f, -2.5f, 1e-5f});
  const Tensor text = x.cast(DType::String);
  REQUIRE(text.dtype() == DType::String);
  CHECK(text.strings()[0] == "0.9767611");
  CHECK(text.strings()[1] == "0.039187793");
  CHECK(text.strings()[2] == "-2.5");
  CHECK(text.strings()[3] == "1e-05");
  CHECK(text.cast(DType::Float32).bitwise_equal(x));
  CHECK(Tensor::from_vector<int64_t>({1}, {-42}).cast(DType::String).strings()[0] == "-42");

  const Tensor special = Tensor::from_strings({6}, {"NaN", "INF", "+INF", "-inf", " 3.5 ", "three"});
  const Tensor f = special.cast(DType::Float32);
  CHECK(std::isnan(f.data<float>()[0]));
  CHECK(f.data<float>()[1] == std::numeric_limits<float>::infinity());
  CHECK(f.data<float>()[2] == std::numeric_limits<float>::infinity());
  CHECK(f.data<float>()[3] == -std::numeric_limits<float>::infinity());
  CHECK(f.data<float>()[4] == 3.5f);
  CHECK(std::isnan(f.data<float>()[5]));
  CHECK(special.cast(DType::Int32).data<int32_t>()[4] == 3);
}

TEST_CASE("string tensors: a string initializer survives ONNX export and import") {
  Model model;
  model.opset_imports.push_back({"", 13});
  Graph& g = *model.graph;
  Value* w = g.get_or_create_value("w");
  const Tensor words = Tensor::from_strings({1, 3}, {"a", "", "long text"});
  g.set_initializer(w, words);
  Value* y = g.get_or_create_value("y");
  g.add_node("Identity", {w}, {y}, "same");
  g.outputs = {y};
  Expected<std::string> bytes = export_onnx_bytes(model);
  REQUIRE_MESSAGE(bytes.has_value(), bytes.status().message());
  Expected<Model> back = import_onnx_bytes(*bytes, "strings.onnx");
  REQUIRE_MESSAGE(back.has_value(), back.status().message());
  const Tensor* read = back->graph->initializer(back->graph->find_value("w"));
  REQUIRE(read != nullptr);
  CHECK(read->bitwise_equal(words));
  auto executor = Executor::create(*back);
  REQUIRE(executor.has_value());
  auto out = (*executor)->run({});
  REQUIRE(out.has_value());
  CHECK(out->at("y").bitwise_equal(words));
}

TEST_CASE("string tensors: ops that move bytes refuse them") {
  Model model;
  model.opset_imports.push_back({"", 13});
  Graph& g = *model.graph;
  Value* x = g.get_or_create_value("x");
  ValueType type;
  type.dtype = DType::String;
  type.shape = std::vector<Dim>{test::d(2)};
  x->type = type;
  g.inputs = {x};
  Value* y = g.get_or_create_value("y");
  g.add_node("Concat", {x, x}, {y}, "twice")->set_attribute(Attribute::make_int("axis", 0));
  g.outputs = {y};
  auto executor = Executor::create(model);
  REQUIRE(executor.has_value());
  auto out = (*executor)->run({{"x", Tensor::from_strings({2}, {"a", "b"})}});
  REQUIRE_FALSE(out.has_value());
  CHECK(out.status().code() == StatusCode::Unsupported);
  CHECK(out.status().message() ==
        "Concat 'twice': string tensors are computed only by Cast, CastLike, Identity and StringNormalizer");
}

}  // namespace qflow

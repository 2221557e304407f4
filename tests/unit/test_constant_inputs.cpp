// The import stage's constant-inputs: named inputs become initializers of their declared
// type and shape, and everything else about them is an error naming the input.
#include <doctest/doctest.h>

#include "framework/pipeline/constant_inputs.h"
#include "test_model_util.h"

namespace qflow {

using test::d;
using test::float_type;
using test::sym;

namespace {

// x float [1, 2], sr int64 scalar, window float [3], frames float [N, 3].
Model model_with_inputs() {
  Model model;
  model.opset_imports.push_back({"", 17});
  Graph& g = *model.graph;
  Value* x = g.get_or_create_value("x");
  x->type = float_type({d(1), d(2)});
  Value* sr = g.get_or_create_value("sr");
  ValueType scalar;
  scalar.dtype = DType::Int64;
  scalar.shape = std::vector<Dim>{};
  sr->type = scalar;
  Value* window = g.get_or_create_value("window");
  window->type = float_type({d(3)});
  Value* frames = g.get_or_create_value("frames");
  frames->type = float_type({sym("N"), d(3)});
  g.inputs = {x, sr, window, frames};
  return model;
}

std::string error_of(const std::string& spec) {
  Model model = model_with_inputs();
  return set_constant_inputs(model, spec).message();
}

}  // namespace

TEST_CASE("constant-inputs: inputs become initializers of their declared type and shape") {
  Model model = model_with_inputs();
  REQUIRE(set_constant_inputs(model, "sr=16000;window=0.25,0.5,0.25").is_ok());
  const Graph& g = *model.graph;
  REQUIRE(g.inputs.size() == 2);
  CHECK(g.inputs[0]->name() == "x");
  CHECK(g.inputs[1]->name() == "frames");
  const Tensor* sr = g.initializer(g.find_value("sr"));
  REQUIRE(sr != nullptr);
  CHECK(sr->dtype() == DType::Int64);
  CHECK(sr->shape() == Shape{});
  CHECK(sr->data<int64_t>()[0] == 16000);
  const Tensor* window = g.initializer(g.find_value("window"));
  REQUIRE(window != nullptr);
  CHECK(window->shape() == Shape{3});
  CHECK(window->data<float>()[1] == 0.5f);
}

TEST_CASE("constant-inputs: errors name the input and what is wrong") {
  CHECK(error_of("rate=16000") == "constant-inputs: the model has no input 'rate'");
  CHECK(error_of("sr") == "constant-inputs 'sr': expected NAME=VALUE[,VALUE...]");
  CHECK(error_of("sr=16k") == "constant-inputs 'sr=16k': '16k' is not a finite number");
  CHECK(error_of("sr=1,2") == "constant-inputs: input 'sr' is a scalar, got 2 values");
  CHECK(error_of("window=1,2") == "constant-inputs: input 'window' of shape [3] holds 3 elements, got 2");
  CHECK(error_of("frames=1,2,3") == "constant-inputs: input 'frames' has symbolic dimensions; fix them with input-shape");
  CHECK(error_of("sr=1;sr=2") == "constant-inputs: the model has no input 'sr'");  // already a constant
}

}  // namespace qflow

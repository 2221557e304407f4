// The import stage's input-shape option: fixed input shapes propagate through inference, bad specs are refused.
#include <doctest/doctest.h>

#include <string>

#include "framework/pipeline/input_shapes.h"
#include "framework/onnx/onnx_import.h"

using namespace qflow;

namespace {

const std::string kFashion = std::string(QFLOW_SOURCE_DIR) + "/models/fashion_mnist/fashion_mnist.onnx";

std::string shape_of(const Value* value) {
  if (!value->type || !value->type->shape) return "?";
  std::string text;
  for (const Dim& dim : *value->type->shape) {
    if (!text.empty()) text += ',';
    text += dim.value ? std::to_string(*dim.value) : "?";
  }
  return text;
}

}  // namespace

TEST_CASE("input-shape fixes the batch and every downstream shape follows") {
  Expected<Model> model = import_onnx_file(kFashion);
  REQUIRE(model);
  const Value* input = model->graph->runtime_inputs().front();
  CHECK(shape_of(input) != "2,1,28,28");
  REQUIRE(set_input_shapes(*model, "2x1x28x28"));
  CHECK(shape_of(input) == "2,1,28,28");
  CHECK(shape_of(model->graph->outputs.front()) == "2,10");
  REQUIRE(!model->graph->value_info.empty());
  for (const Value* value : model->graph->value_info) {
    INFO(value->name());
    REQUIRE(value->type);
    REQUIRE(value->type->static_shape());
  }
}

TEST_CASE("input-shape refuses what it cannot apply") {
  Expected<Model> model = import_onnx_file(kFashion);
  REQUIRE(model);
  const std::string name = model->graph->runtime_inputs().front()->name();
  auto message = [&](const std::string& spec) { return std::string(set_input_shapes(*model, spec).message()); };
  CHECK(message("1,1,28") == "input-shape: input '" + name + "' has rank 4, the shape given has rank 3");
  CHECK(message("1,3,28,28") == "input-shape: input '" + name + "' dimension 1 is 1, the shape given says 3");
  CHECK(message("1,1,0,28") == "input-shape '1,1,0,28': '0' is not a positive dimension");
  CHECK(message("nope=1,1,28,28") == "input-shape 'nope=1,1,28,28': the model has no input 'nope'");
  CHECK(message(name + "=1,1,28,28;" + name + "=1,1,28,28") ==
        "input-shape '" + name + "=1,1,28,28;" + name + "=1,1,28,28': input '" + name + "' is given twice");
}

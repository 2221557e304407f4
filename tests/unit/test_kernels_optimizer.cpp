// Training optimizers (ai.onnx.preview.training): the first step, double tensors and malformed inputs.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "tests/unit/node_runner.h"

using namespace qflow;
using qflow::testing::run_single_node;
using qflow::testing::SingleNode;

namespace {

SingleNode optimizer(const char* op, std::vector<Tensor> inputs, std::vector<Attribute> attributes, int outputs) {
  SingleNode spec;
  spec.op_type = op;
  spec.domain = "ai.onnx.preview.training";
  spec.opset = 17;
  spec.inputs = std::move(inputs);
  spec.attributes = std::move(attributes);
  spec.outputs = outputs;
  return spec;
}

}  // namespace

TEST_CASE("Momentum's first step (T = 0) takes the whole gradient, later ones beta of it") {
  const Tensor x = Tensor::from_vector<double>({2}, {1.0, -2.0});
  const Tensor g = Tensor::from_vector<double>({2}, {0.5, 0.25});
  const Tensor v = Tensor::from_vector<double>({2}, {0.1, 0.2});
  const std::vector<Attribute> attrs = {Attribute::make_float("alpha", 0.5f), Attribute::make_float("beta", 0.25f),
                                        Attribute::make_string("mode", "standard"),
                                        Attribute::make_float("norm_coefficient", 0.0f)};
  for (int64_t t : {0, 3}) {
    auto out = run_single_node(
        optimizer("Momentum", {Tensor::scalar<double>(0.1), Tensor::scalar<int64_t>(t), x, g, v}, attrs, 2));
    REQUIRE_MESSAGE(out, out.status().message());
    const double beta = t > 0 ? 0.25 : 1.0;
    for (int64_t i = 0; i < 2; ++i) {
      const double vn = 0.5 * v.data<double>()[i] + beta * g.data<double>()[i];
      CHECK(out->at(1).data<double>()[i] == doctest::Approx(vn));
      CHECK(out->at(0).data<double>()[i] == doctest::Approx(x.data<double>()[i] - 0.1 * vn));
    }
  }
}

TEST_CASE("optimizers refuse lists of unequal length and unknown modes, naming the node") {
  const Tensor x = Tensor::from_vector<float>({1}, {1.0f});
  auto adagrad = run_single_node(optimizer("Adagrad", {Tensor::scalar<float>(0.1f), Tensor::scalar<int64_t>(1), x, x},
                                           {}, 2));
  REQUIRE_FALSE(adagrad);
  CHECK(adagrad.status().message().find("expected R, T and 3 lists of equal length") != std::string::npos);
  auto momentum = run_single_node(optimizer(
      "Momentum", {Tensor::scalar<float>(0.1f), Tensor::scalar<int64_t>(1), x, x, x},
      {Attribute::make_float("alpha", 0.5f), Attribute::make_float("beta", 0.5f), Attribute::make_string("mode", "heavy"),
       Attribute::make_float("norm_coefficient", 0.0f)},
      2));
  REQUIRE_FALSE(momentum);
  CHECK(momentum.status().message().find("mode 'heavy' is neither 'standard' nor 'nesterov'") != std::string::npos);
}

// Running lowered models on .npy files: a stack of frames runs one by one, and --carry feeds
// each run's state output to the next run's state input.
#include <doctest/doctest.h>

#include <cstring>

#include "qflow/npy_runs.h"
#include "framework/data/npy.h"
#include "test_dataset_util.h"

namespace qflow {

namespace {

// A recurrent cell: y = x + state, new_state = y (x and state [1, 2]).
Status accumulate(const std::vector<const std::byte*>& feeds, std::vector<std::vector<float>>& outputs) {
  float x[2], state[2];
  std::memcpy(x, feeds[0], sizeof x);
  std::memcpy(state, feeds[1], sizeof state);
  outputs.assign(2, std::vector<float>{x[0] + state[0], x[1] + state[1]});
  return Status::ok();
}

}  // namespace

TEST_CASE("run_fixed_model_on_npy: --carry feeds each run's output to the next run's input") {
  test::TempDir dir("npy_runs");
  test::write_npy(dir.file("x.npy"), {3, 2}, {1, 2, 3, 4, 5, 6});
  test::write_npy(dir.file("s.npy"), {1, 2}, {10, 20});
  const std::vector<FixedModelIo> inputs = {{"x", {1, 2}, DType::Float32}, {"state", {1, 2}, DType::Float32}};
  const std::vector<FixedModelIo> outputs = {{"y", {1, 2}, DType::Float32}, {"new_state", {1, 2}, DType::Float32}};
  const std::vector<std::string> specs = {"x=" + dir.file("x.npy"), "state=" + dir.file("s.npy")};

  REQUIRE(run_fixed_model_on_npy(inputs, outputs, specs, {"new_state=state"}, dir.file("carried"), "m.bc", accumulate)
              .is_ok());
  Expected<Tensor> carried = read_npy_file(dir.file("carried/y.npy"));
  REQUIRE(carried.has_value());
  CHECK(carried->to_doubles() == std::vector<double>{11, 22, 14, 26, 19, 32});

  // Without --carry every run takes the file's state.
  REQUIRE(run_fixed_model_on_npy(inputs, outputs, specs, {}, dir.file("plain"), "m.bc", accumulate).is_ok());
  Expected<Tensor> plain = read_npy_file(dir.file("plain/y.npy"));
  REQUIRE(plain.has_value());
  CHECK(plain->to_doubles() == std::vector<double>{11, 22, 13, 24, 15, 26});

  CHECK(run_fixed_model_on_npy(inputs, outputs, specs, {"h=state"}, dir.file("bad"), "m.bc", accumulate).message() ==
        "--carry h=state: the model has no output named 'h'");
  CHECK(run_fixed_model_on_npy(inputs, outputs, specs, {"new_state=x"}, dir.file("bad"), "m.bc", accumulate).message() ==
        "--carry new_state=x: input 'x' must be a float input given one value with as many elements as output "
        "'new_state'");
}

}  // namespace qflow

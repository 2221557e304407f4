// Tests of the BPU platform files: the bundled three, every key read, and exact errors with file and line.
#include <doctest/doctest.h>

#include <string>

#include "plugins/backends/bpu/bpu_platform.h"
#include "test_bpu_helpers.h"

namespace qflow {
namespace {

using namespace bpu_test;

TEST_CASE("bpu platform: the bundled files carry dtypes, scales and cost figures") {
  const BpuPlatform b2 = platform("bernoulli2");
  CHECK(b2.dtypes.activation == std::vector<std::string>{"int8"});
  CHECK(b2.dtypes.weight == std::vector<std::string>{"int8"});
  CHECK(b2.input_ranks == std::vector<int64_t>{4});
  CHECK(b2.max_batch == 128);
  CHECK_FALSE(b2.power_of_two_scales);
  CHECK(b2.cost.macs_per_cycle == 2500);
  CHECK(b2.cost.frequency_mhz == 1000.0);
  CHECK(b2.cost.bandwidth_gbps == doctest::Approx(12.8));
  const BpuOpLimits& conv = b2.ops.at("Conv");
  CHECK(conv.min_kernel == 1);
  CHECK(conv.max_kernel == 7);
  CHECK(conv.max_channels == 2048);
  CHECK(conv.dilation_power_of_two);
  CHECK(b2.ops.at("ConvTranspose").strides == std::vector<int64_t>{2, 4});
  CHECK(b2.ops.at("Resize").modes == std::vector<std::string>{"linear", "nearest"});
  CHECK(b2.ops.count("Softmax") == 0);

  const BpuPlatform bayes = platform("bayes");
  CHECK(bayes.ops.at("MatMul").constant_rhs);
  CHECK(bayes.ops.at("Add").dtypes.activation == std::vector<std::string>{"int16", "int8"});
  CHECK(bayes.ops.at("Conv").dtypes.activation.empty());  // the platform-wide int8

  const BpuPlatform nash = platform("nash");
  CHECK(nash.dtypes.activation == std::vector<std::string>{"int16", "int8"});
  CHECK(nash.input_ranks.empty());
  CHECK_FALSE(nash.ops.at("MatMul").constant_rhs);
  for (const char* op : {"Softmax", "LayerNormalization", "Gelu", "com.microsoft::Gelu"}) CHECK(nash.ops.count(op) == 1);
}

// Writes `body` after the required keys and returns the load error ("" when it loads).
std::string load_error(const std::string& body, bool with_header = true) {
  TempDir dir("platform");
  dir.write("p.toml", (with_header ? platform_header("p") : std::string()) + body);
  auto loaded = load_bpu_platform(dir.path.string(), "p");
  if (loaded.has_value()) return "";
  const std::string message = loaded.status().message();
  // Drop the temporary folder so the expectations read as file:line: message.
  const std::string prefix = (dir.path / "p.toml").string();
  return message.rfind(prefix, 0) == 0 ? "p.toml" + message.substr(prefix.size()) : message;
}

TEST_CASE("bpu platform: every key is validated, errors name the file, line and key") {
  // Line numbers: the header is 3 lines (name, dtypes, cost).
  CHECK(load_error("[ops]\nRelu = {}\n").empty());
  CHECK(load_error("colour = 1\n[ops]\n") ==
        "p.toml:4: unknown key 'colour' (allowed: cost, dtypes, input-ranks, max-batch, name, ops, power-of-two-scales, summary)");
  CHECK(load_error("[ops]\nConv = { max-kernal = 7 }\n") ==
        "p.toml:5: unknown key ops.Conv.max-kernal (allowed: constant-rhs, dilation-power-of-two, dtypes, input-ranks, "
        "integer-scales, max-batch, max-channels, max-dilation, max-kernel, max-scale, max-stride, min-kernel, modes, strides)");
  CHECK(load_error("[ops]\nRelu = { max-kernel = 3 }\n") ==
        "p.toml:5: ops.Relu.max-kernel: max-kernel applies only to AveragePool, Conv, ConvTranspose, LpPool, MaxPool");
  CHECK(load_error("[ops]\nAveragePool = { dilation-power-of-two = true }\n") ==
        "p.toml:5: ops.AveragePool.dilation-power-of-two: dilation-power-of-two applies only to Conv, ConvTranspose, MaxPool");
  CHECK(load_error("[ops]\nConv = { modes = [\"nearest\"] }\n") ==
        "p.toml:5: ops.Conv.modes: modes applies only to Resize, Upsample");
  CHECK(load_error("[ops]\nConv = { constant-rhs = true }\n") ==
        "p.toml:5: ops.Conv.constant-rhs: constant-rhs applies only to Gemm, MatMul");
  CHECK(load_error("[ops]\nResize = { modes = [\"bilinear\"] }\n") ==
        "p.toml:5: ops.Resize.modes: unknown value 'bilinear' (allowed: cubic, linear, nearest)");
  CHECK(load_error("[ops]\nResize = { max-scale = -2.0 }\n") == "p.toml:5: ops.Resize.max-scale must be > 0 and finite, got -2.0");
  CHECK(load_error("[ops]\nResize = { integer-scales = 1 }\n") == "p.toml:5: ops.Resize.integer-scales must be true or false");
  CHECK(load_error("[ops]\nConvTranspose = { strides = [2, 2] }\n") == "p.toml:5: ops.ConvTranspose.strides lists 2 twice");
  CHECK(load_error("[ops]\nConvTranspose = { strides = [] }\n") ==
        "p.toml:5: ops.ConvTranspose.strides must be a non-empty array of integers");
  CHECK(load_error("[ops]\nConv = { min-kernel = 0 }\n") == "p.toml:5: ops.Conv.min-kernel must be >= 1, got 0");
  CHECK(load_error("[ops]\nAdd = { dtypes = { activation = [\"int4\"] } }\n") ==
        "p.toml:5: ops.Add.dtypes.activation: unknown value 'int4' (allowed: float16, float32, int16, int32, int8, uint16, uint8)");
  CHECK(load_error("[ops]\nAdd = { dtypes = { output = [\"int8\"] } }\n") ==
        "p.toml:5: unknown key ops.Add.dtypes.output (allowed: activation, weight)");
  CHECK(load_error("power-of-two-scales = \"yes\"\n[ops]\n") == "p.toml:4: power-of-two-scales must be true or false");
  CHECK(load_error("input-ranks = [0]\n[ops]\n") == "p.toml:4: input-ranks element must be >= 1, got 0");
  CHECK(load_error("[ops]\n\"\" = {}\n") == "p.toml:5: ops: an op type must not be empty");

  // Required keys and the [cost] table.
  CHECK(load_error("name = \"p\"\n[ops]\n", false) == "p.toml:1: missing key 'dtypes'");
  CHECK(load_error("name = \"p\"\ndtypes = { activation = [\"int8\"], weight = [\"int8\"] }\n[ops]\n", false) ==
        "p.toml:1: missing table 'cost'");
  CHECK(load_error("name = \"p\"\ndtypes = { activation = [\"int8\"] }\n[ops]\n", false) ==
        "p.toml:2: dtypes must list both activation and weight types");
  CHECK(load_error("name = \"p\"\ndtypes = { activation = [\"int8\"], weight = [\"int8\"] }\n[cost]\nmacs-per-cycle = 1\n"
                   "frequency-mhz = 1\n[ops]\n",
                   false) == "p.toml:3: cost: missing key 'bandwidth-gbps'");
  CHECK(load_error("name = \"p\"\ndtypes = { activation = [\"int8\"], weight = [\"int8\"] }\n[cost]\nmacs-per-cycle = 1.5\n"
                   "frequency-mhz = 1\nbandwidth-gbps = 1\n[ops]\n",
                   false) == "p.toml:4: cost.macs-per-cycle must be an integer");
  CHECK(load_error("name = \"p\"\ndtypes = { activation = [\"int8\"], weight = [\"int8\"] }\n[cost]\nmacs-per-cycle = 1\n"
                   "frequency-mhz = 1\nbandwidth-gbps = 1\nwatts = 5\n[ops]\n",
                   false) == "p.toml:7: unknown key cost.watts (allowed: bandwidth-gbps, frequency-mhz, macs-per-cycle)");
}

TEST_CASE("bpu platform: a user adds a platform by adding a file") {
  TempDir dir("user");
  dir.write("mine.toml", platform_header("mine") + "[ops]\nRelu = {}\n\"com.microsoft::Gelu\" = {}\n");
  CHECK(list_bpu_platforms(dir.path.string()) == std::vector<std::string>{"mine"});
  auto mine = load_bpu_platform(dir.path.string(), "mine");
  REQUIRE_MESSAGE(mine.has_value(), mine.status().message());
  CHECK(mine->ops.size() == 2);
  CHECK(mine->ops.count("com.microsoft::Gelu") == 1);
}

TEST_CASE("bpu platform: an op qflow does not compute is refused, with the closest names") {
  TempDir dir("ops");
  dir.write("typo.toml", platform_header("typo") + "[ops]\nRelu = {}\nConv2D = {}\n");
  auto typo = load_bpu_platform(dir.path.string(), "typo");
  REQUIRE_FALSE(typo.has_value());
  CHECK(typo.status().message().ends_with("typo.toml:6: ops: unknown operator 'Conv2D' (did you mean Conv?)"));
  dir.write("foreign.toml", platform_header("foreign") + "[ops]\n\"com.example::Foo\" = {}\n");
  auto foreign = load_bpu_platform(dir.path.string(), "foreign");
  REQUIRE_FALSE(foreign.has_value());
  CHECK(foreign.status().message().find("unknown operator 'com.example::Foo' (operators are ONNX op types") !=
        std::string::npos);
}

TEST_CASE("bpu platform: the search path takes the first folder holding the file, then the built-in one") {
  TempDir first("first"), second("second"), builtin("builtin");
  first.write("mine.toml", platform_header("mine") + "[ops]\nRelu = {}\n");
  second.write("mine.toml", platform_header("mine") + "[ops]\nRelu = {}\nSigmoid = {}\n");
  second.write("other.toml", platform_header("other") + "[ops]\nTanh = {}\n");
  builtin.write("nash.toml", platform_header("nash") + "[ops]\nAdd = {}\n");
  const std::vector<std::string> path = {first.path.string(), second.path.string()};
  auto mine = find_bpu_platform(path, builtin.path.string(), "mine");
  REQUIRE_MESSAGE(mine.has_value(), mine.status().message());
  CHECK(mine->ops.size() == 1);  // the first folder's
  auto other = find_bpu_platform(path, builtin.path.string(), "other");
  REQUIRE(other.has_value());
  CHECK(other->ops.count("Tanh") == 1);
  auto nash = find_bpu_platform(path, builtin.path.string(), "nash");
  REQUIRE(nash.has_value());
  CHECK(nash->ops.count("Add") == 1);
  auto missing = find_bpu_platform(path, builtin.path.string(), "minee");
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.status().message() == "bpu platform 'minee' not found: no minee.toml in " + first.path.string() + ", " +
                                          second.path.string() +
                                          " or the built-in platforms (available: mine, nash, other); did you mean mine?");
}

}  // namespace
}  // namespace qflow

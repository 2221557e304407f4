// Unit tests for the [quantization] table: parsing, priorities, --set and canonical text.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "framework/pipeline/pipeline.h"

namespace qflow {

namespace {

constexpr const char* kStages = R"(
[[stage]]
id = "import"
use = "import-onnx"
options = { path = "m.onnx" }
)";

Expected<Pipeline> parsed(const std::string& quantization, const std::vector<std::string>& sets = {}) {
  return parse_pipeline(quantization + kStages, "p.toml", sets);
}

std::string error_of(const std::string& quantization, const std::vector<std::string>& sets = {}) {
  Expected<Pipeline> pipeline = parsed(quantization, sets);
  return pipeline ? std::string() : pipeline.status().message();
}

}  // namespace

TEST_CASE("quantization: node name > op type > whole model > defaults") {
  Expected<Pipeline> pipeline = parsed(R"([quantization]
activation-dtype = "int16"
symmetric = false

[quantization.op-type.Conv]
activation-dtype = "int8"
per-channel = false

[quantization.node."conv.1/out"]
weight-dtype = "int16"
quantize = false
)");
  REQUIRE_MESSAGE(pipeline.has_value(), pipeline.status().message());
  const QuantConfig& config = pipeline->quantization;

  const QuantSpec other = config.resolve("relu", "Relu");
  CHECK(other.activation_dtype == DType::Int16);
  CHECK_FALSE(other.symmetric);
  CHECK(other.per_channel);
  CHECK(other.quantize);

  const QuantSpec conv = config.resolve("conv0", "Conv");
  CHECK(conv.activation_dtype == DType::Int8);  // op type beats the model
  CHECK_FALSE(conv.symmetric);                  // inherited from the model
  CHECK_FALSE(conv.per_channel);
  CHECK(conv.weight_dtype == DType::Int8);

  const QuantSpec named = config.resolve("conv.1/out", "Conv");
  CHECK(named.activation_dtype == DType::Int8);   // from the op type
  CHECK(named.weight_dtype == DType::Int16);      // the node's own setting wins
  CHECK_FALSE(named.quantize);

  const QuantSpec defaults = QuantConfig{}.resolve("x", "Add");
  CHECK(defaults.activation_dtype == DType::Int8);
  CHECK(defaults.symmetric);
  CHECK(defaults.weight_dtype == DType::Int8);
  CHECK(defaults.per_channel);
  CHECK_FALSE(defaults.power_of_two);
}

TEST_CASE("quantization: errors name the key, its place and the allowed values") {
  CHECK(error_of("[quantization]\nactivation-dtype = \"int4\"\n") ==
        "p.toml:2:20: in [quantization]: 'activation-dtype' must be one of int8, uint8, int16, uint16, got 'int4'");
  CHECK(error_of("[quantization]\nweight-dtype = \"uint8\"\n") ==
        "p.toml:2:16: in [quantization]: 'weight-dtype' must be one of int8, int16, got 'uint8'");
  CHECK(error_of("[quantization]\nsymetric = true\n") ==
        "p.toml:2:12: in [quantization]: unknown quantization key 'symetric' (allowed: activation-bits, activation-dtype, "
        "per-channel, power-of-two, quantize, reduce-range, symmetric, weight-bits, weight-dtype)");
  CHECK(error_of("[quantization.op-type.Conv]\nper-channel = 1\n") ==
        "p.toml:2:15: in [quantization.op-type.Conv]: 'per-channel' must be true or false");
  CHECK(error_of("[quantization]\nnode = 3\n") == "p.toml:2:8: 'quantization.node' must be a table of tables");
  CHECK(error_of("quantization = 3\n") == "p.toml:1:16: 'quantization' must be a table (write [quantization])");
}

TEST_CASE("quantization: --set quantization.KEY=VALUE overrides whole-model keys") {
  Expected<Pipeline> pipeline =
      parsed("[quantization]\nactivation-dtype = \"int8\"\n", {"quantization.activation-dtype=int16", "quantization.per-channel=false"});
  REQUIRE_MESSAGE(pipeline.has_value(), pipeline.status().message());
  CHECK(pipeline->quantization.resolve("n", "Conv").activation_dtype == DType::Int16);
  CHECK_FALSE(pipeline->quantization.resolve("n", "Conv").per_channel);
  CHECK(error_of("", {"quantization.per-channel=maybe"}) ==
        "--set quantization.per-channel=maybe: expects bool (true or false), got 'maybe'");
  CHECK(error_of("", {"quantization.bits=4"}).rfind("--set quantization.bits=4: unknown quantization key 'bits'", 0) == 0);
}

TEST_CASE("quantization: activation-bits from the table, per op type and node, and from --set") {
  Expected<Pipeline> pipeline = parsed(R"([quantization]
activation-bits = 6
[quantization.op-type.Sigmoid]
activation-dtype = "uint8"
activation-bits = 4
[quantization.node."fc"]
activation-dtype = "int16"
)",
                                       {"quantization.activation-bits=4"});
  REQUIRE_MESSAGE(pipeline.has_value(), pipeline.status().message());
  const QuantSpec conv = pipeline->quantization.resolve("c", "Conv");
  CHECK(conv.activation_dtype == DType::Int8);
  CHECK(conv.activation_bits == 4);  // --set wins over the file's whole-model 6
  const QuantSpec sigmoid = pipeline->quantization.resolve("s", "Sigmoid");
  CHECK(sigmoid.activation_dtype == DType::UInt8);
  CHECK(sigmoid.activation_bits == 4);
  const QuantSpec fc = pipeline->quantization.resolve("fc", "Gemm");
  CHECK(fc.activation_dtype == DType::Int16);
  CHECK(fc.activation_bits == 0);
  CHECK(error_of("[quantization]\nactivation-bits = 1\n") ==
        "p.toml:2:19: in [quantization]: 'activation-bits' must be an integer from 2 to 16");
  CHECK(error_of("", {"quantization.activation-bits=four"}).rfind("--set quantization.activation-bits=four:", 0) == 0);
}

TEST_CASE("quantization: the canonical text parses back to the same text") {
  Expected<Pipeline> pipeline = parsed(R"([quantization]
power-of-two = true
[quantization.node."a b"]
activation-dtype = "uint8"
[quantization.op-type.Sigmoid]
activation-dtype = "int16"
)");
  REQUIRE_MESSAGE(pipeline.has_value(), pipeline.status().message());
  ComponentCatalog catalog({});
  REQUIRE(resolve_pipeline(*pipeline, catalog).is_ok());
  const std::string text = format_pipeline(*pipeline);
  CHECK(text.find("[quantization]\npower-of-two = true\n[quantization.op-type.Sigmoid]\nactivation-dtype = \"int16\"\n"
                  "[quantization.node.\"a b\"]\nactivation-dtype = \"uint8\"\n") != std::string::npos);
  Expected<Pipeline> again = parse_pipeline(text, "p.toml");
  REQUIRE_MESSAGE(again.has_value(), again.status().message());
  REQUIRE(resolve_pipeline(*again, catalog).is_ok());
  CHECK(format_pipeline(*again) == text);
}

}  // namespace qflow

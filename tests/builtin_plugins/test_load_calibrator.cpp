// Tests of the load calibrator: calibration tables (round trip and every validation error) and
// scales taken from an in-memory QDQ model.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "qflow/core/json_writer.h"
#include "plugins/calibrators/load_calibrator.h"
#include "tests/builtin_plugins/pass_test_graphs.h"

namespace qflow {
namespace {

using namespace pass_test;

// The calibrator stage's table layout, plus the "min"/"max" keys newer writers add.
std::string table_json(const QuantTable& table) {
  JsonWriter json;
  json.begin_object();
  json.key("tensors").begin_object();
  for (const auto& [name, q] : table) {
    json.key(name).begin_object();
    json.field("axis", q.axis);
    json.field("dtype", dtype_name(q.dtype));
    json.field("max", 3.5);
    json.field("method", q.method);
    json.field("min", -1.25);
    json.key("scale").begin_array(true);
    for (float s : q.scale) json.value(s);
    json.end_array();
    json.field("threshold", q.threshold);
    json.key("zero_point").begin_array(true);
    for (int64_t z : q.zero_point) json.value(z);
    json.end_array();
    json.end_object();
  }
  json.end_object();
  json.end_object();
  auto text = json.finish();
  REQUIRE(text.has_value());
  return *text;
}

QuantParams params(DType dtype, std::vector<float> scale, std::vector<int64_t> zp, int64_t axis, double threshold,
                   std::string method) {
  QuantParams p;
  p.dtype = dtype;
  p.scale = std::move(scale);
  p.zero_point = std::move(zp);
  p.axis = axis;
  p.threshold = threshold;
  p.method = std::move(method);
  return p;
}

std::string table_error(const std::string& entry) {
  auto parsed = LoadCalibrator::parse_table("{\"tensors\": {\"conv1\": " + entry + "}}", "t.json");
  REQUIRE_FALSE(parsed.has_value());
  CHECK(parsed.status().code() == StatusCode::InvalidInput);
  return parsed.status().message();
}

constexpr const char* kGood =
    R"({"axis": -1, "dtype": "int8", "method": "max", "scale": [0.5], "threshold": 63.5, "zero_point": [0]})";

std::string with(const std::string& key, const std::string& value) {
  // Replaces one field of kGood; an empty value removes it.
  std::string entry = kGood;
  const std::size_t at = entry.find("\"" + key + "\"");
  std::size_t end = entry.find(", \"", at);
  if (end == std::string::npos) end = entry.size() - 1;
  const std::string replacement = value.empty() ? std::string() : "\"" + key + "\": " + value;
  std::string out = entry.substr(0, at) + replacement + entry.substr(end);
  if (value.empty()) {
    if (out.find("{, ") == 0) out.replace(0, 3, "{");
    const std::size_t dangling = out.find(", }");
    if (dangling != std::string::npos) out.replace(dangling, 3, "}");
    else if (out.find(", , ") != std::string::npos) out.replace(out.find(", , "), 4, ", ");
  }
  return out;
}

// The load calibrator's options with `path` at its default (empty: the QDQ model is read).
Options no_path() {
  Options options;
  options.set("path", std::string());
  return options;
}

TEST_CASE("load: a table as the calibrator stage writes it reads back with method 'load'") {
  const QuantTable table = {
      {"act", params(DType::Int8, {0.0157480314f}, {0}, -1, 2.0, "max")},
      {"u8", params(DType::UInt8, {0.1f}, {128}, -1, 12.8, "kl")},
      {"weights", params(DType::Int16, {0.5f, 1e-30f, 3.0f}, {0, -7, 32767}, 0, 0.0, "mse")},
      {"w16", params(DType::UInt16, {2.0f}, {65535}, -1, 131070.0, "percentile")},
  };
  auto parsed = LoadCalibrator::parse_table(table_json(table), "table.json");
  REQUIRE(parsed.has_value());
  REQUIRE(parsed->size() == table.size());
  for (const auto& [name, expected] : table) {
    const QuantParams& got = parsed->at(name);
    CHECK(got.dtype == expected.dtype);
    CHECK(got.scale == expected.scale);
    CHECK(got.zero_point == expected.zero_point);
    CHECK(got.axis == expected.axis);
    CHECK(got.threshold == expected.threshold);
    CHECK(got.method == "load");
  }
  // Hand-written text with hand values.
  auto hand = LoadCalibrator::parse_table(
      R"({"tensors": {"x": {"axis": -1, "dtype": "uint8", "method": "whatever", "scale": [0.25],
          "threshold": 32, "zero_point": [3], "extra": {"ignored": true}}}, "version": 2})",
      "hand.json");
  REQUIRE(hand.has_value());
  const QuantParams& x = hand->at("x");
  CHECK(x.dtype == DType::UInt8);
  CHECK(x.scale == std::vector<float>{0.25f});
  CHECK(x.zero_point == std::vector<int64_t>{3});
  CHECK(x.threshold == 32.0);
  CHECK(x.method == "load");
  CHECK(LoadCalibrator::parse_table(R"({"tensors": {}})", "e.json")->empty());
}

TEST_CASE("load: every invalid table field is an error naming file, tensor and field") {
  const std::string prefix = "load calibrator: t.json: tensor 'conv1': ";
  CHECK(table_error(with("axis", "")) == prefix + "field 'axis' is missing");
  CHECK(table_error(with("axis", "0.5")) == prefix + "field 'axis': expected an integer >= -1");
  CHECK(table_error(with("axis", "-2")) == prefix + "field 'axis': expected an integer >= -1");
  CHECK(table_error(with("dtype", "\"float\"")) ==
        prefix + "field 'dtype': 'float' is not a quantized type (int8, uint8, int16, uint16)");
  CHECK(table_error(with("dtype", "8")) == prefix + "field 'dtype': expected a string");
  CHECK(table_error(with("method", "")) == prefix + "field 'method' is missing");
  CHECK(table_error(with("method", "null")) == prefix + "field 'method': expected a string");
  CHECK(table_error(with("scale", "[]")) == prefix + "field 'scale': expected a non-empty list of numbers");
  CHECK(table_error(with("scale", "0.5")) == prefix + "field 'scale': expected a non-empty list of numbers");
  CHECK(table_error(with("scale", "[0]")) ==
        prefix + "field 'scale': element 0 is 0, expected a finite positive normal float32");
  CHECK(table_error(with("scale", "[-0.5]")).find("element 0 is -0.5") != std::string::npos);
  CHECK(table_error(with("scale", "[1e-40]")).find("element 0 is 1e-40") != std::string::npos);  // float subnormal
  CHECK(table_error(with("scale", "[1e39]")).find("element 0 is 1e+39") != std::string::npos);   // float overflow
  CHECK(table_error(with("scale", "[\"0.5\"]")).find("element 0 is not a number") != std::string::npos);
  CHECK(table_error(with("scale", "[0.5, 0.25]")) ==
        prefix + "field 'scale': 2 values for a per-tensor entry (axis -1), expected 1");
  CHECK(table_error(with("threshold", "")) == prefix + "field 'threshold' is missing");
  CHECK(table_error(with("threshold", "-1")) == prefix + "field 'threshold': expected a finite number >= 0");
  CHECK(table_error(with("threshold", "null")) == prefix + "field 'threshold': expected a finite number >= 0");
  CHECK(table_error(with("zero_point", "[128]")) ==
        prefix + "field 'zero_point': element 0 is 128, expected an integer in [-128, 127] for int8");
  CHECK(table_error(with("zero_point", "[1.0]")).find("element 0 is 1, expected an integer") != std::string::npos);
  CHECK(table_error(with("zero_point", "[0, 0]")) ==
        prefix + "field 'zero_point': 2 values for 1 scales, expected as many");
  CHECK(table_error(with("zero_point", "{}")) == prefix + "field 'zero_point': expected a list of integers");
  CHECK(table_error("[1]") == prefix + "expected an object");
  // Per-axis entries take one zero point per scale.
  CHECK(table_error(R"({"axis": 0, "dtype": "int8", "method": "m", "scale": [1, 2], "threshold": 0, "zero_point": [0]})") ==
        prefix + "field 'zero_point': 1 values for 2 scales, expected as many");
  // The document itself.
  auto no_tensors = LoadCalibrator::parse_table(R"({"tables": {}})", "t.json");
  CHECK(no_tensors.status().message() == "load calibrator: t.json: expected an object with a \"tensors\" object");
  auto syntax = LoadCalibrator::parse_table("{\"tensors\": {\n  \"a\": 1,\n}}", "t.json");
  CHECK(syntax.status().message() ==
        "load calibrator: t.json:3:1: syntax error while parsing object key - unexpected '}'; expected string literal");
  auto duplicate = LoadCalibrator::parse_table(R"({"tensors": {"a": {}, "a": {}}})", "t.json");
  CHECK(duplicate.status().message().find("second 'a'") != std::string::npos);
}

TEST_CASE("load: the path option reads a file; missing files and other extensions are errors") {
  const auto dir = std::filesystem::temp_directory_path() / ("qflow_load_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "table.json").string();
  {
    std::ofstream out(path, std::ios::binary);
    out << table_json({{"t", params(DType::Int8, {0.125f}, {-3}, -1, 16.0, "max")}});
  }
  Options options;
  options.set("path", path);
  auto calibrator = LoadCalibrator::create(options);
  REQUIRE(calibrator.has_value());
  auto table = calibrator.value()->calibrate(CalibrationRequest{});
  REQUIRE(table.has_value());
  CHECK(table->at("t").scale == std::vector<float>{0.125f});
  CHECK(table->at("t").zero_point == std::vector<int64_t>{-3});

  Options missing;
  missing.set("path", (dir / "nope.json").string());
  auto absent = LoadCalibrator::create(missing).value()->calibrate(CalibrationRequest{});
  CHECK(absent.status().code() == StatusCode::NotFound);
  CHECK(absent.status().message().find("nope.json") != std::string::npos);
  Options csv;
  csv.set("path", std::string("table.csv"));
  CHECK(LoadCalibrator::create(csv).status().code() == StatusCode::InvalidInput);
  std::filesystem::remove_all(dir);
  CHECK(LoadCalibrator::info().name == "load");
  CHECK(std::get<std::string>(LoadCalibrator::info().options.at(0).default_value).empty());
}

Value* int_initializer(Graph& g, const std::string& name, DType dtype, const Shape& shape, const std::vector<int64_t>& v) {
  Value* value = g.get_or_create_value(name);
  g.set_initializer(value, Tensor::from_vector<int64_t>(shape, v).cast(dtype));
  return value;
}

// x -> Q/DQ (uint8, zp 128) -> Conv(W from Q/DQ on a float initializer) -> Relu -> Q/DQ (int8) -> y
Model qdq_model() {
  Model model = empty_model(13, {1, 1, 2, 2});
  Graph& g = *model.graph;
  g.name = "qat";
  Value* x = g.inputs[0];
  Value* x_scale = initializer(g, "x_scale", {}, {0.05f});
  Value* x_zp = int_initializer(g, "x_zp", DType::UInt8, {}, {128});
  Value* xq = g.get_or_create_value("xq");
  g.add_node("QuantizeLinear", {x, x_scale, x_zp}, {xq}, "x_q");
  Value* xdq = g.get_or_create_value("xdq");
  g.add_node("DequantizeLinear", {xq, x_scale, x_zp}, {xdq}, "x_dq");
  Value* w = initializer(g, "w", {1, 1, 1, 1}, {0.5f});
  Value* w_scale = initializer(g, "w_scale", {}, {0.01f});
  Value* w_zp = int_initializer(g, "w_zp", DType::Int8, {}, {0});
  Value* wq = g.get_or_create_value("wq");
  g.add_node("QuantizeLinear", {w, w_scale, w_zp}, {wq}, "w_q");
  Value* wdq = g.get_or_create_value("wdq");
  g.add_node("DequantizeLinear", {wq, w_scale, w_zp}, {wdq}, "w_dq");
  Value* conv = op(g, "Conv", {xdq, wdq}, "conv");
  Value* relu = op(g, "Relu", {conv}, "relu");
  Value* r_scale = g.get_or_create_value("r_scale");
  g.add_node("Constant", {}, {r_scale}, "r_scale_node")->set_attribute(Attribute::make_tensor("value", Tensor::scalar<float>(0.25f)));
  Value* r_zp = int_initializer(g, "r_zp", DType::Int8, {}, {-10});
  Value* rq = g.get_or_create_value("rq");
  g.add_node("QuantizeLinear", {relu, r_scale, r_zp}, {rq}, "r_q");
  Value* y = g.get_or_create_value("y");
  g.add_node("DequantizeLinear", {rq, r_scale, r_zp}, {y}, "r_dq");
  set_output(g, y, {1, 1, 2, 2});
  return model;
}

TEST_CASE("load: activation scales of a QDQ model; weight QDQ skipped") {
  const Model model = qdq_model();
  auto calibrator = LoadCalibrator::create(no_path());
  REQUIRE(calibrator.has_value());
  CalibrationRequest request;
  request.model = &model;
  auto table = calibrator.value()->calibrate(request);
  REQUIRE(table.has_value());
  REQUIRE(table->size() == 2);
  CHECK(table->count("w") == 0);
  const QuantParams& x = table->at("x");
  CHECK(x.dtype == DType::UInt8);
  CHECK(x.scale == std::vector<float>{0.05f});
  CHECK(x.zero_point == std::vector<int64_t>{128});
  CHECK(x.axis == -1);
  CHECK(x.threshold == static_cast<double>(0.05f) * 128);  // max(|0 - 128|, |255 - 128|)
  CHECK(x.method == "load");
  // The Relu output reaches the graph output `y` through its QDQ pair: strip-qdq gives the
  // float tensor that name, so the table keys it by `y`.
  CHECK(table->count("relu") == 0);
  const QuantParams& r = table->at("y");
  CHECK(r.dtype == DType::Int8);
  CHECK(r.scale == std::vector<float>{0.25f});
  CHECK(r.zero_point == std::vector<int64_t>{-10});
  CHECK(r.threshold == 0.25 * 137);  // max(|-128 + 10|, |127 + 10|)
}

TEST_CASE("load: QDQ models without activation QuantizeLinear, or with bad parameters, are errors") {
  Model plain = empty_model(13, {1, 4});
  plain.graph->name = "x";
  set_output(*plain.graph, op(*plain.graph, "Relu", {plain.graph->inputs[0]}, "y"), {1, 4});
  CHECK(LoadCalibrator::from_qdq_model(plain).status().message() ==
        "load calibrator: model 'x' holds no QuantizeLinear nodes and no 'path' was given");
  CHECK(LoadCalibrator::create(no_path()).value()->calibrate(CalibrationRequest{}).status().code() ==
        StatusCode::InvalidInput);

  Model weights_only = qdq_model();
  for (const char* name : {"x_q", "r_q"})
    for (const auto& n : weights_only.graph->nodes())
      if (n->name() == name) {
        weights_only.graph->remove_node(n.get());
        break;
      }
  CHECK(LoadCalibrator::from_qdq_model(weights_only).status().message().find("quantizes only constants") !=
        std::string::npos);

  Model zero_scale = qdq_model();
  zero_scale.graph->set_initializer(zero_scale.graph->find_value("x_scale"), Tensor::scalar<float>(0.0f));
  const Status st = LoadCalibrator::from_qdq_model(zero_scale).status();
  CHECK(st.message().find("QuantizeLinear 'x_q' on 'x': scale 0") != std::string::npos);

  Model per_axis = qdq_model();
  per_axis.graph->set_initializer(per_axis.graph->find_value("x_scale"), Tensor::from_vector<float>({2}, {0.1f, 0.2f}));
  CHECK(LoadCalibrator::from_qdq_model(per_axis).status().code() == StatusCode::Unsupported);

  Model fed_scale = qdq_model();
  fed_scale.graph->inputs.push_back(fed_scale.graph->find_value("x_scale"));  // a caller may override it
  CHECK(LoadCalibrator::from_qdq_model(fed_scale).status().message().find("not a constant") != std::string::npos);

  Model no_zp = qdq_model();
  for (const auto& n : no_zp.graph->nodes())
    if (n->name() == "x_q") n->set_inputs({n->input(0), n->input(1)});
  auto defaulted = LoadCalibrator::from_qdq_model(no_zp);
  REQUIRE(defaulted.has_value());
  CHECK(defaulted->at("x").dtype == DType::UInt8);
  CHECK(defaulted->at("x").zero_point == std::vector<int64_t>{0});
  CHECK(defaulted->at("x").threshold == static_cast<double>(0.05f) * 255);

  // A second QuantizeLinear on the same tensor must agree.
  Model twice = qdq_model();
  Graph& g = *twice.graph;
  Value* other_scale = initializer(g, "other_scale", {}, {0.5f});
  g.add_node("QuantizeLinear", {g.find_value("x"), other_scale, g.find_value("x_zp")}, {g.get_or_create_value("xq2")}, "x_q2");
  CHECK(LoadCalibrator::from_qdq_model(twice).status().message().find("'x_q' and 'x_q2' with different parameters") !=
        std::string::npos);
}

}  // namespace
}  // namespace qflow

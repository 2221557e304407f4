// Tests of the top-1/top-5 metrics and their .npy label reader, on hand-written files.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "plugins/metrics/label_file.h"
#include "plugins/metrics/top_k_metric.h"

namespace qflow {
namespace {

// A version-1 .npy with `descr`, `shape` ("(3,)") and raw little-endian `body`.
std::string write_npy(const std::string& name, const std::string& descr, const std::string& shape,
                      const std::string& body) {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string bytes = "\x93NUMPY";
  bytes += '\x01';
  bytes += '\x00';
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  bytes += header + body;
  const std::string path = (std::filesystem::temp_directory_path() / ("qflow_top_k_" + name + ".npy")).string();
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::string int64_body(const std::vector<int64_t>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(int64_t));
}

Tensor scores(const std::vector<float>& values, Shape shape) {
  Tensor t = Tensor::make(DType::Float32, std::move(shape)).value();
  for (std::size_t i = 0; i < values.size(); ++i) t.data<float>()[i] = values[i];
  return t;
}

Expected<std::unique_ptr<Metric>> make(int64_t k, const std::string& labels, int64_t output = 0) {
  Options options;
  options.set("labels", labels);
  options.set("output", output);
  return TopKMetric::create(k, options);
}

TEST_CASE("labels: int64 [N], uint8 [N,1] and int32 files read the same values") {
  const auto a = read_label_file(write_npy("i8", "<i8", "(3,)", int64_body({2, 0, 9})));
  REQUIRE(a.has_value());
  CHECK(*a == std::vector<int64_t>{2, 0, 9});
  const auto b = read_label_file(write_npy("u1", "|u1", "(3, 1)", std::string("\x02\x00\x09", 3)));
  REQUIRE(b.has_value());
  CHECK(*b == std::vector<int64_t>{2, 0, 9});
  const int32_t raw[] = {7, -1};
  const auto c = read_label_file(write_npy("i4", "<i4", "(2,)", std::string(reinterpret_cast<const char*>(raw), 8)));
  REQUIRE(c.has_value());
  CHECK(*c == std::vector<int64_t>{7, -1});
}

TEST_CASE("labels: missing, float, 2-D, truncated and non-.npy files are refused with the reason") {
  auto missing = read_label_file("/nonexistent/labels.npy");
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.status().message().find("cannot open") != std::string::npos);
  auto floats = read_label_file(write_npy("f4", "<f4", "(1,)", std::string(4, '\0')));
  REQUIRE_FALSE(floats.has_value());
  CHECK(floats.status().message().find("'<f4' is not a little-endian integer type") != std::string::npos);
  auto matrix = read_label_file(write_npy("m", "<i8", "(2, 3)", int64_body({0, 0, 0, 0, 0, 0})));
  REQUIRE_FALSE(matrix.has_value());
  CHECK(matrix.status().message().find("shape (2,3) is not [N] or [N, 1]") != std::string::npos);
  auto truncated = read_label_file(write_npy("t", "<i8", "(4,)", int64_body({1, 2})));
  REQUIRE_FALSE(truncated.has_value());
  CHECK(truncated.status().message().find("truncated: 4 labels need 32 bytes, the file holds 16") != std::string::npos);
  const std::string text = (std::filesystem::temp_directory_path() / "qflow_top_k_text.npy").string();
  std::ofstream(text) << "0 1 2\n";
  auto not_npy = read_label_file(text);
  REQUIRE_FALSE(not_npy.has_value());
  CHECK(not_npy.status().message().find("not a .npy file") != std::string::npos);
}

TEST_CASE("top1: the fraction of samples whose first argmax is the label; ties go to the lower class") {
  const std::string labels = write_npy("top1", "<i8", "(4,)", int64_body({1, 0, 2, 2}));
  auto metric = make(1, labels);
  REQUIRE(metric.has_value());
  std::vector<SampleOutputs> outputs = {
      {scores({0.1f, 0.9f, 0.0f}, {1, 3})},   // argmax 1 == label 1
      {scores({0.2f, 0.5f, 0.3f}, {1, 3})},   // argmax 1 != label 0
      {scores({0.4f, 0.4f, 0.4f}, {3})},      // tie: class 0 first, label 2 misses
      {scores({-1.0f, -2.0f, 0.0f}, {1, 3})}  // argmax 2 == label 2
  };
  MetricInput input;
  input.outputs = &outputs;
  auto value = (*metric)->evaluate(input);
  REQUIRE(value.has_value());
  CHECK(*value == doctest::Approx(0.5));
  // The samples start at index 2 of the labels file: labels 2, 2.
  std::vector<SampleOutputs> tail(outputs.begin() + 2, outputs.end());
  input.outputs = &tail;
  input.first_sample = 2;
  CHECK((*metric)->evaluate(input).value() == doctest::Approx(0.5));
}

TEST_CASE("top5: a label ranked fifth counts, sixth does not") {
  const std::string labels = write_npy("top5", "<i8", "(2,)", int64_body({4, 5}));
  auto metric = make(5, labels);
  REQUIRE(metric.has_value());
  const std::vector<float> ranked = {9, 8, 7, 6, 5, 4, 3};  // class c ranks c+1-th
  std::vector<SampleOutputs> outputs = {{scores(ranked, {7})}, {scores(ranked, {7})}};
  MetricInput input;
  input.outputs = &outputs;
  CHECK((*metric)->evaluate(input).value() == doctest::Approx(0.5));
}

TEST_CASE("top1: short labels, a missing output and a label outside the scores are errors") {
  const std::string labels = write_npy("short", "<i8", "(1,)", int64_body({7}));
  std::vector<SampleOutputs> two = {{scores({1, 0}, {2})}, {scores({1, 0}, {2})}};
  MetricInput input;
  input.outputs = &two;
  auto short_result = make(1, labels).value()->evaluate(input);
  REQUIRE_FALSE(short_result.has_value());
  CHECK(short_result.status().message().find("hold 1 labels, the evaluation needs samples 0 to 1") != std::string::npos);

  std::vector<SampleOutputs> one = {{scores({1, 0}, {2})}};
  input.outputs = &one;
  auto wrong_output = make(1, labels, 1).value()->evaluate(input);
  REQUIRE_FALSE(wrong_output.has_value());
  CHECK(wrong_output.status().message().find("option 'output' is 1 but the model has 1 output(s)") != std::string::npos);

  auto outside = make(1, labels).value()->evaluate(input);
  REQUIRE_FALSE(outside.has_value());
  CHECK(outside.status().message().find("label 7 of sample 0 is outside the 2 scores of output 0") != std::string::npos);

  auto no_labels = make(1, "");
  REQUIRE_FALSE(no_labels.has_value());
  CHECK(no_labels.status().message().find("option 'labels' is required") != std::string::npos);
  auto negative = make(1, labels, -1);
  REQUIRE_FALSE(negative.has_value());
}

}  // namespace
}  // namespace qflow

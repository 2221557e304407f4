// Conformance runner internals: loading test data, binding it to the graph, comparing outputs.
#include "conformance_runner.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>
#include <thread>

#include "framework/onnx/onnx_import.h"
#include "framework/onnx/tensor_pb.h"
#include "framework/interpreter/executor.h"

namespace qflow::conformance {

namespace fs = std::filesystem;

namespace {

TestResult make(const std::string& name, Outcome outcome, std::string reason) {
  return {name, outcome, std::move(reason)};
}

std::string describe(const Tensor& t) { return std::string(dtype_name(t.dtype())) + " " + shape_to_string(t.shape()); }

std::string format_number(double v) {
  std::ostringstream out;
  out.precision(9);
  out << v;
  return out.str();
}

// Element i as a double; half types are widened.
double element(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::Float32: return t.data<float>()[i];
    case DType::Float64: return t.data<double>()[i];
    case DType::Float16: return half_to_float(t.data<uint16_t>()[i]);
    case DType::BFloat16: return bfloat16_to_float(t.data<uint16_t>()[i]);
    default: return 0.0;
  }
}

int64_t int_element(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::Int8: return t.data<int8_t>()[i];
    case DType::UInt8: return t.data<uint8_t>()[i];
    case DType::Int16: return t.data<int16_t>()[i];
    case DType::UInt16: return t.data<uint16_t>()[i];
    case DType::Int32: return t.data<int32_t>()[i];
    case DType::UInt32: return t.data<uint32_t>()[i];
    case DType::Int64: return t.data<int64_t>()[i];
    case DType::UInt64: return static_cast<int64_t>(t.data<uint64_t>()[i]);
    case DType::Bool: return t.data<bool>()[i] ? 1 : 0;
    default: return 0;
  }
}

// Empty string when equal within tolerance, else the first difference.
std::string compare(const std::string& name, const Tensor& got, const Tensor& expected, const Tolerance& tol) {
  if (got.dtype() != expected.dtype() || got.shape() != expected.shape())
    return "output '" + name + "': got " + describe(got) + ", expected " + describe(expected);
  if (expected.dtype() == DType::String) {
    for (std::size_t i = 0; i < expected.strings().size(); ++i)
      if (got.strings()[i] != expected.strings()[i])
        return "output '" + name + "' at flat index " + std::to_string(i) + ": got '" + got.strings()[i] +
               "', expected '" + expected.strings()[i] + "'";
    return {};
  }
  const bool floating = is_float(expected.dtype());
  for (int64_t i = 0; i < expected.numel(); ++i) {
    if (floating) {
      const double g = element(got, i), e = element(expected, i);
      if (std::isnan(e) && std::isnan(g)) continue;
      if (std::isinf(e) && g == e) continue;
      if (std::fabs(g - e) <= tol.atol + tol.rtol * std::fabs(e)) continue;
      return "output '" + name + "' at flat index " + std::to_string(i) + ": got " + format_number(g) + ", expected " +
             format_number(e);
    }
    const int64_t g = int_element(got, i), e = int_element(expected, i);
    if (g != e)
      return "output '" + name + "' at flat index " + std::to_string(i) + ": got " + std::to_string(g) +
             ", expected " + std::to_string(e);
  }
  return {};
}

// numpy has no bfloat16, so the ONNX test data stores bfloat16 tensors as uint16 bits.
Tensor as_declared(const Value* value, Tensor tensor) {
  if (!value || !value->type || value->type->dtype != DType::BFloat16 || tensor.dtype() != DType::UInt16)
    return tensor;
  Tensor bits(DType::BFloat16, tensor.shape());
  if (tensor.nbytes() > 0) std::memcpy(bits.raw_data(), tensor.raw_data(), tensor.nbytes());
  return bits;
}

// input_0.pb, input_1.pb, ... in index order (plain name sort would put 10 before 2).
std::vector<fs::path> numbered_files(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> files;
  for (int i = 0;; ++i) {
    fs::path p = dir / (prefix + std::to_string(i) + ".pb");
    if (!fs::exists(p)) break;
    files.push_back(p);
  }
  return files;
}

// Outcome for a status from loading or planning: Unsupported skips, anything else fails.
TestResult from_status(const std::string& name, const Status& status) {
  return make(name, status.code() == StatusCode::Unsupported ? Outcome::Skipped : Outcome::Failed, status.message());
}

TestResult run_data_set(const std::string& name, const fs::path& set_dir, const Model& model,
                        const Executor& executor, const Tolerance& tol) {
  const Graph& graph = *model.graph;
  const std::vector<Value*> runtime_inputs = graph.runtime_inputs();
  std::map<std::string, Tensor> feeds;
  const auto inputs = numbered_files(set_dir, "input_");
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    auto loaded = load_named_tensor_pb_file(inputs[i].string());
    if (!loaded) return from_status(name, loaded.status());
    std::string bind = loaded->name;
    if (bind.empty() || !graph.find_value(bind)) {
      if (i >= runtime_inputs.size())
        return make(name, Outcome::Failed, inputs[i].filename().string() + " has no matching graph input");
      bind = runtime_inputs[i]->name();
    }
    feeds[bind] = as_declared(graph.find_value(bind), std::move(loaded->tensor));
  }
  auto results = executor.run(feeds);
  if (!results) return from_status(name, results.status());
  const auto outputs = numbered_files(set_dir, "output_");
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    auto loaded = load_named_tensor_pb_file(outputs[i].string());
    if (!loaded) return from_status(name, loaded.status());
    std::string bind = loaded->name;
    if (bind.empty() || !results->count(bind)) {
      if (i >= graph.outputs.size())
        return make(name, Outcome::Failed, outputs[i].filename().string() + " has no matching graph output");
      bind = graph.outputs[i]->name();
    }
    auto it = results->find(bind);
    if (it == results->end()) return make(name, Outcome::Failed, "output '" + bind + "' was not produced");
    const Tensor expected = as_declared(graph.find_value(bind), std::move(loaded->tensor));
    std::string diff = compare(bind, it->second, expected, tol);
    if (!diff.empty()) return make(name, Outcome::Failed, set_dir.filename().string() + ": " + diff);
  }
  return make(name, Outcome::Passed, {});
}

}  // namespace

TestResult run_test_dir(const std::string& dir, const Tolerance& tolerance) {
  const fs::path path(dir);
  const std::string name = path.filename().string();
  ImportOptions options;
  // The suite's models are checker-clean; skipping the checker keeps the whole run fast.
  options.run_checker = false;
  auto model = import_onnx_file((path / "model.onnx").string(), options);
  if (!model) return from_status(name, model.status());
  const Graph& graph = *model->graph;
  for (const std::vector<Value*>* list : {&graph.inputs, &graph.outputs})
    for (const Value* v : *list)
      if (v->type && !v->type->opaque.empty())
        return make(name, Outcome::Skipped, "value '" + v->name() + "' is not a tensor of a type qflow holds");
  auto executor = Executor::create(*model);
  if (!executor) return from_status(name, executor.status());

  std::vector<fs::path> sets;
  for (const auto& entry : fs::directory_iterator(path))
    if (entry.is_directory() && entry.path().filename().string().rfind("test_data_set_", 0) == 0)
      sets.push_back(entry.path());
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) return make(name, Outcome::Skipped, "no test_data_set_* directory");
  for (const fs::path& set : sets) {
    TestResult r = run_data_set(name, set, *model, **executor, tolerance);
    if (r.outcome != Outcome::Passed) return r;
  }
  return make(name, Outcome::Passed, {});
}

std::vector<TestResult> run_suite(const std::string& suite_dir, const std::string& filter, int threads,
                                  const Tolerance& tolerance) {
  std::vector<std::string> dirs;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(suite_dir, error)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory() && fs::exists(entry.path() / "model.onnx") && name.find(filter) != std::string::npos)
      dirs.push_back(entry.path().string());
  }
  std::sort(dirs.begin(), dirs.end());
  std::vector<TestResult> results(dirs.size());
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i = next++; i < dirs.size(); i = next++) {
      try {
        results[i] = run_test_dir(dirs[i], tolerance);
      } catch (const std::exception& e) {
        results[i] = make(fs::path(dirs[i]).filename().string(), Outcome::Failed, std::string("exception: ") + e.what());
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < std::max(1, threads); ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  return results;
}

}  // namespace qflow::conformance

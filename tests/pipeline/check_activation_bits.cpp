// 4-bit activation runs of pipelines/ptq.toml on the Fashion-MNIST fixture, one per
// calibration method: the calibration table records bits 4 for every tensor and reads back
// through the load calibrator; every activation of the PTQ model ends in a Clip, and on the
// 200 calibration samples every value a Clip hands on is (q - zp) * scale for an integer q of
// the grid [-8, 7]. The bpu target refuses 4-bit activations before anything runs.
//
// usage: check_activation_bits QFLOW SOURCE_DIR WORK_DIR
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "check_program.h"
#include "framework/data/npy.h"
#include "framework/interpreter/executor.h"
#include "framework/onnx/onnx_import.h"
#include "plugins/calibrators/load_calibrator.h"
#include "qflow/quant/quant_math.h"

using namespace qflow;
using check::fail;
using check::read;
using check::run;

namespace {

struct GridClip {
  float scale = 0.0f;
  float zero_point = 0.0f;
};

float scalar(const Graph& graph, const Value* v) {
  const Tensor* t = v ? graph.initializer(v) : nullptr;
  return t ? static_cast<float>(t->to_doubles().at(0)) : NAN;
}

// The table as written: every entry 4 bits, read back by the load calibrator.
void check_table(const std::string& method, const std::string& path) {
  auto table = LoadCalibrator::parse_table(read(path), path);
  if (!table) return fail(method + ": " + table.status().message());
  if (table->empty()) return fail(method + ": empty calibration table");
  for (const auto& [name, params] : *table) {
    if (params.bits != 4) fail(method + ": table entry '" + name + "' has bits " + std::to_string(params.bits));
    const QuantRange grid = grid_range(params);
    if (grid.min != -8 || grid.max != 7 || params.zero_point.at(0) < grid.min || params.zero_point.at(0) > grid.max)
      fail(method + ": table entry '" + name + "' is not on [-8, 7]");
  }
}

void check_model(const std::string& method, const std::string& path, const Tensor& samples) {
  auto model = import_onnx_file(path);
  if (!model) return fail(method + ": " + model.status().message());
  const Graph& graph = *model->graph;
  std::map<std::string, GridClip> clips;  // by output name
  int activations = 0;
  for (const auto& node : graph.nodes()) {
    if (node->op_type() == "QuantizeLinear" && !graph.initializer(node->input(0))) ++activations;
    if (node->op_type() != "Clip") continue;
    const Node* dq = node->input(0)->producer();
    if (!dq || dq->op_type() != "DequantizeLinear") continue;
    GridClip clip{scalar(graph, dq->input(1)), scalar(graph, dq->input(2))};
    // The bounds: the grid's ends as DequantizeLinear computes them.
    if (scalar(graph, node->input(1)) != (-8.0f - clip.zero_point) * clip.scale ||
        scalar(graph, node->input(2)) != (7.0f - clip.zero_point) * clip.scale)
      fail(method + ": Clip '" + node->name() + "' bounds are not the grid's dequantized ends");
    clips[node->output(0)->name()] = clip;
  }
  if (activations == 0 || static_cast<int>(clips.size()) != activations)
    return fail(method + ": " + std::to_string(clips.size()) + " grid Clips for " + std::to_string(activations) +
                " quantized activations");
  auto executor = Executor::create(*model);
  if (!executor) return fail(method + ": " + executor.status().message());
  const std::string input = graph.runtime_inputs().at(0)->name();
  const int64_t n = samples.dim(0), per = samples.numel() / n;
  int64_t checked = 0, off = 0, at_ends = 0;
  for (int64_t s = 0; s < n; ++s) {
    std::vector<float> one(samples.data<float>() + s * per, samples.data<float>() + (s + 1) * per);
    const Tensor x = Tensor::from_vector<float>({1, 1, 28, 28}, one);
    auto out = (*executor)->run({{input, x}}, [&](const Value& value, const Tensor& t) {
      auto it = clips.find(value.name());
      if (it == clips.end()) return Status::ok();
      const GridClip& c = it->second;
      for (int64_t i = 0; i < t.numel(); ++i) {
        const float v = t.data<float>()[i];
        const float q = std::nearbyint(v / c.scale) + c.zero_point;
        if (q < -8.0f || q > 7.0f || (q - c.zero_point) * c.scale != v) ++off;
        at_ends += q == -8.0f || q == 7.0f;
      }
      checked += t.numel();
      return Status::ok();
    });
    if (!out) return fail(method + ": " + out.status().message());
  }
  if (off != 0) fail(method + ": " + std::to_string(off) + " of " + std::to_string(checked) + " values off the grid");
  if (at_ends == 0) fail(method + ": no value reaches the grid's ends");
  std::cout << method << ": " << clips.size() << " activations, " << checked << " values on the 4-bit grid ("
            << at_ends << " at its ends)\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: check_activation_bits QFLOW SOURCE_DIR WORK_DIR\n";
    return 2;
  }
  const std::string qflow = argv[1], source = argv[2], work = argv[3];
  std::filesystem::remove_all(work);
  std::filesystem::create_directories(work);
  auto samples = read_npy_file(source + "/models/fashion_mnist/calib_200.npy");
  if (!samples) {
    std::cout << "FAIL: " << samples.status().message() << "\n";
    return 1;
  }
  for (const std::string method : {"max", "percentile", "kl", "mse", "mix", "auto"}) {
    const std::string out = work + "/" + method;
    const int status = run(source,
                           "'" + qflow + "' run pipelines/ptq.toml --set model=models/fashion_mnist/fashion_mnist.onnx"
                               " --set data=models/fashion_mnist/calib_200.npy --set method=" + method +
                               " --set quantization.activation-bits=4 --out '" + out + "'",
                           work + "/" + method + ".log");
    if (status != 0) {
      fail(method + ": 4-bit run exited " + std::to_string(status) + ": " + read(work + "/" + method + ".log"));
      continue;
    }
    check_table(method, out + "/calibration_table.json");
    check_model(method, out + "/fashion_mnist_ptq_model.onnx", *samples);
  }

  const int bpu = run(source, "'" + qflow + "' run pipelines/bpu_ptq.toml --set model=models/fashion_mnist/fashion_mnist.onnx"
                      " --set data=models/fashion_mnist/calib_200.npy --set quantization.activation-bits=4 --dry-run",
                      work + "/bpu.log");
  const std::string log = read(work + "/bpu.log");
  if (bpu != 2) fail("bpu with 4-bit activations exited " + std::to_string(bpu) + ", expected 2: " + log);
  if (log.find("activation-bits 4 cannot be deployed on the bpu target (supported activation widths: 8, 16)") ==
      std::string::npos)
    fail("bpu refusal not as expected: " + log);
  return check::failures == 0 ? 0 : 1;
}

// A 4-bit weight run of pipelines/ptq.toml on the Fashion-MNIST fixture: every quantized weight
// of the PTQ model lies on the grid [-7, 7] and each channel's largest weight maps to +-7; the
// bpu target refuses 4-bit weights before anything runs, naming the supported widths.
//
// usage: check_weight_bits QFLOW SOURCE_DIR WORK_DIR
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>

#include "check_program.h"
#include "framework/onnx/onnx_import.h"

using namespace qflow;
using check::fail;
using check::read;
using check::run;

namespace {

// Every int8 weight behind a DequantizeLinear: in [-7, 7], each channel's largest |q| 7.
void check_grid(const std::string& path) {
  auto model = import_onnx_file(path);
  if (!model) return fail(model.status().message());
  const Graph& graph = *model->graph;
  int weights = 0;
  for (const auto& node : graph.nodes()) {
    if (node->op_type() != "DequantizeLinear") continue;
    const Tensor* q = graph.initializer(node->input(0));
    if (!q || q->dtype() != DType::Int8 || q->rank() < 2) continue;
    ++weights;
    const int64_t axis = node->attr_int("axis", 1);
    const int64_t channels = q->dim(axis);
    int64_t inner = 1;
    for (int64_t d = axis + 1; d < q->rank(); ++d) inner *= q->dim(d);
    std::vector<int> largest(static_cast<std::size_t>(channels), 0);
    for (int64_t i = 0; i < q->numel(); ++i) {
      const int v = q->data<int8_t>()[i];
      if (v < -7 || v > 7) return fail(node->input(0)->name() + ": value " + std::to_string(v) + " is off the 4-bit grid");
      auto& m = largest[static_cast<std::size_t>((i / inner) % channels)];
      m = std::max(m, std::abs(v));
    }
    for (int m : largest)
      if (m != 7) fail(node->input(0)->name() + ": a channel's largest |q| is " + std::to_string(m) + ", not 7");
  }
  if (weights == 0) fail("no int8 weight found in " + path);
  std::cout << weights << " weights on the 4-bit grid\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: check_weight_bits QFLOW SOURCE_DIR WORK_DIR\n";
    return 2;
  }
  const std::string qflow = argv[1], source = argv[2], work = argv[3];
  std::filesystem::remove_all(work);
  std::filesystem::create_directories(work);
  const int status = run(source,
                         "'" + qflow + "' run pipelines/ptq.toml --set model=models/fashion_mnist/fashion_mnist.onnx"
                             " --set data=models/fashion_mnist/calib_200.npy --set method=max"
                             " --set quantization.weight-bits=4 --out '" + work + "/out'",
                         work + "/run.log");
  if (status != 0) fail("4-bit run exited " + std::to_string(status) + ": " + read(work + "/run.log"));
  else check_grid(work + "/out/fashion_mnist_ptq_model.onnx");

  const int bpu = run(source, "'" + qflow + "' run pipelines/bpu_ptq.toml --set model=models/fashion_mnist/fashion_mnist.onnx"
                      " --set data=models/fashion_mnist/calib_200.npy --set quantization.weight-bits=4 --dry-run",
                      work + "/bpu.log");
  const std::string log = read(work + "/bpu.log");
  if (bpu != 2) fail("bpu with 4-bit weights exited " + std::to_string(bpu) + ", expected 2: " + log);
  if (log.find("weight-bits 4 cannot be deployed on the bpu target (supported weight widths: 8, 16)") == std::string::npos)
    fail("bpu refusal not as expected: " + log);
  return check::failures == 0 ? 0 : 1;
}

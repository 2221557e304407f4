// ONNX import: protobuf parsing, qflow's structural checks, libonnx's checker, conversion to
// the IR; a model that imports is exported again (the path every rewriting command takes).
#include <string_view>

#include "framework/onnx/onnx_export.h"
#include "framework/onnx/onnx_import.h"
#include "fuzz/fuzz_targets.h"

namespace qflow::fuzz {

void fuzz_onnx_import(const uint8_t* data, size_t size) {
  ImportOptions options;
  options.max_tensor_bytes = kMaxTensorBytes;
  Expected<Model> model =
      import_onnx_bytes(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.onnx", options);
  if (!model) return;
  (void)model->graph->topological_order();
  (void)export_onnx_bytes(*model);
}

}  // namespace qflow::fuzz

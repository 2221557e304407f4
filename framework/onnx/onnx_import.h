// ONNX -> qflow IR import (protobuf), with size checks before any allocation.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "framework/core/memory_limit.h"
#include "qflow/core/status.h"
#include "qflow/ir/graph.h"
#include "qflow/ir/tensor.h"

namespace qflow {

struct ImportOptions {
  // Upper bound for any single tensor read from the file or declared with a static shape:
  // the memory limit in force (--max-memory) when the options are made.
  int64_t max_tensor_bytes = memory_limit();
  // Run libonnx's checker on the proto before converting.
  bool run_checker = true;
  // Told what import repaired or let pass (nodes sorted, checker complaints about graph
  // bookkeeping), one line each; unset: printed to stderr as "qflow: warning: ...".
  std::function<void(const std::string&)> warning;
};

// Reads a .onnx file. Errors name the file and what is wrong (truncated/garbage proto,
// external data, > 2 GiB, tensor whose size disagrees with its data, unknown dtype, ...).
Expected<Model> import_onnx_file(const std::string& path, const ImportOptions& options = {});
// Same for an in-memory serialized ModelProto; `source_name` is used in messages.
Expected<Model> import_onnx_bytes(std::string_view bytes, const std::string& source_name,
                                  const ImportOptions& options = {});

// Reads back bytes that export_onnx_bytes made from a model in memory: the way the quantization
// analyses take fresh copies of one model. libonnx's checker is skipped (the copy is exactly
// what was exported, and re-checking it made up a tenth of a sensitivity stage).
Expected<Model> import_exported_copy(std::string_view bytes, const std::string& source_name);

// Reads a serialized TensorProto (.pb), as the ONNX backend test data stores inputs/outputs.
Expected<Tensor> load_tensor_pb_file(const std::string& path, const ImportOptions& options = {});

}  // namespace qflow

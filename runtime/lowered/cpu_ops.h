// The float kernels the runtime has for CPU segments (`cpu.<OnnxOpType>` ops). The compiler
// asks cpu_op_supported() before it places a node on the CPU, so an .hbm never needs a
// kernel its runtime lacks.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace qflow::lowered {

// ONNX op types (default domain) the CPU segments can run, sorted.
const std::vector<std::string>& cpu_op_types();
bool cpu_op_supported(std::string_view onnx_op_type);

}  // namespace qflow::lowered

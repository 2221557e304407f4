// The float kernels the runtime has for CPU segments (`cpu.<OnnxOpType>` ops). The compiler
// asks cpu_op_supported() before it places a node on the CPU, so an .hbm never needs a
// kernel its runtime lacks.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace qflow::lowered {

// ONNX op types (default domain) the CPU segments can run, sorted.
const std::vector<std::string>& cpu_op_types();
bool cpu_op_supported(std::string_view onnx_op_type);
// Whether output `position` of a CPU op may be absent (-1): any output after the first, and
// every output of LSTM, whose Y, Y_h and Y_c ONNX makes all optional.
bool cpu_op_output_optional(std::string_view onnx_op_type, size_t position);

}  // namespace qflow::lowered

// OrtPlatform: what ONNX Runtime's CPU provider runs in int8 on one CPU family, read from
// platforms/<name>.toml (docs/targets.md, "The onnxruntime target").
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "qflow/core/status.h"

namespace qflow {

// How ONNX Runtime's QDQ transformer turns a node and the DequantizeLinear / QuantizeLinear
// nodes around it (a node unit) into an integer kernel. Each rule is one of its selectors.
enum class OrtUnitRule {
  Conv,              // DQ input, DQ weight, optional DQ int32 bias, Q output: QLinearConv
  MatMul,            // DQ A, DQ B; Q output (QLinearMatMul) or float output (MatMulIntegerToFloat)
  Gemm,              // DQ A, DQ B, optional DQ int32 C with beta 1; Q or float output: QGemm
  Binary,            // two DQ inputs of one type, Q output of that type: QLinearAdd, QLinearMul
  Variadic,          // every input DQ, Q output, one type: QLinearConcat
  Unary,             // DQ input, Q output of its type: QLinearAveragePool, QLinearSigmoid, ...
  SameScale,         // DQ input, Q outputs with its scale and zero point: the Q/DQ pair is dropped
  Where,             // DQ on both value inputs, Q output: QLinearWhere
  DequantizedInput,  // DQ input, no Q: the op reads the integers (ArgMax)
};

// "conv", "same-scale", ...: the spelling in a platform file.
const char* ort_unit_rule_name(OrtUnitRule rule);

struct OrtPlatform {
  std::string name;
  std::string summary;
  std::string cpu;  // the CPUs it describes, as reasons name them ("x86-64 CPUs without VNNI")
  // Types the int8 kernels take: activations (DQ inputs and Q outputs of a unit) and
  // constant weights of Conv, MatMul and Gemm. dtype_name() spellings, sorted.
  std::vector<std::string> activation_dtypes;
  std::vector<std::string> weight_dtypes;
  // Op types whose int8 kernel takes per-channel weight scales; sorted.
  std::vector<std::string> per_channel;
  // int8 weights of non-depthwise Conv, MatMul and Gemm must lie in [-range, range]: the
  // uint8 x int8 kernels add pairs of products in 16 bits, and 2 * 255 * 64 fits. 127: no limit.
  int64_t int8_weight_range = 127;
  // QuantizeLinear / DequantizeLinear element types the provider runs, with the default-domain
  // opset that brought each (int32: DequantizeLinear of biases).
  std::map<std::string, int64_t> qdq_dtypes;
  // Op type (default domain) -> the rule that fuses it; absent ops have no int8 kernel.
  std::map<std::string, OrtUnitRule> ops;
};

// Loads `<name>.toml` from the first of `folders`, then `builtin_folder`, that holds one. The
// name must be lower-case letters, digits, '-' or '_'. A missing file names the folders
// searched and the platforms there; a malformed one names the file, line and key. Keys, op
// types, rules and dtypes are checked strictly.
Expected<OrtPlatform> find_ort_platform(const std::vector<std::string>& folders, const std::string& builtin_folder,
                                        const std::string& name);

// Names of the *.toml files in `directory`, sorted; empty when the folder is unreadable.
std::vector<std::string> list_ort_platforms(const std::string& directory);

// Absolute path of the folder holding the binary this code was linked into (the plugin .so,
// or a test executable that links it statically).
Expected<std::string> ort_plugin_directory();

}  // namespace qflow

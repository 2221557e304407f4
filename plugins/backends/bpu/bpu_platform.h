// BpuPlatform: one BPU generation's supported ops, their constraints and cost figures, read from platforms/<name>.toml.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "qflow/core/status.h"

namespace qflow {

// Quantized types a platform accepts: activations (values computed at run time) and weights
// (initializers). An empty list means "not restricted here" (the platform-wide list applies).
struct BpuDtypes {
  std::vector<std::string> activation;  // dtype names as dtype_name() spells them: "int8", "int16"
  std::vector<std::string> weight;
};

// Constraints of one op on the BPU; an absent constraint means "no limit known". Which
// keys an op may carry is checked when the file is read (README.md lists them).
struct BpuOpLimits {
  // Spatial kernel, stride and dilation of Conv, ConvTranspose and the pools, per axis.
  std::optional<int64_t> min_kernel;
  std::optional<int64_t> max_kernel;
  std::optional<int64_t> max_stride;
  std::vector<int64_t> strides;  // allowed stride values; empty: any (up to max_stride)
  std::optional<int64_t> max_dilation;
  bool dilation_power_of_two = false;
  // Input and output channels of Conv and ConvTranspose; output channels of Concat.
  std::optional<int64_t> max_channels;
  // Activation inputs: allowed ranks and the largest batch (dimension 0). Absent here:
  // the platform-wide value applies.
  std::vector<int64_t> input_ranks;
  std::optional<int64_t> max_batch;
  // Resize/Upsample: allowed modes, largest scale factor, whole-number factors only.
  std::vector<std::string> modes;
  std::optional<double> max_scale;
  bool integer_scales = false;
  // MatMul/Gemm: the second input must be an initializer (no product of two activations).
  bool constant_rhs = false;
  BpuDtypes dtypes;
};

// Figures for a first-order time estimate: compute-bound time is MACs / (macs_per_cycle *
// frequency), memory-bound time is bytes / bandwidth.
struct BpuCost {
  int64_t macs_per_cycle = 0;
  double frequency_mhz = 0.0;
  double bandwidth_gbps = 0.0;
};

struct BpuPlatform {
  std::string name;
  std::string summary;
  // Keyed by ONNX op type for the default domain ("Conv"), "domain::Op" otherwise
  // ("com.microsoft::Gelu").
  std::map<std::string, BpuOpLimits> ops;
  BpuDtypes dtypes;                  // platform-wide; an op's own list replaces it
  std::vector<int64_t> input_ranks;  // platform-wide; an op's own list replaces it
  std::optional<int64_t> max_batch;  // platform-wide; an op's own value replaces it
  bool power_of_two_scales = false;  // every scale on the BPU must be 2^k
  BpuCost cost;
};

// Loads `<name>.toml` from the first of `folders`, then `builtin_folder` (when not empty),
// that holds one. The name must be lower-case letters, digits, '-' or '_' (it becomes a file
// name). A missing file names the folders searched and the platforms they hold; a malformed
// one names the file, line and key. Keys and op names are checked strictly: an op must be
// one qflow computes.
Expected<BpuPlatform> find_bpu_platform(const std::vector<std::string>& folders, const std::string& builtin_folder,
                                        const std::string& name);
// Loads `<directory>/<name>.toml`.
Expected<BpuPlatform> load_bpu_platform(const std::string& directory, const std::string& name);

// Names of the *.toml files in `directory`, sorted; empty when the folder is unreadable.
std::vector<std::string> list_bpu_platforms(const std::string& directory);

}  // namespace qflow

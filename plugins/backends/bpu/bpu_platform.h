// BpuPlatform: one BPU generation's supported ops and their limits, read from platforms/<name>.toml.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "qflow/core/status.h"

namespace qflow {

// Limits of one op on the BPU; an absent limit means "no limit known". max-kernel and
// max-stride apply to every spatial axis of ops with a kernel (Conv, ConvTranspose and the
// pools), max-channels to the input and output channels of Conv and ConvTranspose.
struct BpuOpLimits {
  std::optional<int64_t> max_kernel;
  std::optional<int64_t> max_stride;
  std::optional<int64_t> max_channels;
};

struct BpuPlatform {
  std::string name;
  std::string summary;
  std::map<std::string, BpuOpLimits> ops;  // ONNX op types of the default domain
};

// Loads `<directory>/<name>.toml`. The name must be lower-case letters, digits, '-' or '_'
// (it becomes a file name). A missing file lists the platforms the folder holds; a
// malformed one names the file, line and key.
Expected<BpuPlatform> load_bpu_platform(const std::string& directory, const std::string& name);

// Names of the *.toml files in `directory`, sorted; empty when the folder is unreadable.
std::vector<std::string> list_bpu_platforms(const std::string& directory);

}  // namespace qflow

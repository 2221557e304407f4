// Integer class labels from a .npy file, one per sample in dataset order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qflow/core/status.h"

namespace qflow {

// Reads a little-endian, C-order .npy of signed or unsigned 1/2/4/8-byte integers, shaped
// [N] or [N, 1]. Errors name the file and what was found (missing file, not a .npy, a float
// or big-endian dtype, another shape, a truncated body).
Expected<std::vector<int64_t>> read_label_file(const std::string& path);

}  // namespace qflow

// NumPy .npy files: read format versions 1.0-3.0, write 1.0 (2.0 for long headers).
#pragma once

#include <string>
#include <string_view>

#include "qflow/core/status.h"
#include "qflow/ir/tensor.h"

namespace qflow {

// Only little-endian, C-order arrays of float32/64, float16, (u)int8/16/32, int64, uint64
// and bool are accepted; anything else is refused with a message naming the source.
// Sizes from the header are checked (overflow, `max_bytes`, actual data length) before
// any allocation.
Expected<Tensor> parse_npy(std::string_view bytes, const std::string& source_name,
                           int64_t max_bytes = Tensor::kDefaultMaxBytes);
Expected<Tensor> read_npy_file(const std::string& path, int64_t max_bytes = Tensor::kDefaultMaxBytes);

// Serialized .npy bytes; Unsupported for dtypes NumPy has no type for (bfloat16).
Expected<std::string> serialize_npy(const Tensor& tensor);
// Writes atomically, so a failure never leaves a partial file at `path`.
Status write_npy_file(const std::string& path, const Tensor& tensor);

}  // namespace qflow

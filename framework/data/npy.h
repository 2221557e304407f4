// NumPy .npy files: read format versions 1.0-3.0, write 1.0 (2.0 for long headers).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "framework/core/memory_limit.h"
#include "qflow/core/status.h"
#include "qflow/ir/tensor.h"

namespace qflow {

// Only little-endian, C-order arrays of float32/64, float16, (u)int8/16/32, int64, uint64
// and bool are accepted; anything else is refused with a message naming the source.
// Sizes from the header are checked (overflow, `max_bytes`, actual data length) before
// any allocation; the default bound is the memory limit in force (--max-memory).
Expected<Tensor> parse_npy(std::string_view bytes, const std::string& source_name,
                           int64_t max_bytes = memory_limit());
Expected<Tensor> read_npy_file(const std::string& path, int64_t max_bytes = memory_limit());

// The header of a .npy file, for readers that fetch the data piecewise (by file offset).
struct NpyHeader {
  DType dtype = DType::Undefined;
  Shape shape;
  std::size_t data_offset = 0;  // where the C-order data starts
  int64_t data_bytes = 0;       // what the shape needs; checked against overflow
};
// A prefix this long holds every header a reader accepts.
inline constexpr std::size_t kNpyMaxPrefixBytes = 12 + (std::size_t{1} << 20);
// Parses and checks the header at the start of `prefix` (the file's first bytes, at least
// the whole header): magic, version, dict, dtype, order, size overflow. The data is not
// looked at, so its length is the caller's to check.
Expected<NpyHeader> parse_npy_header(std::string_view prefix, const std::string& source_name);
// A shape as the header and the messages write it: "(4, 1, 28, 28)", "(3,)".
std::string npy_shape_literal(const Shape& shape);

// Serialized .npy bytes; Unsupported for dtypes NumPy has no type for (bfloat16).
Expected<std::string> serialize_npy(const Tensor& tensor);
// Writes atomically, so a failure never leaves a partial file at `path`.
Status write_npy_file(const std::string& path, const Tensor& tensor);

}  // namespace qflow

// Whole-file reads with a size bound, and atomic writes (temporary file + rename).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "qflow/core/status.h"

namespace qflow {

// Reads the whole file; refuses files larger than max_bytes with a message naming the file.
Expected<std::string> read_file(const std::string& path, int64_t max_bytes = int64_t{1} << 34);
// Writes `bytes` to path.tmp.<pid> in the same folder, flushes, then renames over `path`,
// so readers see either the old file or the complete new one.
Status write_file_atomic(const std::string& path, std::string_view bytes);

}  // namespace qflow

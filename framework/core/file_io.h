// Whole-file reads with a size bound, and atomic writes (temporary file + rename).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "qflow/core/status.h"

namespace qflow {

// Reads the whole file; refuses files larger than max_bytes with a message naming the file.
Expected<std::string> read_file(const std::string& path, int64_t max_bytes = int64_t{1} << 34);
// Reads at most the first max_bytes of the file (all of it when shorter): headers that
// say how big the rest is are checked before the rest is read.
Expected<std::string> read_file_prefix(const std::string& path, int64_t max_bytes);
// Writes `bytes` to path.tmp.<pid> in the same folder, fsyncs it, renames it over `path`
// and fsyncs the folder, so readers (and a machine that loses power or a process killed
// at any point) see either the old file or the complete new one, never a partial one.
// A killed writer can leave its path.tmp.<pid> behind; remove_stale_temp_files cleans up.
Status write_file_atomic(const std::string& path, std::string_view bytes);
// True for names write_file_atomic uses for its temporary files ("<name>.tmp.<digits>").
bool is_atomic_temp_name(std::string_view file_name);
// Removes the temporary files of atomic writes in `folder` left by other processes (a
// killed run); returns how many were removed. The folder's other files are not touched.
int remove_stale_temp_files(const std::string& folder);

}  // namespace qflow

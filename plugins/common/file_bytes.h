// A whole file read into memory, for the target plugins' commands (.hbm, .npy inputs).
#pragma once

#include <string>

#include "qflow/core/status.h"

namespace qflow {

// The file's bytes; an io error naming the path when it cannot be opened or read.
Expected<std::string> read_file_bytes(const std::string& path);

}  // namespace qflow

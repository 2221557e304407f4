// The .hbm writer: HbmFile -> bytes, byte-for-byte deterministic.
#pragma once

#include <cstdint>
#include <vector>

#include "qflow/runtime/hbm_file.h"
#include "qflow/core/status.h"

namespace qflow::hbm {

// Validates `file` (see validate()) and lays it out as format 1.0: header, section table,
// then metadata, inputs, outputs, the tensor table (when not empty), one section per
// segment in order, the unknown sections in order and the weights last. The bytes depend on `file` only; version fields are ignored
// (the current version is written).
Expected<std::vector<uint8_t>> write(const HbmFile& file);

}  // namespace qflow::hbm

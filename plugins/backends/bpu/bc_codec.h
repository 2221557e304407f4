// `<name>_quantized_model.bc`: the lowered model (runtime/include/qflow/runtime/lowered_model.h) serialized with the
// protobuf schema quantized_model.proto, next to this file: the bpu target writes it
// (Target::lower) and runs it (Target::load).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "qflow/core/status.h"
#include "qflow/runtime/lowered_model.h"

namespace qflow {

// Deterministic bytes (fields in schema order, attributes sorted): the same model gives the
// same file.
Expected<std::string> encode_bc(const lowered::Model& model);
// Parses and checks the structure (indices, sizes); a malformed file is an error naming
// what is wrong, never a crash.
Expected<lowered::Model> decode_bc(std::span<const uint8_t> bytes);

}  // namespace qflow

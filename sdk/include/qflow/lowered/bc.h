// `<name>_quantized_model.bc`: the lowered model (qflow/lowered/model.h) serialized with the
// protobuf schema framework/lowered/quantized_model.proto. Implemented in libqflow_core, so
// a backend plugin writes it and the CLI reads it without its own protobuf code.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "qflow/core/status.h"
#include "qflow/lowered/model.h"

namespace qflow {

// Deterministic bytes (fields in schema order, attributes sorted): the same model gives the
// same file.
Expected<std::string> encode_bc(const lowered::Model& model);
// Parses and checks the structure (indices, sizes); a malformed file is an error naming
// what is wrong, never a crash.
Expected<lowered::Model> decode_bc(std::span<const uint8_t> bytes);

}  // namespace qflow

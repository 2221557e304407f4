// The lowered model inside an .hbm: the tensor table, one segment per lowered segment with its
// op stream, and the weights blob (docs/hbm-format.md, "Op streams"). Deterministic: the same
// model gives the same bytes.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "qflow/runtime/lowered_model.h"
#include "qflow/runtime/hbm_file.h"
#include "qflow/core/status.h"

namespace qflow::lowered {

// `toolchain_version` goes into the header; properties into the metadata section.
Expected<hbm::HbmFile> to_hbm(const Model& model, std::string_view toolchain_version);
// Decodes and validates (lowered::validate) the model an HbmFile carries.
Expected<Model> from_hbm(const hbm::HbmFile& file);

// write(to_hbm(...)) and from_hbm(parse(...)) in one step.
Expected<std::vector<uint8_t>> encode_hbm(const Model& model, std::string_view toolchain_version);
Expected<Model> decode_hbm(std::span<const uint8_t> bytes, std::span<const std::string_view> supported_platforms = {});

}  // namespace qflow::lowered

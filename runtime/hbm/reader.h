// The .hbm reader: bytes -> HbmFile, validating everything before anything is used.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "runtime/hbm/hbm_file.h"
#include "runtime/hbm/status.h"

namespace qflow::hbm {

// Parses a whole .hbm file held in memory. Every number read from the bytes is checked
// before it is used (docs/hbm-format.md, "What a reader checks"); a bad file gives a one-line
// "hbm: ..." error, never a crash or a read outside `bytes`.
//
// `supported_platforms`, when not empty, restricts the platforms accepted (a runtime built
// for some devices only); empty accepts any. The runtime library itself accepts any: a
// lowered program carries every number it computes with, so a user's own platform runs
// like the built-in ones (docs/platforms.md).
Expected<HbmFile> parse(std::span<const uint8_t> bytes,
                        std::span<const std::string_view> supported_platforms = {});

}  // namespace qflow::hbm

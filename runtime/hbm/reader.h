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
// `supported_platforms` are the platforms this runtime can execute; a file for another one
// is refused. An empty list accepts any platform (for tools that only inspect files).
Expected<HbmFile> parse(std::span<const uint8_t> bytes,
                        std::span<const std::string_view> supported_platforms = {});

// The platforms this runtime executes: the BPU platforms qflow compiles for
// (plugins/backends/bpu/platforms/*.toml). The C API refuses a file for any other.
std::span<const std::string_view> runtime_platforms();

}  // namespace qflow::hbm

// The .hbm reader: bytes -> HbmFile, validating everything before anything is used.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "qflow/runtime/hbm_file.h"
#include "qflow/core/status.h"

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

// One entry of the section table, as the file lays it out.
struct SectionEntry {
  uint32_t kind = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  uint32_t alignment = 0;
  uint32_t crc = 0;
};

// The section table in file order (parse() keeps only the decoded sections), with the checks
// parse() makes of the header and the table: `qflow hbm info` shows it.
Expected<std::vector<SectionEntry>> section_table(std::span<const uint8_t> bytes);

}  // namespace qflow::hbm

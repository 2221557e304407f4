// UTF-8 validation and text positions, shared by the JSON reader and writer and the pipeline
// parser.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace qflow {

// Length of the valid UTF-8 sequence starting at text[i], or 0 when it is not valid
// (overlong forms, surrogates and code points above U+10FFFF are invalid).
std::size_t utf8_sequence_length(std::string_view text, std::size_t i);

// Offset of the first byte that does not start a valid sequence, or nullopt for valid text.
std::optional<std::size_t> first_invalid_utf8(std::string_view text);

// Line and column (1-based) of a byte offset; columns count characters (UTF-8 lead bytes),
// so they match what an editor shows for valid text.
struct TextPosition {
  int64_t line = 1;
  int64_t column = 1;
};
TextPosition text_position(std::string_view text, std::size_t offset);

}  // namespace qflow

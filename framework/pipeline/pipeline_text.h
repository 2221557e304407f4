// Text helpers shared by the pipeline parser, resolver and formatter: names, values, --set.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "framework/core/text_format.h"
#include "qflow/core/status.h"
#include "qflow/plugin/options.h"

namespace qflow {

// Stage ids, var names and ports: a letter or digit, then letters, digits, '-' or '_'.
// No '.', so "stage.port" and "stage.option" split unambiguously.
inline constexpr std::string_view kIdentifierRule = "letters, digits, '-' and '_', starting with a letter or digit";
bool is_identifier(std::string_view text);

// One --set argument: "name=value" (a var) or "stage.option=value".
struct SetArgument {
  std::string stage;  // empty for a var
  std::string name;
  std::string value;
};
Expected<SetArgument> parse_set_argument(const std::string& text);
// `--set quantization.KEY=VALUE` addresses the [quantization] table, not a stage.
inline constexpr std::string_view kQuantizationSet = "quantization";

// Converts command-line text to a value of `type`: ints and floats in full, bools as
// true/false, string lists comma-separated.
Expected<OptionValue> parse_option_text(const std::string& text, OptionType type);

}  // namespace qflow

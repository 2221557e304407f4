// Text that parses back as TOML, and lists joined for messages: shared by the pipeline
// formatter and the [quantization] table's text form.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace qflow {

std::string join(const std::vector<std::string>& parts, std::string_view separator);
// "a", "a and b", "a, b and c".
std::string join_and(const std::vector<std::string>& parts);

// TOML spellings that parse back to the same value.
std::string toml_quote(std::string_view text);
std::string toml_key(std::string_view key);
std::string toml_float(double value);

}  // namespace qflow

// "Did you mean" suggestions for names a user mistyped (components, options, op types).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace qflow {

// Levenshtein distance.
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidates within max(2, |name| / 3) edits of `name`, sorted; empty when none is close.
std::vector<std::string> similar_names(std::string_view name, const std::vector<std::string>& candidates);

}  // namespace qflow

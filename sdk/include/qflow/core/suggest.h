// "Did you mean" suggestions for names a user mistyped (components, options, op types).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace qflow {

// Levenshtein distance.
std::size_t edit_distance(std::string_view a, std::string_view b);

// True when `candidate` is within max(2, |name| / 3) edits of `name`: close enough to suggest.
bool is_similar_name(std::string_view name, std::string_view candidate);

// The candidates similar to `name`, sorted and unique; empty when none is close.
std::vector<std::string> similar_names(std::string_view name, const std::vector<std::string>& candidates);

}  // namespace qflow

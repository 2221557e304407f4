// The operators qflow's interpreter computes: what a description naming ops (a platform
// file, a placement list) can be checked against.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace qflow {

// (domain, op type) pairs with a built-in kernel, sorted; the default domain is "".
std::vector<std::pair<std::string, std::string>> builtin_operators();

}  // namespace qflow

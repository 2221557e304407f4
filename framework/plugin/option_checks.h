// Option checks shared by the registry and pipeline validation: undeclared names (with a
// suggestion) and values outside a declaration's limits.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "qflow/core/status.h"
#include "qflow/plugin/options.h"

namespace qflow {

// "option 'ration' is not declared by calibrator 'shrink-max'; did you mean 'ratio'?", or,
// with no close name, the declared ones: "... (allowed: a, b)" / "(it takes no options)".
std::string undeclared_option_text(std::string_view name, std::string_view owner, const std::vector<OptionSpec>& specs);

// The limits in words, as `qflow plugins` and the refusals print them: "in (0, 1]", ">= 1",
// "one of 'abs', 'signed'"; empty when the declaration has none.
std::string option_limits_text(const OptionLimits& limits);

// Refuses a value of the declared type that the declaration's limits exclude:
// "option 'ratio' of calibrator 'shrink-max' must be in (0, 1], got 1.5".
Status check_option_value(const OptionSpec& spec, const OptionValue& value, std::string_view owner);

// Refuses limits that do not fit the option: a range on a non-number, a list of allowed
// values on a non-string, min above max, or a default the limits exclude.
Status check_option_limits(const OptionSpec& spec, std::string_view owner);

}  // namespace qflow

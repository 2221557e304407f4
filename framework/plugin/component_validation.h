// Checks a plugin's component declarations and resolves user options against them.
#pragma once

#include <string>
#include <string_view>

#include "qflow/core/status.h"
#include "qflow/plugin/component.h"
#include "qflow/plugin/options.h"

namespace qflow {

// [a-z0-9]+(-[a-z0-9]+)*
bool is_kebab_case(std::string_view name);

// Kebab-case words joined by '.': "abs-histogram", "aciq.abs-mean".
bool is_statistic_name(std::string_view name);

// "calibrator 'max'"
std::string component_label(const ComponentInfo& info);

// Name, summary and option declarations of one component; `expected` is the kind the
// registrar method implies (add_observer -> Observer).
Status validate_component_info(const ComponentInfo& info, ComponentKind expected);

// Every declared option present: user values checked by name, type (an int is accepted
// for a float option) and declared limits, defaults filled in for the rest; the result
// names the component as its owner, for the getters' errors.
Expected<Options> resolve_component_options(const ComponentInfo& info, const Options& values);

}  // namespace qflow

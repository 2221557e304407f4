// A component named by a host stage's option (a metric, a target) takes its options as
// "key=value" strings (`metric-options`, `target-options`), checked against its declaration.
#pragma once

#include <string>
#include <vector>

#include "qflow/core/status.h"
#include "qflow/plugin/component.h"
#include "qflow/plugin/options.h"

namespace qflow {

// Turns "key=value" strings into values of the types `info` declares (defaults are left to
// the registry). Errors start with `option` (the stage option holding the strings) and name
// the item: no '=', a key the component does not declare (listing the allowed ones), a value
// of the wrong type, a key given twice.
Expected<Options> parse_component_options(const ComponentInfo& info, const std::vector<std::string>& items,
                                          const std::string& option);

}  // namespace qflow

// A stage's metric: the `metric` and `metric-options` ("key=value" strings) options of a
// host stage that scores models with a metric component, checked against its declaration.
#pragma once

#include <string>
#include <vector>

#include "qflow/core/status.h"
#include "qflow/plugin/component.h"
#include "qflow/plugin/options.h"

namespace qflow {

// Turns "key=value" strings into values of the types `info` declares (defaults are left to
// the registry). Errors name the item: no '=', a key the metric does not declare (listing the
// allowed ones), a value of the wrong type, a key given twice.
Expected<Options> parse_metric_options(const ComponentInfo& info, const std::vector<std::string>& items);

}  // namespace qflow

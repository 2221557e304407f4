// The declarations of the built-in observers and calibrators (from their component
// libraries, no dlopen), for resolving fuzzed pipelines against real option types.
#pragma once

#include "framework/pipeline/pipeline.h"

namespace qflow::fuzz {

const ComponentCatalog& builtin_catalog();

}  // namespace qflow::fuzz

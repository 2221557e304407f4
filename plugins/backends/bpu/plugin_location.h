// Where this plugin library lives, so it can find the data installed next to it.
#pragma once

#include <string>

#include "qflow/core/status.h"

namespace qflow {

// Absolute path of the folder holding the binary this code was linked into (the .so when
// loaded as a plugin, the executable when linked statically into a test).
Expected<std::string> bpu_plugin_directory();

}  // namespace qflow

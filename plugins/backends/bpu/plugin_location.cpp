// Where this plugin library lives (plugins/common/platform_files.h).
#include "plugin_location.h"

#include "platform_files.h"

namespace qflow {

Expected<std::string> bpu_plugin_directory() { return plugin_support::plugin_directory("bpu backend"); }

}  // namespace qflow

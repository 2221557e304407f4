// The global plugin options (--plugin FILE, --no-default-plugins) and the registry they configure.
#pragma once

#include <string>
#include <vector>

#include "framework/plugin/component_registry.h"
#include "qflow/core/status.h"

namespace qflow::cli {

struct PluginOptions {
  std::vector<std::string> files;  // absolute, in command-line order
  bool load_defaults = true;       // the built-in folder and QFLOW_PLUGIN_PATH
};

// Removes every `--plugin FILE`, `--plugin=FILE` and `--no-default-plugins` from `args`
// (up to a `--`, which stays) and returns them; relative files are made absolute against
// the current directory here, once, so no later step searches for them.
Expected<PluginOptions> extract_plugin_options(std::vector<std::string>& args);

// Records the options for plugin_registry(); main calls it once before dispatching.
void set_plugin_options(PluginOptions options);

// The registry with the default locations (unless disabled) and the --plugin files loaded.
// Built on first use, so commands that need no plugin never pay for loading them; a load
// failure is returned on this and every later call.
Expected<ComponentRegistry*> plugin_registry();

}  // namespace qflow::cli

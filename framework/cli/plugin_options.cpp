// Parses the global plugin options out of the command line and builds the plugin registry lazily.
#include "framework/cli/plugin_options.h"

#include <filesystem>
#include <memory>
#include <optional>
#include <system_error>

namespace qflow::cli {

namespace {

struct RegistryState {
  PluginOptions options;
  std::unique_ptr<ComponentRegistry> registry;
  std::optional<Status> load_status;  // set once loading was attempted
};

RegistryState& state() {
  static RegistryState instance;
  return instance;
}

Expected<std::string> absolute_plugin_path(const std::string& file) {
  if (file.empty()) return invalid_input("option '--plugin' needs a file name (--plugin FILE)");
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(file, ec);
  if (ec) return io_error("plugin '" + file + "': cannot make the path absolute: " + ec.message());
  return absolute.lexically_normal().string();
}

}  // namespace

Expected<PluginOptions> extract_plugin_options(std::vector<std::string>& args) {
  constexpr std::string_view kPlugin = "--plugin";
  constexpr std::string_view kPluginEq = "--plugin=";
  PluginOptions options;
  std::vector<std::string> rest;
  rest.reserve(args.size());
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      rest.insert(rest.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    }
    if (arg == "--no-default-plugins") {
      options.load_defaults = false;
    } else if (arg == kPlugin) {
      if (i + 1 == args.size()) return invalid_input("option '--plugin' needs a file name (--plugin FILE)");
      QFLOW_ASSIGN_OR_RETURN(std::string file, absolute_plugin_path(args[++i]));
      options.files.push_back(std::move(file));
    } else if (arg.rfind(kPluginEq, 0) == 0) {
      QFLOW_ASSIGN_OR_RETURN(std::string file, absolute_plugin_path(arg.substr(kPluginEq.size())));
      options.files.push_back(std::move(file));
    } else {
      rest.push_back(arg);
    }
  }
  args = std::move(rest);
  return options;
}

void set_plugin_options(PluginOptions options) {
  RegistryState& s = state();
  s.options = std::move(options);
  s.registry.reset();
  s.load_status.reset();
}

Expected<ComponentRegistry*> plugin_registry() {
  RegistryState& s = state();
  if (!s.load_status) {
    auto registry = std::make_unique<ComponentRegistry>();
    Status status = s.options.load_defaults ? registry->load_default_locations() : Status::ok();
    for (std::size_t i = 0; status.is_ok() && i < s.options.files.size(); ++i)
      status = registry->load_library(s.options.files[i]);
    s.load_status = status;
    if (status.is_ok()) s.registry = std::move(registry);
  }
  if (!s.load_status->is_ok()) return *s.load_status;
  return s.registry.get();
}

}  // namespace qflow::cli

#include "framework/cli/deployed_file.h"

#include <filesystem>

#include "framework/cli/plugin_options.h"
#include "framework/core/file_io.h"

namespace qflow::cli {

Expected<std::optional<DeployedFile>> open_deployed_file(const std::string& path) {
  // An ONNX model needs no plugin: the registry is not even loaded for it.
  if (std::filesystem::path(path).extension() == ".onnx") return std::optional<DeployedFile>();
  QFLOW_ASSIGN_OR_RETURN(ComponentRegistry * registry, plugin_registry());
  std::optional<DeployedFile> found;
  for (const PluginLibrary& library : registry->libraries())
    for (const ComponentInfo& info : library.components) {
      if (info.kind != ComponentKind::Target) continue;
      Expected<std::shared_ptr<Target>> target = registry->make_target(info.name, Options{});
      if (!target) continue;
      const std::string role = (*target)->role_for_file(path);
      if (role.empty()) continue;
      if (found)
        return invalid_input(path + ": targets '" + found->target + "' and '" + info.name + "' both claim this file");
      QFLOW_ASSIGN_OR_RETURN(std::string bytes, read_file(path));
      Expected<std::unique_ptr<DeployedModel>> model = (*target)->load(role, bytes);
      if (!model) return model.status().with_context(path);
      found = DeployedFile{info.name, role, std::move(model).value()};
    }
  return found;
}

}  // namespace qflow::cli

#include "framework/cli/deployed_file.h"

#include <filesystem>

#include "framework/cli/plugin_options.h"
#include "framework/core/file_io.h"

namespace qflow::cli {

std::vector<InstalledTarget> installed_targets(const ComponentRegistry& registry) {
  std::vector<InstalledTarget> out;
  for (const ComponentInfo* info : registry.components(ComponentKind::Target))
    if (Expected<std::shared_ptr<Target>> target = registry.make_target(info->name, Options{}))
      out.push_back({info->name, *target});
  return out;
}

Expected<std::optional<DeployedFile>> open_deployed_file(const std::string& path) {
  // An ONNX model needs no plugin: the registry is not even loaded for it.
  if (std::filesystem::path(path).extension() == ".onnx") return std::optional<DeployedFile>();
  QFLOW_ASSIGN_OR_RETURN(ComponentRegistry * registry, plugin_registry());
  std::optional<DeployedFile> found;
  for (const InstalledTarget& installed : installed_targets(*registry)) {
    const std::string role = installed.target->role_for_file(path);
    if (role.empty()) continue;
    if (found)
      return invalid_input(path + ": targets '" + found->target + "' and '" + installed.name + "' both claim this file");
    QFLOW_ASSIGN_OR_RETURN(std::string bytes, read_file(path));
    Expected<std::unique_ptr<DeployedModel>> model = installed.target->load(role, bytes);
    if (!model) return model.status().with_context(path);
    found = DeployedFile{installed.name, role, std::move(model).value()};
  }
  return found;
}

}  // namespace qflow::cli

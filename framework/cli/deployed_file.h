// Deployable files opened by name for `qflow infer` and `qflow bench`: the installed target
// that claims the file (Target::role_for_file) loads it (Target::load).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "framework/plugin/component_registry.h"
#include "qflow/core/status.h"
#include "qflow/plugin/target.h"

namespace qflow::cli {

struct DeployedFile {
  std::string target;
  std::string role;
  std::unique_ptr<DeployedModel> model;
};

// Every installed target that can be made with its default options, by component name: what
// commands ask when a file or a flag must find its target.
struct InstalledTarget {
  std::string name;
  std::shared_ptr<Target> target;
};
std::vector<InstalledTarget> installed_targets(const ComponentRegistry& registry);

// nullopt when no installed target claims `path` (it is then an ONNX model); an error when
// one does and cannot load it, or when several do.
Expected<std::optional<DeployedFile>> open_deployed_file(const std::string& path);

}  // namespace qflow::cli

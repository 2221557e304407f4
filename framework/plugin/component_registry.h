// ComponentRegistry: the host's table of loaded plugin libraries and their components.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "qflow/core/status.h"
#include "qflow/plugin/registrar.h"

namespace qflow {

// One loaded library, as `qflow plugins` reports it.
struct PluginLibrary {
  std::string path;     // absolute
  std::string name;     // plugin_name from the entry point
  std::string version;  // plugin_version
  std::string sha256;   // content hash of the file
  std::vector<ComponentInfo> components;
  std::vector<PassPipelineInfo> pass_pipelines;
};

class ComponentRegistry {
 public:
  ComponentRegistry();
  ~ComponentRegistry();
  ComponentRegistry(const ComponentRegistry&) = delete;
  ComponentRegistry& operator=(const ComponentRegistry&) = delete;

  // Loads one library by path (made absolute against nothing: relative paths are refused).
  // Refuses, naming the file: not loadable, no entry point, API version mismatch,
  // compiler/SDK mismatch, a component with a kind and name already registered. Loading
  // the same file twice is a no-op.
  Status load_library(const std::string& path);
  // Every *.so in `directory`, in name order.
  Status load_directory(const std::string& directory);
  // The build's plugin folder (next to libqflow_core: ../lib/qflow/plugins relative to the
  // executable, or the install prefix's), then every folder in QFLOW_PLUGIN_PATH.
  Status load_default_locations();

  const std::vector<PluginLibrary>& libraries() const;
  // Every component of `kind`, in the order the libraries were loaded.
  std::vector<const ComponentInfo*> components(ComponentKind kind) const;
  // nullptr when absent.
  const ComponentInfo* find(ComponentKind kind, const std::string& name) const;
  // Every named pass pipeline, in the order the libraries were loaded; one by name (nullptr
  // when absent).
  std::vector<const PassPipelineInfo*> pass_pipelines() const;
  const PassPipelineInfo* find_pass_pipeline(const std::string& name) const;
  // All kinds that have a component with this name (a pipeline `use` may omit the kind).
  std::vector<const ComponentInfo*> find_any(const std::string& name) const;

  // Resolves `values` against the declared options (unknown option, wrong type -> error
  // listing the allowed keys), fills defaults, and creates the component. The returned
  // object keeps its library loaded for as long as it lives. A factory that throws or
  // fails becomes a status naming the plugin and the component.
  Expected<std::shared_ptr<Observer>> make_observer(const std::string& name, const Options& values) const;
  Expected<std::shared_ptr<Calibrator>> make_calibrator(const std::string& name, const Options& values) const;
  Expected<std::shared_ptr<Pass>> make_pass(const std::string& name, const Options& values) const;
  Expected<std::shared_ptr<Metric>> make_metric(const std::string& name, const Options& values) const;
  Expected<std::shared_ptr<Target>> make_target(const std::string& name, const Options& values) const;
  Expected<std::shared_ptr<Command>> make_command(const std::string& name, const Options& values) const;

  // Fills defaults and checks names and types of `values` against the component's
  // declaration; the message lists the allowed keys for an unknown one.
  Expected<Options> resolve_options(const ComponentInfo& info, const Options& values) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace qflow

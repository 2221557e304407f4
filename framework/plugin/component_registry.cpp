// ComponentRegistry: loads plugin libraries with Boost.DLL, checks their entry point and keeps their components.
#define BOOST_DLL_USE_STD_FS
#include "framework/plugin/component_registry.h"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <system_error>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>

#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/dll/shared_library.hpp>

#include "framework/core/file_io.h"
#include "framework/core/sha256.h"
#include "framework/plugin/component_validation.h"
#include "framework/plugin/load_error.h"
#include "qflow/plugin/entry.h"

#ifndef QFLOW_PLUGIN_SUBDIR
#define QFLOW_PLUGIN_SUBDIR "qflow/plugins"
#endif

namespace qflow {

namespace {

namespace fs = std::filesystem;

using Library = std::shared_ptr<boost::dll::shared_library>;
using AnyFactory = std::variant<ComponentFactory<Observer>, ComponentFactory<Calibrator>, ComponentFactory<Pass>,
                                ComponentFactory<Metric>, ComponentFactory<Target>, ComponentFactory<Command>>;
using Key = std::pair<ComponentKind, std::string>;

// One registered component. `library` is declared first so that it is destroyed last:
// the factory's code lives in the library.
struct Entry {
  Library library;
  std::string library_path;
  std::string plugin_name;
  ComponentInfo info;
  AnyFactory factory;
};

std::string plugin_prefix(const std::string& path) { return "plugin '" + path + "': "; }

// Collects a library's registrations without touching the registry, so that a failed
// registration leaves it unchanged. Remembers the first refusal: a plugin that ignores the
// status an add_* returned still fails to load.
class StagingRegistrar final : public ComponentRegistrar {
 public:
  StagingRegistrar(const std::map<Key, Entry>& committed, std::vector<const PassPipelineInfo*> committed_pipelines,
                   const std::string& path)
      : committed_(committed), committed_pipelines_(std::move(committed_pipelines)), path_(path) {}

  Status add_observer(ComponentInfo info, ComponentFactory<Observer> factory) override {
    return add(ComponentKind::Observer, std::move(info), std::move(factory));
  }
  Status add_calibrator(ComponentInfo info, ComponentFactory<Calibrator> factory) override {
    return add(ComponentKind::Calibrator, std::move(info), std::move(factory));
  }
  Status add_pass(ComponentInfo info, ComponentFactory<Pass> factory) override {
    return add(ComponentKind::Pass, std::move(info), std::move(factory));
  }
  Status add_metric(ComponentInfo info, ComponentFactory<Metric> factory) override {
    return add(ComponentKind::Metric, std::move(info), std::move(factory));
  }
  Status add_target(ComponentInfo info, ComponentFactory<Target> factory) override {
    return add(ComponentKind::Target, std::move(info), std::move(factory));
  }
  Status add_command(ComponentInfo info, ComponentFactory<Command> factory) override {
    return add(ComponentKind::Command, std::move(info), std::move(factory));
  }
  Status add_pass_pipeline(PassPipelineInfo info) override {
    Status status = check_pass_pipeline(info);
    if (!status.is_ok()) {
      if (first_error_.is_ok()) first_error_ = status;
      return status;
    }
    pipelines_.push_back(std::move(info));
    return Status::ok();
  }

  const Status& first_error() const { return first_error_; }
  std::vector<std::pair<Key, std::pair<ComponentInfo, AnyFactory>>>& staged() { return staged_; }
  std::vector<PassPipelineInfo>& staged_pipelines() { return pipelines_; }

 private:
  template <typename T>
  Status add(ComponentKind kind, ComponentInfo info, ComponentFactory<T> factory) {
    Status status = check(kind, info, static_cast<bool>(factory));
    if (!status.is_ok()) {
      if (first_error_.is_ok()) first_error_ = status;
      return status;
    }
    Key key{kind, info.name};
    staged_.emplace_back(std::move(key), std::make_pair(std::move(info), AnyFactory(std::move(factory))));
    return Status::ok();
  }

  Status check(ComponentKind kind, const ComponentInfo& info, bool has_factory) const {
    Status valid = validate_component_info(info, kind);
    if (!valid.is_ok()) return valid.with_context("plugin '" + path_ + "'");
    if (!has_factory) return invalid_input(plugin_prefix(path_) + component_label(info) + " has no factory");
    const Key key{kind, info.name};
    if (auto it = committed_.find(key); it != committed_.end())
      return invalid_input(plugin_prefix(path_) + component_label(info) + " is already provided by '" +
                           it->second.library_path + "'");
    for (const auto& staged : staged_)
      if (staged.first == key) return invalid_input(plugin_prefix(path_) + component_label(info) + " is registered twice");
    return Status::ok();
  }

  // A pass pipeline shares the namespace of passes: a list item must name one thing.
  Status check_pass_pipeline(const PassPipelineInfo& info) const {
    const std::string label = "pass pipeline '" + info.name + "'";
    if (!is_kebab_case(info.name)) return invalid_input(plugin_prefix(path_) + label + ": name is not kebab-case");
    if (info.summary.empty()) return invalid_input(plugin_prefix(path_) + label + " has no summary");
    if (info.passes.find_first_not_of(" \t") == std::string::npos)
      return invalid_input(plugin_prefix(path_) + label + " lists no pass");
    const Key as_pass{ComponentKind::Pass, info.name};
    if (committed_.count(as_pass) || std::any_of(staged_.begin(), staged_.end(), [&](const auto& s) { return s.first == as_pass; }))
      return invalid_input(plugin_prefix(path_) + label + " has the name of a pass");
    for (const PassPipelineInfo* other : committed_pipelines_)
      if (other->name == info.name) return invalid_input(plugin_prefix(path_) + label + " is already registered");
    for (const PassPipelineInfo& other : pipelines_)
      if (other.name == info.name) return invalid_input(plugin_prefix(path_) + label + " is registered twice");
    return Status::ok();
  }

  const std::map<Key, Entry>& committed_;
  const std::vector<const PassPipelineInfo*> committed_pipelines_;
  const std::string& path_;
  std::vector<PassPipelineInfo> pipelines_;
  std::vector<std::pair<Key, std::pair<ComponentInfo, AnyFactory>>> staged_;
  Status first_error_;
};

Status check_entry(const std::string& path, const qflow_plugin_info* info) {
  const std::string prefix = plugin_prefix(path);
  if (!info) return invalid_input(prefix + "entry point '" QFLOW_PLUGIN_ENTRY_SYMBOL "' returned no plugin info");
  // api_version and struct_size sit at the start of every version of the struct, so they
  // are safe to read before the version is known to match.
  if (info->api_version != QFLOW_PLUGIN_API_VERSION)
    return unsupported(prefix + "API version " + std::to_string(info->api_version) + ", this qflow supports " +
                       std::to_string(QFLOW_PLUGIN_API_VERSION));
  if (info->struct_size < sizeof(qflow_plugin_info))
    return unsupported(prefix + "plugin info is " + std::to_string(info->struct_size) +
                       " bytes, this qflow needs at least " + std::to_string(sizeof(qflow_plugin_info)));
  if (!info->plugin_name || !info->plugin_version || !info->compiler || !info->sdk_version ||
      !info->register_components)
    return invalid_input(prefix + "plugin info has a null field");
  if (std::string_view(info->compiler) != QFLOW_COMPILER_ID)
    return unsupported(prefix + "built with compiler '" + info->compiler + "', this qflow was built with '" +
                       QFLOW_COMPILER_ID + "'");
  if (std::string_view(info->sdk_version) != QFLOW_VERSION_STRING)
    return unsupported(prefix + "built against qflow SDK " + info->sdk_version + ", this qflow is " +
                       QFLOW_VERSION_STRING);
  if (!is_kebab_case(info->plugin_name))
    return invalid_input(prefix + "plugin name '" + info->plugin_name + "' is not kebab-case");
  return Status::ok();
}

// dlerror() names the file first; the caller already does.
std::string load_error_text(const std::string& path) {
  const char* text = ::dlerror();
  return explain_load_error(text ? text : "", path);
}

// Anchor whose address locates libqflow_core on disk.
void core_library_anchor() {}

template <typename T>
std::string_view kind_of() {
  if constexpr (std::is_same_v<T, Observer>) return component_kind_name(ComponentKind::Observer);
  else if constexpr (std::is_same_v<T, Calibrator>) return component_kind_name(ComponentKind::Calibrator);
  else if constexpr (std::is_same_v<T, Pass>) return component_kind_name(ComponentKind::Pass);
  else if constexpr (std::is_same_v<T, Target>) return component_kind_name(ComponentKind::Target);
  else if constexpr (std::is_same_v<T, Command>) return component_kind_name(ComponentKind::Command);
  else return component_kind_name(ComponentKind::Metric);
}

template <typename T>
constexpr ComponentKind kind_enum() {
  if constexpr (std::is_same_v<T, Observer>) return ComponentKind::Observer;
  else if constexpr (std::is_same_v<T, Calibrator>) return ComponentKind::Calibrator;
  else if constexpr (std::is_same_v<T, Pass>) return ComponentKind::Pass;
  else if constexpr (std::is_same_v<T, Target>) return ComponentKind::Target;
  else if constexpr (std::is_same_v<T, Command>) return ComponentKind::Command;
  else return ComponentKind::Metric;
}

}  // namespace

struct ComponentRegistry::Impl {
  std::vector<PluginLibrary> libraries;
  std::vector<std::string> canonical_paths;  // parallel to libraries, for "already loaded"
  std::map<Key, Entry> entries;

  template <typename T>
  Expected<std::shared_ptr<T>> make(const std::string& name, const Options& values) const;
};

ComponentRegistry::ComponentRegistry() : impl_(std::make_unique<Impl>()) {}
ComponentRegistry::~ComponentRegistry() = default;

Status ComponentRegistry::load_library(const std::string& path) {
  const fs::path file(path);
  if (!file.is_absolute())
    return invalid_input(plugin_prefix(path) + "path is not absolute (plugins are never searched for)");
  const std::string shown = file.lexically_normal().string();
  std::error_code ec;
  if (!fs::exists(file, ec)) return not_found(plugin_prefix(shown) + "no such file");
  if (!fs::is_regular_file(file, ec)) return invalid_input(plugin_prefix(shown) + "not a regular file");
  const std::string canonical = fs::canonical(file, ec).string();
  if (ec) return io_error(plugin_prefix(shown) + "cannot resolve path: " + ec.message());
  if (std::find(impl_->canonical_paths.begin(), impl_->canonical_paths.end(), canonical) !=
      impl_->canonical_paths.end())
    return Status::ok();

  Expected<std::string> bytes = read_file(shown);
  if (!bytes) return bytes.status();

  // RTLD_NOW reports unresolved symbols here, not in the middle of a later call.
  auto library = std::make_shared<boost::dll::shared_library>();
  boost::dll::fs::error_code load_ec;
  library->load(file, load_ec, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  if (load_ec || !library->is_loaded()) return invalid_input(plugin_prefix(shown) + "cannot load: " + load_error_text(shown));
  if (!library->has(QFLOW_PLUGIN_ENTRY_SYMBOL))
    return invalid_input(plugin_prefix(shown) + "no entry point '" QFLOW_PLUGIN_ENTRY_SYMBOL "' (not a qflow plugin?)");
  auto entry = library->get<const qflow_plugin_info*()>(QFLOW_PLUGIN_ENTRY_SYMBOL);

  const qflow_plugin_info* info = nullptr;
  try {
    info = entry();
  } catch (...) {
    return invalid_input(plugin_prefix(shown) + "entry point '" QFLOW_PLUGIN_ENTRY_SYMBOL "' threw");
  }
  QFLOW_RETURN_IF_ERROR(check_entry(shown, info));

  // The staging area holds factories whose code is in `library`; it is declared after it
  // so that it is destroyed first when registration fails.
  StagingRegistrar registrar(impl_->entries, pass_pipelines(), shown);
  std::array<char, 1024> error{};
  int rc = 0;
  try {
    rc = info->register_components(reinterpret_cast<qflow_registrar*>(static_cast<ComponentRegistrar*>(&registrar)),
                                   error.data(), error.size());
  } catch (...) {
    // Only a library that bypasses QFLOW_PLUGIN can get here.
    return invalid_input(plugin_prefix(shown) + "registration threw an exception across the C boundary");
  }
  error.back() = '\0';
  if (!registrar.first_error().is_ok()) return registrar.first_error();
  if (rc != 0)
    return invalid_input(plugin_prefix(shown) + (error[0] ? std::string(error.data()) : "registration failed"));

  // A pass sharing a name with an earlier library's pass pipeline is refused here, where
  // both are known.
  for (const auto& [key, staged] : registrar.staged())
    if (key.first == ComponentKind::Pass && find_pass_pipeline(key.second))
      return invalid_input(plugin_prefix(shown) + "pass '" + key.second + "' has the name of a pass pipeline");
  PluginLibrary record{shown, info->plugin_name, info->plugin_version, sha256_hex(*bytes), {}, {}};
  record.pass_pipelines = std::move(registrar.staged_pipelines());
  for (auto& [key, staged] : registrar.staged()) {
    record.components.push_back(staged.first);
    impl_->entries.emplace(key, Entry{library, shown, record.name, std::move(staged.first), std::move(staged.second)});
  }
  impl_->libraries.push_back(std::move(record));
  impl_->canonical_paths.push_back(canonical);
  return Status::ok();
}

Status ComponentRegistry::load_directory(const std::string& directory) {
  const fs::path dir(directory);
  if (!dir.is_absolute()) return invalid_input("plugin folder '" + directory + "' is not an absolute path");
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return not_found("plugin folder '" + directory + "' does not exist");
  std::vector<std::string> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".so" && it->is_regular_file(ec)) files.push_back(it->path().string());
  if (ec) return io_error("plugin folder '" + directory + "': " + ec.message());
  std::sort(files.begin(), files.end());
  for (const std::string& file : files) QFLOW_RETURN_IF_ERROR(load_library(file));
  return Status::ok();
}

Status ComponentRegistry::load_default_locations() {
  // The built-in folder sits next to libqflow_core itself, so the build tree and an
  // installed prefix behave alike and the current directory never matters.
  std::error_code ec;
  const fs::path core = boost::dll::symbol_location(core_library_anchor, ec);
  if (ec) return internal_error("cannot locate libqflow_core: " + ec.message());
  const fs::path builtin = core.parent_path() / QFLOW_PLUGIN_SUBDIR;
  std::error_code dir_ec;
  if (fs::is_directory(builtin, dir_ec)) QFLOW_RETURN_IF_ERROR(load_directory(builtin.string()));

  const char* env = std::getenv("QFLOW_PLUGIN_PATH");
  if (!env) return Status::ok();
  const std::string list(env);
  std::size_t start = 0;
  while (start <= list.size()) {
    const std::size_t end = std::min(list.find(':', start), list.size());
    const std::string item = list.substr(start, end - start);
    start = end + 1;
    if (item.empty()) continue;
    const fs::path p(item);
    if (!p.is_absolute())
      return invalid_input("QFLOW_PLUGIN_PATH entry '" + item + "' is not an absolute path");
    std::error_code item_ec;
    if (fs::is_directory(p, item_ec)) {
      QFLOW_RETURN_IF_ERROR(load_directory(item));
    } else if (fs::exists(p, item_ec)) {
      QFLOW_RETURN_IF_ERROR(load_library(item));
    } else {
      return not_found("QFLOW_PLUGIN_PATH entry '" + item + "' does not exist");
    }
  }
  return Status::ok();
}

const std::vector<PluginLibrary>& ComponentRegistry::libraries() const { return impl_->libraries; }

std::vector<const ComponentInfo*> ComponentRegistry::components(ComponentKind kind) const {
  std::vector<const ComponentInfo*> found;
  for (const PluginLibrary& library : libraries())
    for (const ComponentInfo& info : library.components)
      if (info.kind == kind) found.push_back(&info);
  return found;
}

std::vector<const PassPipelineInfo*> ComponentRegistry::pass_pipelines() const {
  std::vector<const PassPipelineInfo*> found;
  for (const PluginLibrary& library : libraries())
    for (const PassPipelineInfo& pipeline : library.pass_pipelines) found.push_back(&pipeline);
  return found;
}

const PassPipelineInfo* ComponentRegistry::find_pass_pipeline(const std::string& name) const {
  for (const PassPipelineInfo* pipeline : pass_pipelines())
    if (pipeline->name == name) return pipeline;
  return nullptr;
}

const ComponentInfo* ComponentRegistry::find(ComponentKind kind, const std::string& name) const {
  auto it = impl_->entries.find({kind, name});
  return it == impl_->entries.end() ? nullptr : &it->second.info;
}

std::vector<const ComponentInfo*> ComponentRegistry::find_any(const std::string& name) const {
  std::vector<const ComponentInfo*> found;
  for (ComponentKind kind : {ComponentKind::Observer, ComponentKind::Calibrator, ComponentKind::Pass, ComponentKind::Metric,
                             ComponentKind::Target, ComponentKind::Command})
    if (const ComponentInfo* info = find(kind, name)) found.push_back(info);
  return found;
}

Expected<Options> ComponentRegistry::resolve_options(const ComponentInfo& info, const Options& values) const {
  return resolve_component_options(info, values);
}

template <typename T>
Expected<std::shared_ptr<T>> ComponentRegistry::Impl::make(const std::string& name, const Options& values) const {
  constexpr ComponentKind kind = kind_enum<T>();
  auto it = entries.find({kind, name});
  if (it == entries.end()) {
    std::string available;
    for (const auto& [key, entry] : entries)
      if (key.first == kind) available += (available.empty() ? "" : ", ") + key.second;
    return not_found("no " + std::string(kind_of<T>()) + " named '" + name + "' (available: " +
                     (available.empty() ? "none" : available) + ")");
  }
  const Entry& entry = it->second;
  QFLOW_ASSIGN_OR_RETURN(Options resolved, resolve_component_options(entry.info, values));
  const std::string context = "plugin '" + entry.plugin_name + "' component '" + std::string(kind_of<T>()) + " " + name + "'";
  const auto& factory = std::get<ComponentFactory<T>>(entry.factory);
  std::unique_ptr<T> object;
  try {
    Expected<std::unique_ptr<T>> made = factory(resolved);
    if (!made) return made.status().with_context(context);
    object = std::move(made).value();
  } catch (const std::exception& e) {
    return internal_error(context + ": factory threw: " + e.what());
  } catch (...) {
    return internal_error(context + ": factory threw a non-standard exception");
  }
  if (!object) return internal_error(context + ": factory returned no object");
  // The deleter owns a reference to the library: the object's code (its vtable and
  // destructor) must outlive the registry that created it.
  Library library = entry.library;
  return std::shared_ptr<T>(object.release(), [library](T* p) { delete p; });
}

Expected<std::shared_ptr<Observer>> ComponentRegistry::make_observer(const std::string& name, const Options& values) const {
  return impl_->make<Observer>(name, values);
}
Expected<std::shared_ptr<Calibrator>> ComponentRegistry::make_calibrator(const std::string& name,
                                                                         const Options& values) const {
  return impl_->make<Calibrator>(name, values);
}
Expected<std::shared_ptr<Pass>> ComponentRegistry::make_pass(const std::string& name, const Options& values) const {
  return impl_->make<Pass>(name, values);
}

Expected<std::shared_ptr<Metric>> ComponentRegistry::make_metric(const std::string& name, const Options& values) const {
  return impl_->make<Metric>(name, values);
}
Expected<std::shared_ptr<Target>> ComponentRegistry::make_target(const std::string& name, const Options& values) const {
  return impl_->make<Target>(name, values);
}

Expected<std::shared_ptr<Command>> ComponentRegistry::make_command(const std::string& name, const Options& values) const {
  return impl_->make<Command>(name, values);
}

}  // namespace qflow

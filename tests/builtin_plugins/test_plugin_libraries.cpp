// Loads the built-in plugin modules through their C entry point, as the host does.
#include <doctest/doctest.h>

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "qflow/plugin/entry.h"
#include "qflow/plugin/registrar.h"

namespace qflow {
namespace {

// Records what a library registers, and keeps the factories to build components.
class RecordingRegistrar final : public ComponentRegistrar {
 public:
  Status add_observer(ComponentInfo info, ComponentFactory<Observer> factory) override {
    observers.push_back(std::move(factory));
    return record(std::move(info));
  }
  Status add_calibrator(ComponentInfo info, ComponentFactory<Calibrator> factory) override {
    calibrators.push_back(std::move(factory));
    return record(std::move(info));
  }
  Status add_pass(ComponentInfo info, ComponentFactory<Pass> factory) override {
    passes.push_back(std::move(factory));
    return record(std::move(info));
  }
  Status add_metric(ComponentInfo info, ComponentFactory<Metric> factory) override {
    metrics.push_back(std::move(factory));
    return record(std::move(info));
  }
  Status add_target(ComponentInfo info, ComponentFactory<Target> factory) override {
    targets.push_back(std::move(factory));
    return record(std::move(info));
  }
  Status add_command(ComponentInfo info, ComponentFactory<Command> factory) override {
    commands.push_back(std::move(factory));
    return record(std::move(info));
  }
  Status add_pass_pipeline(PassPipelineInfo info) override {
    pass_pipelines.push_back(std::move(info));
    return Status::ok();
  }

  std::vector<ComponentInfo> infos;
  std::vector<ComponentFactory<Observer>> observers;
  std::vector<ComponentFactory<Calibrator>> calibrators;
  std::vector<ComponentFactory<Pass>> passes;
  std::vector<ComponentFactory<Target>> targets;
  std::vector<ComponentFactory<Command>> commands;
  std::vector<ComponentFactory<Metric>> metrics;
  std::vector<PassPipelineInfo> pass_pipelines;

 private:
  Status record(ComponentInfo info) {
    infos.push_back(std::move(info));
    return Status::ok();
  }
};

struct Library {
  void* handle = nullptr;
  explicit Library(const std::string& path) : handle(dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {}
  ~Library() {
    if (handle) dlclose(handle);
  }
};

// Declared options with their defaults, as the host fills them in.
Options defaults(const ComponentInfo& info) {
  Options options;
  for (const OptionSpec& spec : info.options) options.set(spec.name, spec.default_value);
  return options;
}

void check_library(const std::string& file, const char* plugin_name, ComponentKind kind, const char* component,
                   RecordingRegistrar& registrar, const std::shared_ptr<Library>& lib) {
  const std::string path = std::string(QFLOW_PLUGIN_DIR) + "/" + file;
  REQUIRE_MESSAGE(lib->handle != nullptr, (path + ": " + dlerror()));
  auto entry = reinterpret_cast<qflow_plugin_entry_fn>(dlsym(lib->handle, QFLOW_PLUGIN_ENTRY_SYMBOL));
  REQUIRE(static_cast<bool>(entry));
  const qflow_plugin_info* info = entry();
  REQUIRE(info != nullptr);
  CHECK(info->api_version == QFLOW_PLUGIN_API_VERSION);
  CHECK(info->struct_size == sizeof(qflow_plugin_info));
  CHECK(std::strcmp(info->plugin_name, plugin_name) == 0);
  CHECK(std::strcmp(info->compiler, QFLOW_COMPILER_ID) == 0);
  CHECK(std::strcmp(info->sdk_version, QFLOW_VERSION_STRING) == 0);
  char error[256] = {};
  REQUIRE_MESSAGE(info->register_components(reinterpret_cast<qflow_registrar*>(static_cast<ComponentRegistrar*>(&registrar)),
                                            error, sizeof(error)) == 0,
                  error);
  // A library may register several components; the one named must be among them.
  const bool found = std::any_of(registrar.infos.begin(), registrar.infos.end(),
                                 [&](const ComponentInfo& i) { return i.kind == kind && i.name == component; });
  CHECK_MESSAGE(found, component);
}

TEST_CASE("plugin modules: each exports one entry point that registers its component") {
  {
    auto lib = std::make_shared<Library>(std::string(QFLOW_PLUGIN_DIR) + "/libqflow_observers.so");
    RecordingRegistrar r;
    check_library("libqflow_observers.so", "observers", ComponentKind::Observer, "minmax", r, lib);
    auto made = r.observers.at(0)(defaults(r.infos[0]));
    REQUIRE(made.has_value());
  }
  {
    auto lib = std::make_shared<Library>(std::string(QFLOW_PLUGIN_DIR) + "/libqflow_calibrators.so");
    RecordingRegistrar r;
    check_library("libqflow_calibrators.so", "calibrators", ComponentKind::Calibrator, "max", r, lib);
    REQUIRE(r.calibrators.at(0)(defaults(r.infos[0])).has_value());
  }
  {
    auto lib = std::make_shared<Library>(std::string(QFLOW_PLUGIN_DIR) + "/libqflow_passes.so");
    RecordingRegistrar r;
    check_library("libqflow_passes.so", "passes", ComponentKind::Pass, "dead-code-elimination", r, lib);
    REQUIRE(r.passes.at(0)(defaults(r.infos[0])).has_value());
  }
  {
    auto lib = std::make_shared<Library>(std::string(QFLOW_PLUGIN_DIR) + "/libqflow_metrics.so");
    RecordingRegistrar r;
    check_library("libqflow_metrics.so", "metrics", ComponentKind::Metric, "top1", r, lib);
    // A top-k metric needs its labels file: the defaults are refused with the option's name.
    auto made = r.metrics.at(0)(defaults(r.infos[0]));
    REQUIRE_FALSE(made.has_value());
    CHECK(made.status().message().find("'labels'") != std::string::npos);
  }
}

TEST_CASE("plugin modules: the bpu target finds its platform folder next to its own library") {
  auto lib = std::make_shared<Library>(std::string(QFLOW_PLUGIN_DIR) + "/libqflow_backend_bpu.so");
  RecordingRegistrar r;
  check_library("libqflow_backend_bpu.so", "backend-bpu", ComponentKind::Target, "bpu", r, lib);
  // One component per target, plus the `qflow hbm` command the plugin contributes.
  REQUIRE(r.infos.size() == 2);
  CHECK(r.targets.size() == 1);
  REQUIRE(r.commands.size() == 1);
  CHECK(r.infos[1].kind == ComponentKind::Command);
  CHECK(r.infos[1].name == "hbm");
  auto command = r.commands.at(0)(defaults(r.infos[1]));
  REQUIRE_MESSAGE(command.has_value(), command.status().message());
  CHECK((*command)->run({"show", "x.hbm"}).message() ==
        "hbm: unknown action 'show' (expected info, run or perf; see 'qflow hbm --help')");
  // Default options: platform nash from <plugin dir>/bpu-platforms, located with dladdr.
  auto made = r.targets.at(0)(defaults(r.infos[0]));
  REQUIRE_MESSAGE(made.has_value(), made.status().message());
  Options b2 = defaults(r.infos[0]);
  b2.set("platform", std::string("bernoulli2"));
  REQUIRE(r.targets.at(0)(b2).has_value());
  Options unknown = defaults(r.infos[0]);
  unknown.set("platform", std::string("x9"));
  auto refused = r.targets.at(0)(unknown);
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.status().message().find("no x9.toml in the built-in platforms (available: bayes, bernoulli2, nash)") !=
        std::string::npos);
}

TEST_CASE("plugin modules: the onnxruntime target registers one component and finds its platforms") {
  auto lib = std::make_shared<Library>(std::string(QFLOW_PLUGIN_DIR) + "/libqflow_target_onnxruntime.so");
  RecordingRegistrar r;
  check_library("libqflow_target_onnxruntime.so", "target-onnxruntime", ComponentKind::Target, "onnxruntime", r, lib);
  CHECK(r.infos.size() == 1);
  // Default options: platform x86_64 from <plugin dir>/onnxruntime-platforms, located with dladdr.
  auto made = r.targets.at(0)(defaults(r.infos[0]));
  REQUIRE_MESSAGE(made.has_value(), made.status().message());
  CHECK((*made)->quantization_rule().model.reduce_range == std::optional<bool>(true));
  Options vnni = defaults(r.infos[0]);
  vnni.set("platform", std::string("x86_64-vnni"));
  auto with_vnni = r.targets.at(0)(vnni);
  REQUIRE(with_vnni.has_value());
  CHECK((*with_vnni)->quantization_rule().empty());
  Options unknown = defaults(r.infos[0]);
  unknown.set("platform", std::string("arm64"));
  auto refused = r.targets.at(0)(unknown);
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.status().message() ==
        "onnxruntime platform 'arm64' not found: no arm64.toml in the built-in platforms (available: x86_64, x86_64-vnni)");
}

}  // namespace
}  // namespace qflow

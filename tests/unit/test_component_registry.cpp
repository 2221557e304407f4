// ComponentRegistry: declaration checks, option resolution, and loading the test plugins of tests/plugin.
#include <doctest/doctest.h>

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "framework/plugin/component_registry.h"
#include "framework/plugin/component_validation.h"

namespace qflow {

namespace {

ComponentInfo histogram_info() {
  ComponentInfo info;
  info.kind = ComponentKind::Observer;
  info.name = "histogram";
  info.summary = "histogram of |x|";
  info.options = {{"bins", OptionType::Int, int64_t{2048}, "number of bins"},
                  {"range-scale", OptionType::Float, 1.0, "widen the range"},
                  {"mode", OptionType::String, std::string("abs"), "abs or signed"}};
  return info;
}

// Absolute path of a test plugin built by tests/plugin, or "" when that folder is not part
// of the build (the tests that need one then say so and pass nothing off as checked).
std::string test_plugin(const std::string& name) {
#ifdef QFLOW_TEST_PLUGIN_DIR
  return std::string(QFLOW_TEST_PLUGIN_DIR) + "/libqflow_test_" + name + ".so";
#else
  (void)name;
  return {};
#endif
}

// "plugin '<path>': <reason>"; appended piecewise because GCC 12 warns (-Wrestrict, a false
// positive) on `"literal" + std::string&&` here.
std::string refusal_text(const std::string& name, const std::string& reason) {
  std::string text = "plugin '";
  text += test_plugin(name);
  text += "': ";
  text += reason;
  return text;
}

bool have_test_plugins() {
  if (!test_plugin("good").empty()) return true;
  MESSAGE("skipped: tests/plugin is not in the build, so QFLOW_TEST_PLUGIN_DIR is undefined");
  return false;
}

// Whether the dynamic loader still has the file mapped (RTLD_NOLOAD never loads it).
bool is_resident(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (!handle) return false;
  dlclose(handle);
  return true;
}

}  // namespace

TEST_CASE("component validation: kebab-case names") {
  CHECK(is_kebab_case("kl"));
  CHECK(is_kebab_case("dead-code-elimination"));
  CHECK(is_kebab_case("int8-v2"));
  CHECK_FALSE(is_kebab_case(""));
  CHECK_FALSE(is_kebab_case("Max"));
  CHECK_FALSE(is_kebab_case("-max"));
  CHECK_FALSE(is_kebab_case("max-"));
  CHECK_FALSE(is_kebab_case("a--b"));
  CHECK_FALSE(is_kebab_case("snake_case"));
  CHECK_FALSE(is_kebab_case("with space"));
}

TEST_CASE("component validation: declarations") {
  ComponentInfo info = histogram_info();
  CHECK(validate_component_info(info, ComponentKind::Observer).is_ok());

  Status wrong_kind = validate_component_info(info, ComponentKind::Calibrator);
  CHECK(wrong_kind.message() == "observer 'histogram' is registered as a calibrator but declares kind observer");

  info.name = "Histogram";
  CHECK(validate_component_info(info, ComponentKind::Observer).message() ==
        "observer name 'Histogram' is not kebab-case (lower-case letters and digits joined by single '-')");

  info = histogram_info();
  info.summary.clear();
  CHECK(validate_component_info(info, ComponentKind::Observer).message() == "observer 'histogram' has an empty summary");

  info = histogram_info();
  info.options.push_back({"bins", OptionType::Int, int64_t{1}, "again"});
  CHECK(validate_component_info(info, ComponentKind::Observer).message() ==
        "observer 'histogram': option 'bins' is declared twice");

  info = histogram_info();
  info.options[0].default_value = 2048.0;
  CHECK(validate_component_info(info, ComponentKind::Observer).message() ==
        "observer 'histogram': option 'bins' is declared int but its default is float");

  info = histogram_info();
  info.options[1].name = "rangeScale";
  CHECK(validate_component_info(info, ComponentKind::Observer).message() ==
        "observer 'histogram': option name 'rangeScale' is not kebab-case");
}

TEST_CASE("component validation: statistic declarations") {
  CHECK(is_statistic_name("range"));
  CHECK(is_statistic_name("signed-histogram"));
  CHECK(is_statistic_name("aciq.abs-mean"));
  CHECK_FALSE(is_statistic_name(""));
  CHECK_FALSE(is_statistic_name("aciq."));
  CHECK_FALSE(is_statistic_name(".mean"));
  CHECK_FALSE(is_statistic_name("abs_mean"));

  ComponentInfo info = histogram_info();
  info.published_statistics = {"range", "abs-histogram", "lab.second-moment"};
  CHECK(validate_component_info(info, ComponentKind::Observer).is_ok());

  info.published_statistics = {"Range"};
  CHECK(validate_component_info(info, ComponentKind::Observer).message() ==
        "observer 'histogram': statistic name 'Range' is not kebab-case words joined by '.' "
        "(\"signed-histogram\", \"aciq.abs-mean\")");

  info = histogram_info();
  info.required_statistics = {"range"};
  CHECK(validate_component_info(info, ComponentKind::Observer).message() ==
        "observer 'histogram' requires statistics, which only calibrators do");
}

TEST_CASE("component validation: option resolution") {
  const ComponentInfo info = histogram_info();
  Options values;
  values.set("bins", int64_t{128});
  values.set("range-scale", int64_t{2});  // an int literal is fine for a float option
  Expected<Options> resolved = resolve_component_options(info, values);
  REQUIRE(resolved);
  CHECK(resolved->get_int("bins") == 128);
  CHECK(resolved->get_float("range-scale") == 2.0);
  CHECK(resolved->get_string("mode") == "abs");  // default filled in
  CHECK(resolved->values().size() == 3);

  Options unknown;
  unknown.set("binz", int64_t{1});
  CHECK(resolve_component_options(info, unknown).status().message() ==
        "option 'binz' is not declared by observer 'histogram'; did you mean 'bins'?");

  Options wrong_type;
  wrong_type.set("bins", std::string("many"));
  CHECK(resolve_component_options(info, wrong_type).status().message() ==
        "option 'bins' of observer 'histogram' expects int, got string");

  Options float_for_int;
  float_for_int.set("bins", 2.5);
  CHECK(resolve_component_options(info, float_for_int).status().message() ==
        "option 'bins' of observer 'histogram' expects int, got float");

  ComponentInfo bare = info;
  bare.options.clear();
  CHECK(resolve_component_options(bare, unknown).status().message() ==
        "option 'binz' is not declared by observer 'histogram' (it takes no options)");
}

TEST_CASE("component registry: relative and missing paths are refused") {
  ComponentRegistry registry;
  CHECK(registry.load_library("libx.so").message() ==
        "plugin 'libx.so': path is not absolute (plugins are never searched for)");
  CHECK(registry.load_library("/no/such/libx.so").code() == StatusCode::NotFound);
  CHECK(registry.libraries().empty());
}

TEST_CASE("component registry: a good plugin's components and factories") {
  if (!have_test_plugins()) return;
  ComponentRegistry registry;
  const std::string path = test_plugin("good");
  REQUIRE(registry.load_library(path).is_ok());
  CHECK(registry.load_library(path).is_ok());  // a second load is a no-op
  REQUIRE(registry.libraries().size() == 1);
  const PluginLibrary& library = registry.libraries()[0];
  CHECK(library.path == path);
  CHECK(library.name == "test-good");
  CHECK(library.version == "1.2.3");
  CHECK(library.sha256.size() == 64);
  CHECK(library.components.size() == 4);

  REQUIRE(registry.find(ComponentKind::Calibrator, "fixed") != nullptr);
  CHECK(registry.find(ComponentKind::Observer, "fixed") == nullptr);
  CHECK(registry.find_any("noop").size() == 1);

  Options values;
  values.set("scale", int64_t{2});
  Expected<std::shared_ptr<Calibrator>> calibrator = registry.make_calibrator("fixed", values);
  REQUIRE(calibrator);
  std::map<std::string, TensorStatistics> stats{{"x", {}}};
  CalibrationRequest request;
  request.statistics = &stats;
  Expected<QuantTable> table = (*calibrator)->calibrate(request);
  REQUIRE(table);
  CHECK(table->at("x").scale.at(0) == 2.0f);

  Options negative;
  negative.set("scale", -1.0);
  CHECK(registry.make_calibrator("fixed", negative).status().message() ==
        "plugin 'test-good' component 'calibrator fixed': scale must be positive, got -1.000000");

  Options unlucky;
  unlucky.set("scale", 13.0);
  Status thrown = registry.make_calibrator("fixed", unlucky).status();
  CHECK(thrown.code() == StatusCode::Internal);
  CHECK(thrown.message() == "plugin 'test-good' component 'calibrator fixed': factory threw: unlucky scale");

  Options unknown;
  unknown.set("bins", int64_t{3});
  CHECK(registry.make_calibrator("fixed", unknown).status().message() ==
        "option 'bins' is not declared by calibrator 'fixed' (allowed: label, scale)");
  CHECK(registry.make_pass("fold", Options{}).status().message() == "no pass named 'fold' (available: noop)");
  CHECK(registry.make_target("null", Options{}));
  CHECK(registry.make_observer("counter", Options{}));
}

TEST_CASE("component registry: objects keep their library loaded") {
  if (!have_test_plugins()) return;
  const std::string path = test_plugin("good");
  std::shared_ptr<Observer> observer;
  {
    ComponentRegistry registry;
    REQUIRE(registry.load_library(path).is_ok());
    Options values;
    values.set("step", int64_t{5});
    Expected<std::shared_ptr<Observer>> made = registry.make_observer("counter", values);
    REQUIRE(made);
    observer = *made;
  }
  // The registry is gone; the object's code must still be there.
  CHECK(is_resident(path));
  REQUIRE(observer->observe(Tensor()).is_ok());
  CHECK(observer->statistics().count == 5);
  CHECK(observer->serialize() == "5");
  observer.reset();
  CHECK_FALSE(is_resident(path));
}

TEST_CASE("component registry: a failed load leaves the registry unchanged") {
  if (!have_test_plugins()) return;
  ComponentRegistry registry;
  REQUIRE(registry.load_library(test_plugin("good")).is_ok());
  const std::string other = test_plugin("bad_duplicate_other");
  CHECK(registry.load_library(other).message() ==
        refusal_text("bad_duplicate_other", "pass 'noop' is already provided by '" + test_plugin("good") + "'"));
  // bad_duplicate_other registered "fresh" before its collision; it must not have stayed.
  CHECK(registry.find(ComponentKind::Pass, "fresh") == nullptr);
  CHECK(registry.libraries().size() == 1);
  CHECK(registry.libraries()[0].components.size() == 4);
  CHECK_FALSE(is_resident(other));

  // The same library loads into a registry without the collision.
  ComponentRegistry alone;
  CHECK(alone.load_library(other).is_ok());
  CHECK(alone.find(ComponentKind::Pass, "fresh") != nullptr);
}

TEST_CASE("component registry: refusals name the file and the reason") {
  if (!have_test_plugins()) return;
  const auto refusal = [](const std::string& name) {
    ComponentRegistry registry;
    Status status = registry.load_library(test_plugin(name));
    CHECK(registry.libraries().empty());
    return status.message();
  };
  const std::string dir = std::filesystem::path(test_plugin("good")).parent_path().string();
  CHECK(refusal("bad_api_version") == refusal_text("bad_api_version", "API version 12, this qflow supports 11"));
  CHECK(refusal("no_entry") == refusal_text("no_entry", "no entry point 'qflow_plugin_entry' (not a qflow plugin?)"));
  CHECK(refusal("bad_register_throws") == refusal_text("bad_register_throws", "registration threw: out of coffee"));
  CHECK(refusal("bad_ignored_error") == refusal_text("bad_ignored_error", "pass 'no-summary' has an empty summary"));
  CHECK(refusal("bad_duplicate_within") == refusal_text("bad_duplicate_within", "pass 'twice' is registered twice"));

  ComponentRegistry registry;
  CHECK(registry.load_directory(dir).message().rfind("plugin '" + dir + "/", 0) == 0);
}

TEST_CASE("component registry: QFLOW_PLUGIN_PATH") {
  if (!have_test_plugins()) return;
  const char* saved = std::getenv("QFLOW_PLUGIN_PATH");
  const std::string saved_value = saved ? saved : "";
  // Empty entries are skipped, like an empty PATH element.
  std::string list = ":";
  list += test_plugin("good");
  list += "::";
  setenv("QFLOW_PLUGIN_PATH", list.c_str(), 1);
  {
    ComponentRegistry registry;
    CHECK(registry.load_default_locations().is_ok());
    CHECK(registry.find(ComponentKind::Observer, "counter") != nullptr);
  }
  setenv("QFLOW_PLUGIN_PATH", "relative/dir", 1);
  {
    ComponentRegistry registry;
    CHECK(registry.load_default_locations().message() == "QFLOW_PLUGIN_PATH entry 'relative/dir' is not an absolute path");
  }
  if (saved) setenv("QFLOW_PLUGIN_PATH", saved_value.c_str(), 1);
  else unsetenv("QFLOW_PLUGIN_PATH");
}

}  // namespace qflow

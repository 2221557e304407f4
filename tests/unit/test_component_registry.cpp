// ComponentRegistry: declaration checks, option resolution, and loading the test plugins of tests/plugin.
#include <doctest/doctest.h>

#include <dlfcn.h>

#include <cstdlib>
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
        "unknown option 'binz' for observer 'histogram' (allowed: bins, range-scale, mode)");

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
        "unknown option 'binz' for observer 'histogram' (allowed: none)");
}

TEST_CASE("component registry: relative and missing paths are refused") {
  ComponentRegistry registry;
  CHECK(registry.load_library("libx.so").message() ==
        "plugin 'libx.so': path is not absolute (plugins are never searched for)");
  CHECK(registry.load_library("/no/such/libx.so").code() == StatusCode::NotFound);
  CHECK(registry.libraries().empty());
}

}  // namespace qflow

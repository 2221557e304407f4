// Option declarations: limits checked at resolution, undeclared names suggested, getters refusing undeclared names.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <stdexcept>
#include <string>

#include "framework/plugin/component_validation.h"
#include "framework/plugin/option_checks.h"

namespace qflow {

namespace {

ComponentInfo shrink_max_info() {
  ComponentInfo info;
  info.kind = ComponentKind::Calibrator;
  info.name = "shrink-max";
  info.summary = "threshold at ratio * max|x|";
  info.options = {{"ratio", OptionType::Float, 0.95, "fraction of max|x|", {.min = 0.0, .max = 1.0, .min_exclusive = true}},
                  {"bins", OptionType::Int, int64_t{8}, "bins", {.min = 1.0}},
                  {"mode", OptionType::String, std::string("abs"), "mode", {.one_of = {"abs", "signed"}}},
                  {"layers", OptionType::StringList, std::vector<std::string>{}, "layers", {.one_of = {"conv", "gemm"}}}};
  return info;
}

std::string resolve_error(const std::string& name, OptionValue value) {
  Options values;
  values.set(name, std::move(value));
  Expected<Options> resolved = resolve_component_options(shrink_max_info(), values);
  return resolved ? std::string() : resolved.status().message();
}

std::string thrown_by(const std::function<void()>& read) {
  try {
    read();
  } catch (const std::logic_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("option checks: a misspelt name is answered with the close declared one") {
  const std::vector<OptionSpec> specs = shrink_max_info().options;
  CHECK(undeclared_option_text("ration", "calibrator 'shrink-max'", specs) ==
        "option 'ration' is not declared by calibrator 'shrink-max'; did you mean 'ratio'?");
  CHECK(undeclared_option_text("threshold", "calibrator 'shrink-max'", specs) ==
        "option 'threshold' is not declared by calibrator 'shrink-max' (allowed: bins, layers, mode, ratio)");
  CHECK(undeclared_option_text("x", "pass 'noop'", {}) == "option 'x' is not declared by pass 'noop' (it takes no options)");
  CHECK(resolve_error("ration", 0.5) == "option 'ration' is not declared by calibrator 'shrink-max'; did you mean 'ratio'?");
}

TEST_CASE("option checks: values outside the declared limits are refused at resolution") {
  CHECK(resolve_error("ratio", 0.5).empty());
  CHECK(resolve_error("ratio", 1.0).empty());
  CHECK(resolve_error("ratio", 1.5) == "option 'ratio' of calibrator 'shrink-max' must be in (0, 1], got 1.5");
  CHECK(resolve_error("ratio", 0.0) == "option 'ratio' of calibrator 'shrink-max' must be in (0, 1], got 0");
  CHECK(resolve_error("ratio", std::nan("")) == "option 'ratio' of calibrator 'shrink-max' must be in (0, 1], got nan");
  // An int given for a float option is checked as the float it becomes.
  CHECK(resolve_error("ratio", int64_t{2}) == "option 'ratio' of calibrator 'shrink-max' must be in (0, 1], got 2");
  CHECK(resolve_error("bins", int64_t{0}) == "option 'bins' of calibrator 'shrink-max' must be >= 1, got 0");
  CHECK(resolve_error("bins", int64_t{1}).empty());
  CHECK(resolve_error("mode", std::string("signed")).empty());
  CHECK(resolve_error("mode", std::string("sgned")) ==
        "option 'mode' of calibrator 'shrink-max' must be one of 'abs', 'signed', got 'sgned' (did you mean 'signed'?)");
  CHECK(resolve_error("layers", std::vector<std::string>{"conv", "lstm"}) ==
        "option 'layers' of calibrator 'shrink-max' must be one of 'conv', 'gemm', got 'lstm'");
}

TEST_CASE("option checks: limits that do not fit the declaration are refused when it registers") {
  ComponentInfo info = shrink_max_info();
  CHECK(validate_component_info(info, ComponentKind::Calibrator).is_ok());

  info.options[0].default_value = 2.0;
  CHECK(validate_component_info(info, ComponentKind::Calibrator).message() ==
        "the default of option 'ratio' of calibrator 'shrink-max' must be in (0, 1], got 2");
  info = shrink_max_info();
  info.options[0].limits = {.min = 1.0, .max = 0.0};
  CHECK(validate_component_info(info, ComponentKind::Calibrator).message() ==
        "option 'ratio' of calibrator 'shrink-max' declares an empty range");
  info = shrink_max_info();
  info.options[2].limits = {.min = 0.0};
  CHECK(validate_component_info(info, ComponentKind::Calibrator).message() ==
        "option 'mode' of calibrator 'shrink-max' is string but declares a numeric range");
  info = shrink_max_info();
  info.options[1].limits = {.one_of = {"1"}};
  CHECK(validate_component_info(info, ComponentKind::Calibrator).message() ==
        "option 'bins' of calibrator 'shrink-max' is int but declares allowed values");
}

TEST_CASE("option checks: reading an option the component did not declare throws, naming both") {
  Expected<Options> resolved = resolve_component_options(shrink_max_info(), Options{});
  REQUIRE(resolved);
  const Options& options = *resolved;
  CHECK(options.get_float("ratio") == 0.95);
  CHECK(thrown_by([&] { (void)options.get_float("ration"); }) ==
        "calibrator 'shrink-max' reads option 'ration', which it does not declare (declared: bins, layers, mode, ratio)");
  CHECK(thrown_by([&] { (void)options.get_int("ratio"); }) ==
        "calibrator 'shrink-max' reads option 'ratio' as int, but it is declared float");
  CHECK(thrown_by([] { (void)Options{}.get_bool("x"); }) == "a component reads option 'x', which it does not declare (declared: none)");
}

}  // namespace qflow

// Validation of component declarations and option resolution, shared by the registry and its tests.
#include "framework/plugin/component_validation.h"

#include <set>

#include "framework/plugin/option_checks.h"

namespace qflow {

namespace {

bool is_lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

const OptionSpec* find_option(const ComponentInfo& info, const std::string& name) {
  for (const OptionSpec& spec : info.options)
    if (spec.name == name) return &spec;
  return nullptr;
}

}  // namespace

bool is_kebab_case(std::string_view name) {
  if (name.empty() || name.front() == '-' || name.back() == '-') return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (name[i] == '-') {
      if (name[i - 1] == '-') return false;
    } else if (!is_lower_alnum(name[i])) {
      return false;
    }
  }
  return true;
}

std::string component_label(const ComponentInfo& info) {
  return std::string(component_kind_name(info.kind)) + " '" + info.name + "'";
}

bool is_statistic_name(std::string_view name) {
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = name.find('.', start);
    if (!is_kebab_case(name.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start)))
      return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

Status validate_component_info(const ComponentInfo& info, ComponentKind expected) {
  if (!is_kebab_case(info.name))
    return invalid_input(std::string(component_kind_name(expected)) + " name '" + info.name +
                         "' is not kebab-case (lower-case letters and digits joined by single '-')");
  if (info.kind != expected)
    return invalid_input(component_label(info) + " is registered as a " + std::string(component_kind_name(expected)) +
                         " but declares kind " + std::string(component_kind_name(info.kind)));
  if (info.summary.empty()) return invalid_input(component_label(info) + " has an empty summary");
  if (info.summary.find('\n') != std::string::npos)
    return invalid_input(component_label(info) + " has a summary of more than one line");
  if (!info.published_statistics.empty() && info.kind != ComponentKind::Observer)
    return invalid_input(component_label(info) + " publishes statistics, which only observers do");
  if (!info.required_statistics.empty() && info.kind != ComponentKind::Calibrator)
    return invalid_input(component_label(info) + " requires statistics, which only calibrators do");
  if (info.needs_samples && info.kind != ComponentKind::Pass)
    return invalid_input(component_label(info) + " declares that it reads samples, which only passes do");
  for (const auto* names : {&info.published_statistics, &info.required_statistics})
    for (const std::string& name : *names)
      if (!is_statistic_name(name))
        return invalid_input(component_label(info) + ": statistic name '" + name +
                             "' is not kebab-case words joined by '.' (\"signed-histogram\", \"aciq.abs-mean\")");
  std::set<std::string> seen;
  for (const OptionSpec& spec : info.options) {
    if (!is_kebab_case(spec.name))
      return invalid_input(component_label(info) + ": option name '" + spec.name + "' is not kebab-case");
    if (!seen.insert(spec.name).second)
      return invalid_input(component_label(info) + ": option '" + spec.name + "' is declared twice");
    if (option_value_type(spec.default_value) != spec.type)
      return invalid_input(component_label(info) + ": option '" + spec.name + "' is declared " +
                           std::string(option_type_name(spec.type)) + " but its default is " +
                           std::string(option_type_name(option_value_type(spec.default_value))));
    QFLOW_RETURN_IF_ERROR(check_option_limits(spec, component_label(info)));
  }
  return Status::ok();
}

Expected<Options> resolve_component_options(const ComponentInfo& info, const Options& values) {
  Options resolved;
  resolved.set_owner(component_label(info));
  for (const auto& [name, value] : values.values()) {
    const OptionSpec* spec = find_option(info, name);
    if (!spec) return invalid_input(undeclared_option_text(name, component_label(info), info.options));
    const OptionType given = option_value_type(value);
    if (given == spec->type) {
      QFLOW_RETURN_IF_ERROR(check_option_value(*spec, value, component_label(info)));
      resolved.set(name, value);
    } else if (spec->type == OptionType::Float && given == OptionType::Int) {
      // TOML and command lines write 2 for 2.0; the int is exact in a double for any sane value.
      const OptionValue as_float = static_cast<double>(std::get<int64_t>(value));
      QFLOW_RETURN_IF_ERROR(check_option_value(*spec, as_float, component_label(info)));
      resolved.set(name, as_float);
    } else {
      return invalid_input("option '" + name + "' of " + component_label(info) + " expects " +
                           std::string(option_type_name(spec->type)) + ", got " +
                           std::string(option_type_name(given)));
    }
  }
  for (const OptionSpec& spec : info.options)
    if (!resolved.has(spec.name)) resolved.set(spec.name, spec.default_value);
  return resolved;
}

}  // namespace qflow

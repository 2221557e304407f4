// Option checks shared by the registry and pipeline validation.
#include "framework/plugin/option_checks.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "qflow/core/suggest.h"

namespace qflow {

namespace {

// Shortest text that reads back as the same double: 0.5, 1, 1e-06.
std::string number_text(double x) {
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, x);
  return std::string(buffer, result.ptr);
}

std::string join_quoted(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "'" : ", '") + item + "'";
  return out;
}

bool is_number(OptionType type) { return type == OptionType::Int || type == OptionType::Float; }
bool is_text(OptionType type) { return type == OptionType::String || type == OptionType::StringList; }

// "in (0, 1]", ">= 1", "< 100"
std::string range_text(const OptionLimits& limits) {
  if (limits.min && limits.max)
    return "in " + std::string(limits.min_exclusive ? "(" : "[") + number_text(*limits.min) + ", " +
           number_text(*limits.max) + (limits.max_exclusive ? ")" : "]");
  if (limits.min) return (limits.min_exclusive ? "> " : ">= ") + number_text(*limits.min);
  return (limits.max_exclusive ? "< " : "<= ") + number_text(*limits.max);
}

bool in_range(const OptionLimits& limits, double x) {
  if (std::isnan(x)) return !limits.min && !limits.max;
  if (limits.min && (limits.min_exclusive ? !(x > *limits.min) : !(x >= *limits.min))) return false;
  if (limits.max && (limits.max_exclusive ? !(x < *limits.max) : !(x <= *limits.max))) return false;
  return true;
}

std::string label(const OptionSpec& spec, std::string_view owner) {
  return "option '" + spec.name + "' of " + std::string(owner);
}

}  // namespace

std::string undeclared_option_text(std::string_view name, std::string_view owner, const std::vector<OptionSpec>& specs) {
  std::vector<std::string> names;
  for (const OptionSpec& spec : specs) names.push_back(spec.name);
  std::sort(names.begin(), names.end());
  const std::string head = "option '" + std::string(name) + "' is not declared by " + std::string(owner);
  const std::vector<std::string> close = similar_names(name, names);
  if (!close.empty()) return head + "; did you mean " + join_quoted(close) + "?";
  if (names.empty()) return head + " (it takes no options)";
  std::string allowed;
  for (const std::string& n : names) allowed += (allowed.empty() ? "" : ", ") + n;
  return head + " (allowed: " + allowed + ")";
}

std::string option_limits_text(const OptionLimits& limits) {
  std::string text = limits.min || limits.max ? range_text(limits) : std::string();
  if (!limits.one_of.empty()) text += (text.empty() ? "" : ", ") + std::string("one of ") + join_quoted(limits.one_of);
  return text;
}

Status check_option_value(const OptionSpec& spec, const OptionValue& value, std::string_view owner) {
  const OptionLimits& limits = spec.limits;
  if ((limits.min || limits.max) && is_number(option_value_type(value))) {
    const bool is_int = option_value_type(value) == OptionType::Int;
    const double x = is_int ? static_cast<double>(std::get<int64_t>(value)) : std::get<double>(value);
    if (!in_range(limits, x))
      return invalid_input(label(spec, owner) + " must be " + range_text(limits) + ", got " +
                           (is_int ? std::to_string(std::get<int64_t>(value)) : number_text(x)));
  }
  if (limits.one_of.empty()) return Status::ok();
  auto allowed = [&](const std::string& item) {
    return std::find(limits.one_of.begin(), limits.one_of.end(), item) != limits.one_of.end();
  };
  std::vector<std::string> items;
  if (const auto* text = std::get_if<std::string>(&value)) items.push_back(*text);
  if (const auto* list = std::get_if<std::vector<std::string>>(&value)) items = *list;
  for (const std::string& item : items)
    if (!allowed(item)) {
      const std::vector<std::string> close = similar_names(item, limits.one_of);
      return invalid_input(label(spec, owner) + " must be one of " + join_quoted(limits.one_of) + ", got '" + item + "'" +
                           (close.empty() ? std::string() : " (did you mean " + join_quoted(close) + "?)"));
    }
  return Status::ok();
}

Status check_option_limits(const OptionSpec& spec, std::string_view owner) {
  const OptionLimits& limits = spec.limits;
  if ((limits.min || limits.max) && !is_number(spec.type))
    return invalid_input(label(spec, owner) + " is " + std::string(option_type_name(spec.type)) +
                         " but declares a numeric range");
  if (!limits.one_of.empty() && !is_text(spec.type))
    return invalid_input(label(spec, owner) + " is " + std::string(option_type_name(spec.type)) +
                         " but declares allowed values");
  if ((limits.min && std::isnan(*limits.min)) || (limits.max && std::isnan(*limits.max)) ||
      (limits.min && limits.max && *limits.min > *limits.max))
    return invalid_input(label(spec, owner) + " declares an empty range");
  Status fits = check_option_value(spec, spec.default_value, owner);
  if (!fits.is_ok()) return invalid_input("the default of " + fits.message());
  return Status::ok();
}

}  // namespace qflow

// Typed component options: declarations (name, type, default, help) and resolved values.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace qflow {

enum class OptionType { Bool, Int, Float, String, StringList };

// Alternative order matches OptionType.
using OptionValue = std::variant<bool, int64_t, double, std::string, std::vector<std::string>>;

inline std::string_view option_type_name(OptionType type) {
  switch (type) {
    case OptionType::Bool: return "bool";
    case OptionType::Int: return "int";
    case OptionType::Float: return "float";
    case OptionType::String: return "string";
    case OptionType::StringList: return "string-list";
  }
  return "unknown";
}

inline OptionType option_value_type(const OptionValue& value) { return static_cast<OptionType>(value.index()); }

// What values an option accepts beyond its type. The host checks them when it validates a
// pipeline (`qflow run --dry-run`), so a bad value is refused before any stage runs and the
// component's factory need not repeat the check. Every field defaults to "no limit".
struct OptionLimits {
  // Int and Float options: value >= min (> min when min_exclusive), likewise for max.
  std::optional<double> min = std::nullopt;
  std::optional<double> max = std::nullopt;
  bool min_exclusive = false;
  bool max_exclusive = false;
  // String options: the value is one of these; StringList options: every item is.
  std::vector<std::string> one_of = {};
};

struct OptionSpec {
  std::string name;  // kebab-case
  OptionType type = OptionType::String;
  OptionValue default_value;
  std::string help;
  OptionLimits limits = {};  // e.g. {.min = 0.0, .max = 1.0, .min_exclusive = true} for (0, 1]
};

// Values for every option a component declares (defaults filled in by the host), so
// components read them without checking presence. Reading a name the component did not
// declare, or with another type than declared, is a bug in the component: the getter throws
// std::logic_error naming the component and the option, and the host reports it as the
// component's failure the first time it runs.
class Options {
 public:
  void set(const std::string& name, OptionValue value) { values_[name] = std::move(value); }
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  const std::map<std::string, OptionValue>& values() const { return values_; }
  // Who the values belong to, e.g. "calibrator 'kl'": named in the getters' errors.
  void set_owner(std::string owner) { owner_ = std::move(owner); }
  const std::string& owner() const { return owner_; }

  bool get_bool(const std::string& name) const { return get<bool>(name); }
  int64_t get_int(const std::string& name) const { return get<int64_t>(name); }
  double get_float(const std::string& name) const { return get<double>(name); }
  std::string get_string(const std::string& name) const { return get<std::string>(name); }
  std::vector<std::string> get_strings(const std::string& name) const { return get<std::vector<std::string>>(name); }

 private:
  template <typename T>
  T get(const std::string& name) const {
    auto it = values_.find(name);
    const std::string who = owner_.empty() ? std::string("a component") : owner_;
    if (it == values_.end()) {
      std::string declared;
      for (const auto& [key, value] : values_) declared += (declared.empty() ? "" : ", ") + key;
      throw std::logic_error(who + " reads option '" + name + "', which it does not declare (declared: " +
                             (declared.empty() ? "none" : declared) + ")");
    }
    if (const T* v = std::get_if<T>(&it->second)) return *v;
    const OptionValue wanted{T{}};
    throw std::logic_error(who + " reads option '" + name + "' as " + std::string(option_type_name(option_value_type(wanted))) +
                           ", but it is declared " + std::string(option_type_name(option_value_type(it->second))));
  }
  std::map<std::string, OptionValue> values_;
  std::string owner_;
};

}  // namespace qflow

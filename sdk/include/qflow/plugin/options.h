// Typed component options: declarations (name, type, default, help) and resolved values.
#pragma once

#include <cstdint>
#include <map>
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

struct OptionSpec {
  std::string name;  // kebab-case
  OptionType type = OptionType::String;
  OptionValue default_value;
  std::string help;
};

// Values for every option a component declares (defaults filled in by the host), so
// components read them without checking presence. Reading an undeclared name or with
// the wrong type is a programming error in the component: it returns the type's zero.
class Options {
 public:
  void set(const std::string& name, OptionValue value) { values_[name] = std::move(value); }
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  const std::map<std::string, OptionValue>& values() const { return values_; }

  bool get_bool(const std::string& name) const { return get<bool>(name); }
  int64_t get_int(const std::string& name) const { return get<int64_t>(name); }
  double get_float(const std::string& name) const { return get<double>(name); }
  std::string get_string(const std::string& name) const { return get<std::string>(name); }
  std::vector<std::string> get_strings(const std::string& name) const { return get<std::vector<std::string>>(name); }

 private:
  template <typename T>
  T get(const std::string& name) const {
    auto it = values_.find(name);
    if (it == values_.end()) return T{};
    if (const T* v = std::get_if<T>(&it->second)) return *v;
    return T{};
  }
  std::map<std::string, OptionValue> values_;
};

}  // namespace qflow

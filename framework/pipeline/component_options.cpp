// "key=value" component options parsed with the declared option types.
#include "framework/pipeline/component_options.h"

#include <algorithm>

#include "framework/pipeline/pipeline_text.h"
#include "framework/plugin/option_checks.h"

namespace qflow {

Expected<Options> parse_component_options(const ComponentInfo& info, const std::vector<std::string>& items,
                                          const std::string& option) {
  const std::string what = std::string(component_kind_name(info.kind)) + " '" + info.name + "'";
  Options options;
  for (const std::string& item : items) {
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      return invalid_input(option + ": '" + item + "' is not \"key=value\"");
    const std::string key = item.substr(0, eq);
    auto spec = std::find_if(info.options.begin(), info.options.end(), [&](const OptionSpec& s) { return s.name == key; });
    if (spec == info.options.end()) return invalid_input(option + ": " + undeclared_option_text(key, what, info.options));
    if (options.has(key)) return invalid_input(option + ": option '" + key + "' given twice");
    Expected<OptionValue> value = parse_option_text(item.substr(eq + 1), spec->type);
    if (!value) return value.status().with_context(option + ": option '" + key + "' of " + what);
    QFLOW_RETURN_IF_ERROR(check_option_value(*spec, *value, what).with_context(option));
    options.set(key, std::move(*value));
  }
  return options;
}

}  // namespace qflow

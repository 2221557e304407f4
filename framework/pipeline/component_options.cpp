// "key=value" component options parsed with the declared option types.
#include "framework/pipeline/component_options.h"

#include <algorithm>

#include "framework/pipeline/pipeline_text.h"

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
    if (spec == info.options.end()) {
      std::vector<std::string> names;
      for (const OptionSpec& s : info.options) names.push_back(s.name);
      std::sort(names.begin(), names.end());
      return invalid_input(option + ": unknown option '" + key + "' for " + what + " (" +
                           (names.empty() ? std::string("it takes no options") : "allowed: " + join(names, ", ")) + ")");
    }
    if (options.has(key)) return invalid_input(option + ": option '" + key + "' given twice");
    Expected<OptionValue> value = parse_option_text(item.substr(eq + 1), spec->type);
    if (!value) return value.status().with_context(option + ": option '" + key + "' of " + what);
    options.set(key, std::move(*value));
  }
  return options;
}

}  // namespace qflow

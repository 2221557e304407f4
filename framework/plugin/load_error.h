// Turns the dynamic loader's refusal of a plugin library into a message its author can act on.
#pragma once

#include <string>
#include <string_view>

namespace qflow {

// `loader_text` is dlerror()'s text for `path`. The file name it starts with is dropped (the
// caller names the file); a mangled undefined symbol is shown demangled, with the fix:
// "undefined symbol: helper(double const*, unsigned long) (_Z6helperPKdm): link the library
// that defines it, or build with qflow_add_plugin, which refuses undefined symbols".
std::string explain_load_error(std::string_view loader_text, std::string_view path);

}  // namespace qflow

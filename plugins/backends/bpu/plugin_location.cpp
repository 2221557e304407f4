// Where this plugin library lives: dladdr on a symbol of the library itself.
#include "plugin_location.h"

#include <dlfcn.h>

#include <filesystem>
#include <system_error>

namespace qflow {

namespace {
// Any object defined in this binary works; a data object avoids casting a function pointer.
const char kAnchor = 0;
}  // namespace

Expected<std::string> bpu_plugin_directory() {
  Dl_info info{};
  if (dladdr(&kAnchor, &info) == 0 || info.dli_fname == nullptr)
    return not_found("bpu backend: cannot determine the path of its own library (dladdr failed)");
  std::error_code ec;
  const std::filesystem::path path = std::filesystem::absolute(info.dli_fname, ec);
  if (ec) return io_error(std::string("bpu backend: cannot resolve ") + info.dli_fname + ": " + ec.message());
  return path.parent_path().string();
}

}  // namespace qflow

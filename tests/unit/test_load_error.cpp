// Load errors of plugin libraries: the loader's text made actionable.
#include <doctest/doctest.h>

#include <string>

#include "framework/plugin/load_error.h"

namespace qflow {

TEST_CASE("load error: an undefined C++ symbol is shown demangled with the fix") {
  const std::string path = "/plugins/libresearch.so";
  CHECK(explain_load_error(path + ": undefined symbol: _Z25research_helper_laplace_bPKdm", path) ==
        "undefined symbol: research_helper_laplace_b(double const*, unsigned long) (_Z25research_helper_laplace_bPKdm): "
        "link the library that defines it, or build with qflow_add_plugin, which refuses undefined symbols");
}

TEST_CASE("load error: a C symbol and a versioned one keep their names") {
  const std::string path = "/p/libx.so";
  CHECK(explain_load_error(path + ": undefined symbol: lapack_dgesv", path) ==
        "undefined symbol: lapack_dgesv: link the library that defines it, or build with qflow_add_plugin, which refuses "
        "undefined symbols");
  CHECK(explain_load_error(path + ": undefined symbol: _ZN5qflow3fooEv, version QFLOW_1", path) ==
        "undefined symbol: qflow::foo() (_ZN5qflow3fooEv), version QFLOW_1: link the library that defines it, or build "
        "with qflow_add_plugin, which refuses undefined symbols");
}

TEST_CASE("load error: other refusals pass through without the file name") {
  CHECK(explain_load_error("/p/libx.so: invalid ELF header", "/p/libx.so") == "invalid ELF header");
  CHECK(explain_load_error("libz.so.9: cannot open shared object file: No such file or directory", "/p/libx.so") ==
        "libz.so.9: cannot open shared object file: No such file or directory");
  CHECK(explain_load_error("", "/p/libx.so") == "the dynamic loader refused it");
}

}  // namespace qflow

// The versioned C entry point every qflow plugin library exports, and the macro that defines it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>

#include "qflow/plugin/registrar.h"
#include "qflow/version.h"

// Version rule: bump QFLOW_PLUGIN_API_VERSION whenever qflow_plugin_info's layout, the
// meaning of a field, or any SDK interface a plugin compiles against (the classes in
// qflow/plugin/*.h and qflow/ir/*.h) changes incompatibly. The host loads only libraries
// whose api_version equals its own.
#define QFLOW_PLUGIN_API_VERSION 11u

// Identity of the C++ toolchain: plugins exchange C++ objects with the host, so both must
// agree on the compiler and its standard library.
#define QFLOW_STRINGIFY_INNER(x) #x
#define QFLOW_STRINGIFY(x) QFLOW_STRINGIFY_INNER(x)
#if defined(__clang__)
#define QFLOW_COMPILER_ID "clang " __clang_version__
#elif defined(__GNUC__)
#define QFLOW_COMPILER_ID "gcc " QFLOW_STRINGIFY(__GNUC__) "." QFLOW_STRINGIFY(__GNUC_MINOR__)
#else
#define QFLOW_COMPILER_ID "unknown"
#endif

extern "C" {

// Opaque to C; it is a qflow::ComponentRegistrar.
struct qflow_registrar;

// Returns 0 on success; otherwise writes a message into `error` (NUL-terminated).
typedef int (*qflow_register_fn)(struct qflow_registrar* registrar, char* error, std::size_t error_size);

struct qflow_plugin_info {
  uint32_t api_version;        // QFLOW_PLUGIN_API_VERSION the plugin was built with
  uint32_t struct_size;        // sizeof(qflow_plugin_info) in the plugin
  const char* plugin_name;     // kebab-case library name
  const char* plugin_version;  // the plugin's own version
  const char* compiler;        // QFLOW_COMPILER_ID
  const char* sdk_version;     // QFLOW_VERSION_STRING of the SDK it was built against
  qflow_register_fn register_components;
};

typedef const struct qflow_plugin_info* (*qflow_plugin_entry_fn)(void);
}

static_assert(sizeof(void*) == 8 && sizeof(qflow_plugin_info) == 48, "qflow_plugin_info layout changed: bump QFLOW_PLUGIN_API_VERSION");
static_assert(offsetof(qflow_plugin_info, register_components) == 40, "qflow_plugin_info layout changed");

#define QFLOW_PLUGIN_ENTRY_SYMBOL "qflow_plugin_entry"

namespace qflow::plugin_detail {
// Converts the C callback into a call of `fn(ComponentRegistrar&)`; no exception crosses.
template <Status (*fn)(ComponentRegistrar&)>
int register_trampoline(qflow_registrar* registrar, char* error, std::size_t error_size) {
  try {
    Status status = fn(*reinterpret_cast<ComponentRegistrar*>(registrar));
    if (status.is_ok()) return 0;
    std::snprintf(error, error_size, "%s", status.message().c_str());
  } catch (const std::exception& e) {
    std::snprintf(error, error_size, "registration threw: %s", e.what());
  } catch (...) {
    std::snprintf(error, error_size, "registration threw a non-standard exception");
  }
  return 1;
}
}  // namespace qflow::plugin_detail

// Defines the library's entry point. REGISTER is a function
// `qflow::Status REGISTER(qflow::ComponentRegistrar&)`; use once per library.
#define QFLOW_PLUGIN(NAME, VERSION, REGISTER)                                                      \
  extern "C" __attribute__((visibility("default"))) const qflow_plugin_info* qflow_plugin_entry() { \
    static const qflow_plugin_info info = {QFLOW_PLUGIN_API_VERSION,                               \
                                           static_cast<uint32_t>(sizeof(qflow_plugin_info)),       \
                                           NAME,                                                   \
                                           VERSION,                                                \
                                           QFLOW_COMPILER_ID,                                      \
                                           QFLOW_VERSION_STRING,                                   \
                                           &::qflow::plugin_detail::register_trampoline<REGISTER>}; \
    return &info;                                                                                  \
  }

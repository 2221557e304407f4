# Install rules: the CLI, libqflow_core, built-in plugins, SDK headers and the qflow CMake package.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Paths are fixed (not GNUInstallDirs' lib64 / multiarch variants) because the host finds its
# plugins at ../lib/qflow/plugins relative to libqflow_core and the CLI at ../lib.
set(QFLOW_INSTALL_LIBDIR lib)
set(QFLOW_INSTALL_PLUGINDIR lib/qflow/plugins)
set(QFLOW_INSTALL_CMAKEDIR lib/cmake/qflow)

# --- the host --------------------------------------------------------------------------
# The installed tree is relocatable: every search path is relative to the binary itself.
set_target_properties(qflow PROPERTIES INSTALL_RPATH "$ORIGIN/../${QFLOW_INSTALL_LIBDIR}")
# libqflow_core finds libqflow_runtime beside itself (the CLI no longer links the runtime).
set_target_properties(qflow_core PROPERTIES INSTALL_RPATH "$ORIGIN")
# Installed consumers see only <prefix>/include; the build-tree folders stay out of the export.
target_include_directories(qflow_core PUBLIC $<INSTALL_INTERFACE:include>)
set_target_properties(qflow_core PROPERTIES EXPORT_NAME core)

# qflow::sdk is what a plugin links: the public headers, libqflow_core (which carries the
# IR implementation and its private dependencies) and the C++ standard plugins must use.
add_library(qflow_sdk INTERFACE)
add_library(qflow::sdk ALIAS qflow_sdk)
target_link_libraries(qflow_sdk INTERFACE qflow_core)
target_compile_features(qflow_sdk INTERFACE cxx_std_20)
set_target_properties(qflow_sdk PROPERTIES EXPORT_NAME sdk)

install(TARGETS qflow RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS qflow_core qflow_sdk EXPORT qflowTargets
  LIBRARY DESTINATION ${QFLOW_INSTALL_LIBDIR})

# --- built-in plugins --------------------------------------------------------------------
# Every MODULE library under plugins/ that lands in the plugin folder. install(TARGETS)
# rather than copying the folder so CMake rewrites the build RPATH (which names this build
# tree) to the relocatable one.
function(qflow_collect_plugin_targets dir out_var)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  set(found)
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    get_target_property(output_dir ${target} LIBRARY_OUTPUT_DIRECTORY)
    if(type STREQUAL "MODULE_LIBRARY" AND output_dir STREQUAL QFLOW_PLUGIN_OUTPUT_DIRECTORY)
      list(APPEND found ${target})
    endif()
  endforeach()
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(subdir IN LISTS subdirs)
    qflow_collect_plugin_targets(${subdir} sub_found)
    list(APPEND found ${sub_found})
  endforeach()
  set(${out_var} ${found} PARENT_SCOPE)
endfunction()

qflow_collect_plugin_targets(${PROJECT_SOURCE_DIR}/plugins QFLOW_BUILTIN_PLUGINS)
if(QFLOW_BUILTIN_PLUGINS)
  # A plugin finds libqflow_core two levels up, as in the build tree.
  set_target_properties(${QFLOW_BUILTIN_PLUGINS} PROPERTIES INSTALL_RPATH "$ORIGIN/../..")
  install(TARGETS ${QFLOW_BUILTIN_PLUGINS} LIBRARY DESTINATION ${QFLOW_INSTALL_PLUGINDIR})
endif()
# Data that plugins keep next to themselves (e.g. backend platform descriptions). The
# libraries themselves come from install(TARGETS) above; the folder is created here so the
# rule holds before any plugin has been built.
file(MAKE_DIRECTORY ${QFLOW_PLUGIN_OUTPUT_DIRECTORY})
install(DIRECTORY ${QFLOW_PLUGIN_OUTPUT_DIRECTORY}/ DESTINATION ${QFLOW_INSTALL_PLUGINDIR}
  USE_SOURCE_PERMISSIONS
  PATTERN "*.so" EXCLUDE)

# --- SDK headers ---------------------------------------------------------------------------
install(DIRECTORY ${PROJECT_SOURCE_DIR}/sdk/include/qflow DESTINATION include
  FILES_MATCHING PATTERN "*.h")
install(FILES ${PROJECT_BINARY_DIR}/include/qflow/version.h DESTINATION include/qflow)
# runtime/CMakeLists.txt installs runtime/include: the C API (qflow/runtime.h), the compiler
# interface (qflow/runtime/*.h) and qflow/core/status.h, the Status the SDK headers use too.

# --- CMake package ---------------------------------------------------------------------------
# Plugins must be built by the compiler that built the host; the package records it so a
# consumer is warned at configure time rather than refused at load time.
set(QFLOW_CXX_COMPILER_ID ${CMAKE_CXX_COMPILER_ID})
set(QFLOW_CXX_COMPILER_VERSION ${CMAKE_CXX_COMPILER_VERSION})
set(QFLOW_CXX_COMPILER ${CMAKE_CXX_COMPILER})
set(QFLOW_PLUGIN_INSTALL_DIR ${QFLOW_INSTALL_PLUGINDIR})

install(EXPORT qflowTargets NAMESPACE qflow:: DESTINATION ${QFLOW_INSTALL_CMAKEDIR}
  FILE qflowTargets.cmake)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/qflowConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/qflowConfig.cmake
  INSTALL_DESTINATION ${QFLOW_INSTALL_CMAKEDIR}
  PATH_VARS QFLOW_PLUGIN_INSTALL_DIR)
# The host loads only plugins built against its own SDK version (entry.h records it), so a
# plugin is rebuilt for each qflow release and a request for another version cannot match.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/qflowConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY ExactVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/cmake/qflowConfig.cmake
  ${PROJECT_BINARY_DIR}/cmake/qflowConfigVersion.cmake
  ${PROJECT_SOURCE_DIR}/cmake/qflow_plugin.map
  DESTINATION ${QFLOW_INSTALL_CMAKEDIR})

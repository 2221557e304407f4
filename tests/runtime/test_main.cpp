// The doctest main of qflow_runtime_tests: every tests/runtime/*.cpp is linked into one binary.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

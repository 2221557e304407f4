// A shared library that is not a qflow plugin: it exports a function but no entry point.
extern "C" __attribute__((visibility("default"))) int qflow_test_not_a_plugin() { return 42; }

# -DQFLOW_FUZZ=ON (with CC=clang CXX=clang++): every target is built with libFuzzer's
# coverage instrumentation plus AddressSanitizer and UndefinedBehaviorSanitizer (any UB is
# fatal), and fuzz/ adds one libFuzzer executable per target (`make fuzz`, docs/fuzzing.md).
option(QFLOW_FUZZ "Build the libFuzzer targets of fuzz/ (clang only)" OFF)
if(QFLOW_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "QFLOW_FUZZ needs clang (configure with CC=clang CXX=clang++)")
  endif()
  set(QFLOW_FUZZ_SANITIZERS -fsanitize=address,undefined -fno-sanitize-recover=undefined)
  # Instrumented code everywhere (the loaders live in libqflow_core and libqflow_runtime);
  # only the fuzz executables link libFuzzer's main.
  add_compile_options(-fsanitize=fuzzer-no-link ${QFLOW_FUZZ_SANITIZERS} -fno-omit-frame-pointer)
  add_link_options(${QFLOW_FUZZ_SANITIZERS})
endif()

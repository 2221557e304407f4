// libFuzzer entry point of one target; QFLOW_FUZZ_TARGET names it (one executable per target).
#include <cstdio>
#include <cstdlib>

#include "fuzz/fuzz_targets.h"

namespace {

const qflow::fuzz::Target& this_target() {
  static const qflow::fuzz::Target* target = [] {
    const qflow::fuzz::Target* found = qflow::fuzz::find_target(QFLOW_FUZZ_TARGET);
    if (!found) {
      std::fprintf(stderr, "fuzz: no target named '%s'\n", QFLOW_FUZZ_TARGET);
      std::abort();
    }
    return found;
  }();
  return *target;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  this_target().run(data, size);
  return 0;
}

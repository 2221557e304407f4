// libFuzzer's custom mutator hook for the hbm fuzzer only (linked into qflow_fuzz_hbm):
// structure-aware mutation that keeps CRCs and layout valid (hbm_mutator.h).
#include <cstddef>
#include <cstdint>

#include "fuzz/hbm_mutator.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  return qflow::fuzz::mutate_hbm(data, size, max_size, seed, LLVMFuzzerMutate);
}

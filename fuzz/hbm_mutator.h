// Structure-aware mutation of .hbm files for the hbm fuzzer: a byte mutation almost always
// breaks a section CRC, so the fuzzer would test little beyond the container checks. This
// mutates one part of the file (a section's bytes, or the header and table), lays the
// sections out again and recomputes what the reader checks first (offsets, sizes, zero
// padding, file size, section CRCs, header CRC), so the mutated bytes reach the section
// decoders, lowered::validate and the executor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

namespace qflow::fuzz {

// libFuzzer's LLVMFuzzerMutate: mutates data[0, size) in place, returns the new size (at
// most max_size).
using ByteMutator = std::function<size_t(uint8_t* data, size_t size, size_t max_size)>;

// Mutates the .hbm in data[0, size) (buffer of max_size bytes), returns the new size. A file
// whose header or section table cannot be read is mutated as plain bytes.
size_t mutate_hbm(uint8_t* data, size_t size, size_t max_size, unsigned seed, const ByteMutator& mutate);

// Recomputes every section CRC whose section lies inside the file, then the header CRC;
// does nothing when the header or the table is out of range. Returns whether it did.
bool fix_hbm_checksums(uint8_t* data, size_t size);

}  // namespace qflow::fuzz

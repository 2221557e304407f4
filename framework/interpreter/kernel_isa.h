// The instruction sets the interpreter's kernels run on, under the process-wide cap (QFLOW_ISA,
// `qflow --isa`; runtime/include/qflow/runtime/isa_cap.h), for the layers above it.
#pragma once

#include <string>
#include <string_view>

#include "qflow/core/status.h"

namespace qflow {

// Puts the cap `name` (portable, avx2, avxvnni, avx512, native) in force; `source` names the
// option or variable in messages. Unknown names and levels this CPU lacks are refused.
Status set_kernel_isa_cap(std::string_view name, std::string_view source);
// Ok, or why QFLOW_ISA cannot be honoured.
Status kernel_isa_cap_status();
// Back to QFLOW_ISA's cap (tests).
void reset_kernel_isa_cap();
// What runs: "cap native: float sgemm avx512, depthwise avx512; integer avx512vnni".
std::string kernel_isa_summary();
// Whether the CPU has AVX2 (and FMA) and the cap admits it: what picks the AVX2 copies of the
// interpreter's element loops (activations, Q/DQ, Softmax) and of the lane sums (layer
// comparison, output cosine).
bool kernel_isa_allows_avx2();
// Whether the CPU has AVX-512 (the avx512 level) and the cap admits it: the AVX-512 copies
// of the lane sums and of the Conv/Gemm epilogue.
bool kernel_isa_allows_avx512();

}  // namespace qflow

// The interpreter's view of the instruction-set cap: forwards to the runtime's, which both
// sides' kernels consult, and names what each kernel family runs on under it.
#include "framework/interpreter/kernel_isa.h"

#include "framework/interpreter/kernels/depthwise_conv.h"
#include "framework/interpreter/kernels/sgemm.h"
#include "qflow/runtime/integer_gemm.h"
#include "qflow/runtime/isa_cap.h"

namespace qflow {

Status set_kernel_isa_cap(std::string_view name, std::string_view source) { return isa::set_cap(name, source); }

Status kernel_isa_cap_status() { return isa::cap_status(); }

void reset_kernel_isa_cap() { isa::reset_cap(); }

std::string kernel_isa_summary() {
  const SgemmIsa sgemm = sgemm_isa();
  const char* sgemm_name = sgemm == SgemmIsa::Avx512 ? "avx512" : sgemm == SgemmIsa::Avx2 ? "avx2" : "portable";
  const DepthwiseIsa dw = depthwise_best_isa();
  const char* depthwise = dw == DepthwiseIsa::Avx512 ? "avx512" : dw == DepthwiseIsa::Avx2 ? "avx2" : "portable";
  return std::string("cap ") + isa::level_name(isa::cap()) + ": float sgemm " + sgemm_name + ", depthwise " +
         depthwise + "; integer " + fx::fast::isa_name(fx::fast::best_isa());
}

bool kernel_isa_allows_avx2() {
  static const bool cpu = isa::cpu_has(isa::Level::avx2);
  return cpu && isa::allows(isa::Level::avx2);
}

bool kernel_isa_allows_avx512() {
  static const bool cpu = isa::cpu_has(isa::Level::avx512);
  return cpu && isa::allows(isa::Level::avx512);
}

}  // namespace qflow

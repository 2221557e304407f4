// conv kernels.
#include "framework/runtime/kernel_registry.h"
#include "framework/runtime/kernel_util.h"

namespace qflow {

void register_conv_kernels(KernelRegistry& registry) { (void)registry; }

}  // namespace qflow

// Kernels for the com.microsoft contrib ops qflow's passes emit (ONNX Runtime runs them natively).
#include <cmath>

#include "framework/interpreter/kernel_registry.h"
#include "framework/interpreter/kernels/elementwise_common.h"

namespace qflow {

namespace {

// Gelu with the exact erf form, as ONNX Runtime computes it: 0.5 * x * (1 + erf(x / sqrt(2))).
Status gelu(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* x, context.required_input(0));
  return elementwise::name_node(context, dispatch_float(x->dtype(), [&]<typename T>() -> Status {
    Tensor out(x->dtype(), x->shape());
    const T inv_sqrt2 = static_cast<T>(0.70710678118654752440);
    elementwise::unary_map(context, x->data<T>(), out.data<T>(), x->numel(), [inv_sqrt2](T v) {
      return static_cast<T>(T(0.5) * v * (T(1) + std::erf(v * inv_sqrt2)));
    });
    context.outputs[0] = std::move(out);
    return Status::ok();
  }));
}

}  // namespace

void register_contrib_kernels(KernelRegistry& registry) {
  registry.add_function("com.microsoft", "Gelu", 1, kLatestOpset, gelu);
}

}  // namespace qflow

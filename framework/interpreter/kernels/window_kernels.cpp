// Window kernels: HannWindow, HammingWindow and BlackmanWindow, the generalized cosine
// windows a0 - a1 cos(2 pi n / N') + a2 cos(4 pi n / N'), N' = size (periodic) or size - 1.
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "framework/interpreter/kernel_registry.h"
#include "framework/interpreter/kernel_util.h"
#include "framework/interpreter/kernels/bound_kernel.h"
#include "framework/interpreter/kernels/shape_kernel_util.h"

namespace qflow {
namespace {

struct CosineWindow {
  double a0, a1, a2;
};

KernelFactory window_kernel(CosineWindow w) {
  return bound_kernel([w](const Node& node, int64_t) -> KernelFunction {
    const int64_t datatype = node.attr_int("output_datatype", 1);
    const bool periodic = node.attr_int("periodic", 1) != 0;
    return [w, datatype, periodic](KernelContext& ctx) -> Status {
      const DType dtype = dtype_from_onnx(static_cast<int32_t>(datatype));
      if (dtype == DType::Undefined || dtype == DType::Bool)
        return ctx.error("output_datatype " + std::to_string(datatype) + " is not a supported numeric type");
      QFLOW_ASSIGN_OR_RETURN(const Tensor* size_input, ctx.required_input(0));
      QFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> size, shape_detail::read_ints(ctx, *size_input, "size"));
      if (size.size() != 1 || size[0] < 0) return ctx.error("size must be one non-negative integer");
      const int64_t n = size[0];
      QFLOW_ASSIGN_OR_RETURN(Tensor values, shape_detail::make_output(ctx, DType::Float64, {n}));
      const double period = static_cast<double>(periodic ? n : n - 1);
      for (int64_t i = 0; i < n; ++i) {
        const double angle = 2 * std::numbers::pi * static_cast<double>(i) / period;
        values.data<double>()[i] = w.a0 - w.a1 * std::cos(angle) + w.a2 * std::cos(2 * angle);
      }
      // A symmetric window of one sample has no period (0 / 0 above); numpy and scipy make it 1.
      if (!periodic && n == 1) values.data<double>()[0] = 1.0;
      ctx.outputs[0] = values.cast(dtype);
      return Status::ok();
    };
  });
}

}  // namespace

void register_window_kernels(KernelRegistry& registry) {
  registry.add("", "HannWindow", 17, kLatestOpset, window_kernel({0.5, 0.5, 0.0}));
  registry.add("", "HammingWindow", 17, kLatestOpset, window_kernel({25.0 / 46.0, 21.0 / 46.0, 0.0}));
  registry.add("", "BlackmanWindow", 17, kLatestOpset, window_kernel({0.42, 0.5, 0.08}));
}

}  // namespace qflow

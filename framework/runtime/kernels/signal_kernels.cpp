// Signal kernels: DFT by its definition (O(N^2) per signal, summed in double), forward and
// inverse, one-sided (RFFT and IRFFT) or full, with zero-padding or truncation to dft_length.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "framework/runtime/kernel_registry.h"
#include "framework/runtime/kernel_util.h"

namespace qflow {
namespace {

struct DftPlan {
  int64_t outer = 1, inner = 1;  // elements before the axis, signal positions after it (complex part excluded)
  int64_t in_len = 0;            // input length along the axis
  int64_t length = 0;            // dft_length: the transform size
  int64_t out_len = 0;           // output length along the axis
  bool inverse = false, onesided = false;
  bool complex_in = false;
};

template <typename T>
Status dft_typed(KernelContext& context, const Tensor& x, const DftPlan& p, Shape out_shape) {
  Tensor y(x.dtype(), std::move(out_shape));
  const T* in = x.data<T>();
  T* out = y.data<T>();
  const int64_t in_parts = p.complex_in ? 2 : 1;
  const bool real_out = p.inverse && p.onesided;
  const int64_t out_parts = real_out ? 1 : 2;
  const double sign = p.inverse ? 1.0 : -1.0;
  const double scale = p.inverse ? 1.0 / static_cast<double>(p.length) : 1.0;
  // The terms of input position n: IRFFT extends a half spectrum by conjugate symmetry.
  const int64_t terms = real_out ? p.length : std::min(p.in_len, p.length);
  context.parallel_for(p.outer * p.inner, p.out_len * terms * 8, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t o = row / p.inner, i = row % p.inner;
      const auto read = [&](int64_t n, double& re, double& im) {
        const T* v = in + ((o * p.in_len + n) * p.inner + i) * in_parts;
        re = static_cast<double>(v[0]);
        im = p.complex_in ? static_cast<double>(v[1]) : 0.0;
      };
      for (int64_t k = 0; k < p.out_len; ++k) {
        double sum_re = 0.0, sum_im = 0.0;
        for (int64_t n = 0; n < terms; ++n) {
          double re = 0.0, im = 0.0;
          if (!real_out) {
            read(n, re, im);
          } else if (n < p.in_len) {
            read(n, re, im);
          } else if (p.length - n < p.in_len) {
            read(p.length - n, re, im);  // X[N - n] conjugated
            im = -im;
          }
          // (k * n) mod N keeps the angle small, so it stays exact for long signals.
          const double angle = sign * 2.0 * std::numbers::pi * static_cast<double>((k * n) % p.length) /
                               static_cast<double>(p.length);
          const double c = std::cos(angle), s = std::sin(angle);
          sum_re += re * c - im * s;
          sum_im += re * s + im * c;
        }
        T* dst = out + ((o * p.out_len + k) * p.inner + i) * out_parts;
        dst[0] = static_cast<T>(sum_re * scale);
        if (!real_out) dst[1] = static_cast<T>(sum_im * scale);
      }
    }
  });
  context.outputs[0] = std::move(y);
  return Status::ok();
}

Status dft(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* x, context.required_input(0));
  QFLOW_RETURN_IF_ERROR(check_float_input(context, *x));
  const int64_t rank = x->rank();
  if (rank < 2 || (x->dim(rank - 1) != 1 && x->dim(rank - 1) != 2))
    return context.error("input must end in a dimension of 1 (real) or 2 (complex), got " + shape_to_string(x->shape()));
  // Opset 20 moved axis from an attribute (default 1) to input 2 (default -2).
  int64_t axis = context.opset >= 20 ? -2 : context.node.attr_int("axis", 1);
  if (context.opset >= 20)
    if (const Tensor* a = context.input(2)) {
      if (a->numel() != 1) return context.error("axis must be a scalar");
      axis = a->to_int64s()[0];
    }
  if (axis < 0) axis += rank;
  if (axis < 0 || axis > rank - 2)
    return context.error("axis " + std::to_string(axis) + " is outside the signal dimensions of " + shape_to_string(x->shape()));
  DftPlan p;
  p.inverse = context.node.attr_int("inverse", 0) != 0;
  p.onesided = context.node.attr_int("onesided", 0) != 0;
  p.complex_in = x->dim(rank - 1) == 2;
  p.in_len = x->dim(axis);
  p.outer = dims_product(x->shape(), 0, static_cast<std::size_t>(axis));
  p.inner = dims_product(x->shape(), static_cast<std::size_t>(axis) + 1, static_cast<std::size_t>(rank - 1));
  if (p.onesided && !p.inverse && p.complex_in) return context.error("a one-sided forward DFT needs a real input");
  if (p.onesided && p.inverse && !p.complex_in) return context.error("a one-sided inverse DFT needs a complex input");
  p.length = p.onesided && p.inverse ? 2 * (p.in_len - 1) : p.in_len;
  if (const Tensor* length = context.input(1)) {
    if (length->numel() != 1) return context.error("dft_length must be a scalar");
    p.length = length->to_int64s()[0];
  }
  if (p.length <= 0) return context.error("dft_length must be positive, got " + std::to_string(p.length));
  p.out_len = p.onesided && !p.inverse ? p.length / 2 + 1 : p.length;
  Shape out_shape = x->shape();
  out_shape[static_cast<std::size_t>(axis)] = p.out_len;
  out_shape.back() = p.onesided && p.inverse ? 1 : 2;
  return dispatch_float(x->dtype(), [&]<typename T>() { return dft_typed<T>(context, *x, p, out_shape); });
}

}  // namespace

void register_signal_kernels(KernelRegistry& registry) { registry.add_function("", "DFT", 17, kLatestOpset, dft); }

}  // namespace qflow

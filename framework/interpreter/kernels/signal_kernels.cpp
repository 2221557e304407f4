// Signal kernels: DFT by its definition (O(N^2) per signal, summed in double), forward and
// inverse, one-sided (RFFT and IRFFT) or full, with zero-padding or truncation to dft_length;
// STFT on top of it, and the mel filter bank (MelWeightMatrix) that usually follows.
#include <algorithm>
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

// STFT: frames of frame_length samples every frame_step, each multiplied by the window and
// transformed by the DFT above; output [batch, frames, bins, 2].
Status stft(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* signal, context.required_input(0));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* step_input, context.required_input(1));
  QFLOW_RETURN_IF_ERROR(check_float_input(context, *signal));
  if (signal->rank() != 3 || (signal->dim(2) != 1 && signal->dim(2) != 2))
    return context.error("signal must be [batch, length, 1 or 2], got " + shape_to_string(signal->shape()));
  QFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> step, shape_detail::read_ints(context, *step_input, "frame_step"));
  if (step.size() != 1 || step[0] <= 0) return context.error("frame_step must be one positive integer");
  const Tensor* window = context.input(2);
  const Tensor* length_input = context.input(3);
  int64_t length = 0;
  if (window) {
    if (window->rank() != 1 || window->dtype() != signal->dtype())
      return context.error("window must be a 1-D " + std::string(dtype_name(signal->dtype())) + " tensor, got " +
                           std::string(dtype_name(window->dtype())) + " " + shape_to_string(window->shape()));
    length = window->dim(0);
  }
  if (length_input) {
    QFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> given, shape_detail::read_ints(context, *length_input, "frame_length"));
    if (given.size() != 1) return context.error("frame_length must be one integer");
    if (window && given[0] != length)
      return context.error("frame_length " + std::to_string(given[0]) + " differs from the window length " + std::to_string(length));
    length = given[0];
  }
  if (!window && !length_input) return context.error("needs a window or a frame_length");
  const int64_t batch = signal->dim(0), signal_len = signal->dim(1), parts = signal->dim(2);
  if (length <= 0 || length > signal_len)
    return context.error("frame length " + std::to_string(length) + " does not fit a signal of " + std::to_string(signal_len));
  DftPlan p;
  p.onesided = context.node.attr_int("onesided", 1) != 0;
  p.complex_in = parts == 2;
  if (p.onesided && p.complex_in) return context.error("a one-sided STFT needs a real signal");
  const int64_t frames = 1 + (signal_len - length) / step[0];
  p.outer = batch * frames;
  p.in_len = p.length = length;
  p.out_len = p.onesided ? length / 2 + 1 : length;
  return dispatch_float(signal->dtype(), [&]<typename T>() -> Status {
    Tensor framed(signal->dtype(), {p.outer, length, parts});
    const T* in = signal->data<T>();
    T* out = framed.data<T>();
    for (int64_t f = 0; f < p.outer; ++f) {
      const T* src = in + ((f / frames) * signal_len + (f % frames) * step[0]) * parts;
      for (int64_t n = 0; n < length; ++n)
        for (int64_t c = 0; c < parts; ++c)
          out[(f * length + n) * parts + c] = window ? static_cast<T>(src[n * parts + c] * window->data<T>()[n]) : src[n * parts + c];
    }
    return dft_typed<T>(context, framed, p, {batch, frames, p.out_len, 2});
  });
}

// MelWeightMatrix: triangular filters between mel-spaced edges, as the ONNX reference
// builds them (edges floored to DFT bins); output [dft_length / 2 + 1, num_mel_bins].
KernelFunction bind_mel_weight_matrix(const Node& node, int64_t) {
  const int64_t datatype = node.attr_int("output_datatype", 1);
  return [datatype](KernelContext& context) -> Status {
    const DType dtype = dtype_from_onnx(static_cast<int32_t>(datatype));
    if (dtype == DType::Undefined || dtype == DType::Bool)
      return context.error("output_datatype " + std::to_string(datatype) + " is not a supported numeric type");
    std::vector<double> args;
    for (std::size_t i = 0; i < 5; ++i) {
      QFLOW_ASSIGN_OR_RETURN(const Tensor* t, context.required_input(i));
      if (t->numel() != 1) return context.error("input " + std::to_string(i) + " must be a scalar, got " + shape_to_string(t->shape()));
      args.push_back(t->to_doubles()[0]);
    }
    const int64_t mel_bins = static_cast<int64_t>(args[0]), dft_length = static_cast<int64_t>(args[1]);
    const double sample_rate = args[2], lower_hz = args[3], upper_hz = args[4];
    if (mel_bins <= 0 || dft_length <= 0 || sample_rate <= 0 || lower_hz < 0 || upper_hz < lower_hz)
      return context.error("needs positive num_mel_bins, dft_length and sample_rate and 0 <= lower_edge_hertz <= upper_edge_hertz");
    const int64_t spectrum_bins = dft_length / 2 + 1;
    const auto to_mel = [](double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); };
    const double low_mel = to_mel(lower_hz);
    const double mel_step = (to_mel(upper_hz) - low_mel) / static_cast<double>(mel_bins + 2);
    std::vector<int64_t> edges;
    for (int64_t i = 0; i < mel_bins + 2; ++i) {
      const double hz = 700.0 * (std::pow(10.0, (static_cast<double>(i) * mel_step + low_mel) / 2595.0) - 1.0);
      edges.push_back(static_cast<int64_t>(std::floor(static_cast<double>(dft_length + 1) * hz / sample_rate)));
    }
    if (edges.back() >= spectrum_bins)
      return context.error("upper_edge_hertz " + std::to_string(upper_hz) + " lies above the spectrum of " +
                           std::to_string(spectrum_bins) + " bins");
    Tensor weights(DType::Float64, {spectrum_bins, mel_bins});
    double* w = weights.data<double>();
    for (int64_t m = 0; m < mel_bins; ++m) {
      const int64_t left = edges[static_cast<std::size_t>(m)], center = edges[static_cast<std::size_t>(m) + 1],
                    right = edges[static_cast<std::size_t>(m) + 2];
      if (center == left) {
        w[center * mel_bins + m] = 1;
      } else {
        for (int64_t j = left; j <= center; ++j)
          w[j * mel_bins + m] = static_cast<double>(j - left) / static_cast<double>(center - left);
      }
      for (int64_t j = center; j < right; ++j)
        w[j * mel_bins + m] = static_cast<double>(right - j) / static_cast<double>(right - center);
    }
    context.outputs[0] = weights.cast(dtype);
    return Status::ok();
  };
}

}  // namespace

void register_signal_kernels(KernelRegistry& registry) {
  registry.add_function("", "DFT", 17, kLatestOpset, dft);
  registry.add_function("", "STFT", 17, kLatestOpset, stft);
  registry.add("", "MelWeightMatrix", 17, kLatestOpset, bound_kernel(bind_mel_weight_matrix));
}

}  // namespace qflow

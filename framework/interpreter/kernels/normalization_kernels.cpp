// Normalization kernels: BatchNormalization, InstanceNormalization, LpNormalization, LRN,
// LayerNormalization, MeanVarianceNormalization, Softmax, LogSoftmax and Hardmax.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "framework/interpreter/kernel_registry.h"
#include "framework/interpreter/kernel_util.h"
#include "framework/interpreter/kernels/bound_kernel.h"
#include "framework/interpreter/kernels/softmax_exp.h"

namespace qflow {
namespace {

bool wants_output(const KernelContext& context, std::size_t i) {
  return i < context.outputs.size() && context.node.output(i) != nullptr;
}

// Mean and population variance of n contiguous values (0 and 0 when n is 0), two passes in
// double: the statistics of InstanceNormalization, GroupNormalization and LayerNormalization.
struct MeanVariance {
  double mean = 0.0;
  double variance = 0.0;
};

template <typename T>
MeanVariance mean_variance(const T* v, int64_t n) {
  if (n <= 0) return {};
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(v[i]);
  const double mean = sum / static_cast<double>(n);
  double sq = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(v[i]) - mean;
    sq += d * d;
  }
  return {mean, sq / static_cast<double>(n)};
}

// BatchNormalization -----------------------------------------------------------------------

// Parameters are per channel (C values) or, for the pre-opset-9 `spatial=0` form, per
// channel and position (C * D1 * ... * Dn values).
Expected<bool> batchnorm_per_position(const KernelContext& context, const Tensor& x, int64_t channels,
                                      int64_t inner) {
  for (std::size_t i = 1; i <= 4; ++i) {
    const Tensor* p = context.input(i);
    if (!p) return context.error("input " + std::to_string(i) + " is required");
    if (p->dtype() != x.dtype())
      return context.error("input " + std::to_string(i) + " has type " + std::string(dtype_name(p->dtype())) +
                           ", expected " + std::string(dtype_name(x.dtype())));
  }
  const int64_t n = context.input(1)->numel();
  for (std::size_t i = 2; i <= 4; ++i)
    if (context.input(i)->numel() != n) return context.error("scale, B, mean and var must have the same size");
  if (n == channels) return false;
  if (n == channels * inner && inner != 1) return true;
  return context.error("parameters have " + std::to_string(n) + " elements, expected " + std::to_string(channels) +
                       " (one per channel of input shape " + shape_to_string(x.shape()) + ")");
}

template <typename T>
Status batchnorm_inference(KernelContext& context, const Tensor& x, float epsilon) {
  const int64_t batch = x.rank() > 0 ? x.dim(0) : 1;
  const int64_t channels = x.rank() > 1 ? x.dim(1) : 1;
  const int64_t inner = dims_product(x.shape(), 2, x.shape().size());
  QFLOW_ASSIGN_OR_RETURN(const bool per_position, batchnorm_per_position(context, x, channels, inner));
  const T* scale = context.input(1)->data<T>();
  const T* bias = context.input(2)->data<T>();
  const T* mean = context.input(3)->data<T>();
  const T* var = context.input(4)->data<T>();
  // One division and square root per parameter, not per element; subtracting the mean
  // before scaling keeps precision when the mean is large against the spread.
  const int64_t params = context.input(1)->numel();
  std::vector<T> k(static_cast<std::size_t>(params));
  for (int64_t p = 0; p < params; ++p)
    k[static_cast<std::size_t>(p)] = scale[p] / std::sqrt(var[p] + static_cast<T>(epsilon));
  QFLOW_ASSIGN_OR_RETURN(Tensor y, context.allocate(x.dtype(), x.shape()));
  const T* in = x.data<T>();
  T* out = y.data<T>();
  context.parallel_for(batch * channels, 2 * inner, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t c = row % channels;
      const T* src = in + row * inner;
      T* dst = out + row * inner;
      if (per_position) {
        for (int64_t i = 0; i < inner; ++i) {
          const std::size_t p = static_cast<std::size_t>(c * inner + i);
          dst[i] = (src[i] - mean[p]) * k[p] + bias[p];
        }
      } else {
        // Per-channel parameters hoisted out of the row: the loop vectorises.
        const std::size_t p = static_cast<std::size_t>(c);
        const T m = mean[p], kp = k[p], b = bias[p];
        for (int64_t i = 0; i < inner; ++i) dst[i] = (src[i] - m) * kp + b;
      }
    }
  });
  context.outputs[0] = std::move(y);
  return Status::ok();
}

// Opset 14+ training_mode=1: normalise with the batch statistics and update the running
// statistics with momentum, as the operator's reference definition does.
template <typename T>
Status batchnorm_training(KernelContext& context, const Tensor& x, float epsilon, float momentum) {
  const int64_t batch = x.rank() > 0 ? x.dim(0) : 1;
  const int64_t channels = x.rank() > 1 ? x.dim(1) : 1;
  const int64_t inner = dims_product(x.shape(), 2, x.shape().size());
  QFLOW_ASSIGN_OR_RETURN(const bool per_position, batchnorm_per_position(context, x, channels, inner));
  if (per_position) return context.error("training mode needs per-channel parameters");
  const T* scale = context.input(1)->data<T>();
  const T* bias = context.input(2)->data<T>();
  const T* input_mean = context.input(3)->data<T>();
  const T* input_var = context.input(4)->data<T>();
  const T* in = x.data<T>();
  const double count = static_cast<double>(batch * inner);
  std::vector<double> mean(static_cast<std::size_t>(channels), 0.0), var(static_cast<std::size_t>(channels), 0.0);
  for (int64_t c = 0; c < channels; ++c) {
    double sum = 0.0;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < inner; ++i) sum += static_cast<double>(in[(b * channels + c) * inner + i]);
    const double m = count > 0 ? sum / count : 0.0;
    double sq = 0.0;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < inner; ++i) {
        const double d = static_cast<double>(in[(b * channels + c) * inner + i]) - m;
        sq += d * d;
      }
    mean[static_cast<std::size_t>(c)] = m;
    var[static_cast<std::size_t>(c)] = count > 0 ? sq / count : 0.0;
  }
  Tensor y(x.dtype(), x.shape());
  T* out = y.data<T>();
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t c = 0; c < channels; ++c) {
      const double inv = 1.0 / std::sqrt(var[static_cast<std::size_t>(c)] + epsilon);
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t k = (b * channels + c) * inner + i;
        out[k] = static_cast<T>((static_cast<double>(in[k]) - mean[static_cast<std::size_t>(c)]) * inv *
                                    static_cast<double>(scale[c]) +
                                static_cast<double>(bias[c]));
      }
    }
  context.outputs[0] = std::move(y);
  const Shape stat_shape{channels};
  if (wants_output(context, 1)) {
    Tensor running_mean(x.dtype(), stat_shape);
    for (int64_t c = 0; c < channels; ++c)
      running_mean.data<T>()[c] = static_cast<T>(static_cast<double>(input_mean[c]) * momentum +
                                                 mean[static_cast<std::size_t>(c)] * (1.0 - momentum));
    context.outputs[1] = std::move(running_mean);
  }
  if (wants_output(context, 2)) {
    Tensor running_var(x.dtype(), stat_shape);
    for (int64_t c = 0; c < channels; ++c)
      running_var.data<T>()[c] = static_cast<T>(static_cast<double>(input_var[c]) * momentum +
                                                var[static_cast<std::size_t>(c)] * (1.0 - momentum));
    context.outputs[2] = std::move(running_var);
  }
  return Status::ok();
}

Status batch_normalization(KernelContext& context, float epsilon, bool training, float momentum) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* x, context.required_input(0));
  QFLOW_RETURN_IF_ERROR(check_float_input(context, *x));
  if (x->rank() < 2) return context.error("input must have rank >= 2, got " + shape_to_string(x->shape()));
  if (training) {
    return dispatch_float(x->dtype(), [&]<typename T>() { return batchnorm_training<T>(context, *x, epsilon, momentum); });
  }
  // Before opset 14 the extra outputs only exist in training graphs; an inference
  // interpreter cannot give them a meaning the exporter agreed on.
  for (std::size_t i = 1; i < context.outputs.size(); ++i)
    if (wants_output(context, i))
      return unsupported(context.node.op_type() + " '" + context.node.name() + "': output " + std::to_string(i) +
                         " (training statistics) is only computed with training_mode=1 at opset 14 or later");
  return dispatch_float(x->dtype(), [&]<typename T>() { return batchnorm_inference<T>(context, *x, epsilon); });
}

// The attributes are read once, when the node's kernel is created.
KernelFunction bind_batch_normalization(const Node& node, int64_t opset) {
  const float epsilon = node.attr_float("epsilon", 1e-5f);
  const bool training = opset >= 14 && node.attr_int("training_mode", 0) != 0;
  const float momentum = node.attr_float("momentum", 0.9f);
  return [=](KernelContext& context) { return batch_normalization(context, epsilon, training, momentum); };
}

// InstanceNormalization --------------------------------------------------------------------

template <typename T>
Status instance_norm_typed(KernelContext& context, const Tensor& x, const Tensor& scale, const Tensor& bias,
                           float epsilon) {
  const int64_t batch = x.dim(0), channels = x.dim(1);
  const int64_t inner = dims_product(x.shape(), 2, x.shape().size());
  Tensor y(x.dtype(), x.shape());
  const T* in = x.data<T>();
  T* out = y.data<T>();
  const T* s = scale.data<T>();
  const T* b = bias.data<T>();
  context.parallel_for(batch * channels, 4 * inner, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t c = row % channels;
      const T* src = in + row * inner;
      T* dst = out + row * inner;
      const auto [mean, var] = mean_variance(src, inner);
      const double k = static_cast<double>(s[c]) / std::sqrt(var + epsilon);
      for (int64_t i = 0; i < inner; ++i)
        dst[i] = static_cast<T>((static_cast<double>(src[i]) - mean) * k + static_cast<double>(b[c]));
    }
  });
  context.outputs[0] = std::move(y);
  return Status::ok();
}

Status instance_normalization(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* x, context.required_input(0));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* scale, context.required_input(1));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* bias, context.required_input(2));
  QFLOW_RETURN_IF_ERROR(check_float_input(context, *x));
  if (x->rank() < 2) return context.error("input must have rank >= 2, got " + shape_to_string(x->shape()));
  if (scale->dtype() != x->dtype() || bias->dtype() != x->dtype())
    return context.error("scale and B must have the input's element type");
  if (scale->numel() != x->dim(1) || bias->numel() != x->dim(1))
    return context.error("scale and B must have " + std::to_string(x->dim(1)) + " elements (one per channel)");
  const float epsilon = context.node.attr_float("epsilon", 1e-5f);
  return dispatch_float(x->dtype(),
                        [&]<typename T>() { return instance_norm_typed<T>(context, *x, *scale, *bias, epsilon); });
}

// GroupNormalization ------------------------------------------------------------------------

// Statistics per sample and group of C / G channels; scale and bias per group at opsets 18-20,
// per channel from 21 (where qflow's opset upgrade expands them, framework/quant/opset_upgrade).
template <typename T>
Status group_norm_typed(KernelContext& context, const Tensor& x, const Tensor& scale, const Tensor& bias, int64_t groups,
                        bool per_channel, float epsilon) {
  const int64_t batch = x.dim(0), channels = x.dim(1);
  const int64_t per_group = channels / groups;
  const int64_t inner = dims_product(x.shape(), 2, x.shape().size());
  const int64_t span = per_group * inner;
  Tensor y(x.dtype(), x.shape());
  const T* in = x.data<T>();
  T* out = y.data<T>();
  const T* s = scale.data<T>();
  const T* b = bias.data<T>();
  context.parallel_for(batch * groups, 4 * span, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t g = row % groups;
      const T* src = in + row * span;
      T* dst = out + row * span;
      const auto [mean, var] = mean_variance(src, span);
      const double inv_std = 1.0 / std::sqrt(var + epsilon);
      for (int64_t c = 0; c < per_group; ++c) {
        const int64_t p = per_channel ? g * per_group + c : g;
        const double k = static_cast<double>(s[p]) * inv_std;
        const double shift = static_cast<double>(b[p]);
        for (int64_t i = c * inner; i < (c + 1) * inner; ++i)
          dst[i] = static_cast<T>((static_cast<double>(src[i]) - mean) * k + shift);
      }
    }
  });
  context.outputs[0] = std::move(y);
  return Status::ok();
}

Status group_normalization(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* x, context.required_input(0));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* scale, context.required_input(1));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* bias, context.required_input(2));
  QFLOW_RETURN_IF_ERROR(check_float_input(context, *x));
  if (x->rank() < 2) return context.error("input must have rank >= 2, got " + shape_to_string(x->shape()));
  const int64_t groups = context.node.attr_int("num_groups", 0);
  if (groups <= 0 || x->dim(1) % groups != 0)
    return context.error("num_groups " + std::to_string(groups) + " does not divide " + std::to_string(x->dim(1)) +
                         " channels");
  if (scale->dtype() != x->dtype() || bias->dtype() != x->dtype())
    return context.error("scale and bias must have the input's element type");
  const bool per_channel = context.opset >= 21;
  const int64_t expected = per_channel ? x->dim(1) : groups;
  if (scale->numel() != expected || bias->numel() != expected)
    return context.error("scale and bias must have " + std::to_string(expected) + " elements (one per " +
                         (per_channel ? "channel" : "group") + " at opset " + std::to_string(context.opset) + ")");
  const float epsilon = context.node.attr_float("epsilon", 1e-5f);
  return dispatch_float(x->dtype(), [&]<typename T>() {
    return group_norm_typed<T>(context, *x, *scale, *bias, groups, per_channel, epsilon);
  });
}

// LpNormalization ----------------------------------------------------------------------------

template <typename T>
Status lp_norm_typed(KernelContext& context, const Tensor& x, int64_t axis, int64_t p) {
  const int64_t outer = dims_product(x.shape(), 0, static_cast<std::size_t>(axis));
  const int64_t len = x.dim(axis);
  const int64_t inner = dims_product(x.shape(), static_cast<std::size_t>(axis) + 1, x.shape().size());
  Tensor y(x.dtype(), x.shape());
  const T* in = x.data<T>();
  T* out = y.data<T>();
  context.parallel_for(outer * inner, 3 * len, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t base = (row / inner) * len * inner + row % inner;
      double norm = 0.0;
      for (int64_t i = 0; i < len; ++i) {
        const double v = static_cast<double>(in[base + i * inner]);
        norm += p == 1 ? std::abs(v) : v * v;
      }
      if (p == 2) norm = std::sqrt(norm);
      // A zero vector has no direction; keep it zero rather than producing NaN.
      for (int64_t i = 0; i < len; ++i)
        out[base + i * inner] = norm == 0.0 ? T(0) : static_cast<T>(static_cast<double>(in[base + i * inner]) / norm);
    }
  });
  context.outputs[0] = std::move(y);
  return Status::ok();
}

Status lp_normalization(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* x, context.required_input(0));
  QFLOW_RETURN_IF_ERROR(check_float_input(context, *x));
  const int64_t p = context.node.attr_int("p", 2);
  if (p != 1 && p != 2) return context.error("p must be 1 or 2, got " + std::to_string(p));
  auto axis = normalize_axis(context.node.attr_int("axis", -1), x->rank());
  if (!axis) return context.error(axis.status().message());
  return dispatch_float(x->dtype(), [&]<typename T>() { return lp_norm_typed<T>(context, *x, *axis, p); });
}

// LRN ----------------------------------------------------------------------------------------

// Each element is divided by (bias + alpha / size * the sum of squares over a window of
// neighbouring channels)^beta; the window is clipped at the first and last channel.
template <typename T>
Status lrn_typed(KernelContext& context, const Tensor& x, int64_t size, double alpha, double beta, double bias) {
  const int64_t n = x.dim(0), channels = x.dim(1);
  const int64_t inner = dims_product(x.shape(), 2, x.shape().size());
  const int64_t before = (size - 1) / 2, after = size - 1 - before;
  Tensor y(x.dtype(), x.shape());
  const T* in = x.data<T>();
  T* out = y.data<T>();
  context.parallel_for(n * inner, channels * size, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t base = (row / inner) * channels * inner + row % inner;
      for (int64_t c = 0; c < channels; ++c) {
        double square_sum = 0.0;
        for (int64_t k = std::max<int64_t>(0, c - before); k <= std::min(channels - 1, c + after); ++k) {
          const double v = static_cast<double>(in[base + k * inner]);
          square_sum += v * v;
        }
        const double scale = std::pow(bias + alpha / static_cast<double>(size) * square_sum, beta);
        out[base + c * inner] = static_cast<T>(static_cast<double>(in[base + c * inner]) / scale);
      }
    }
  });
  context.outputs[0] = std::move(y);
  return Status::ok();
}

KernelFunction bind_lrn(const Node& node, int64_t) {
  const int64_t size = node.attr_int("size", 0);
  const double alpha = node.attr_float("alpha", 1e-4f), beta = node.attr_float("beta", 0.75f), bias = node.attr_float("bias", 1.0f);
  return [=](KernelContext& context) -> Status {
    QFLOW_ASSIGN_OR_RETURN(const Tensor* x, context.required_input(0));
    QFLOW_RETURN_IF_ERROR(check_float_input(context, *x));
    if (size <= 0) return context.error("size must be positive, got " + std::to_string(size));
    if (x->rank() < 3) return context.error("the input must be [N, C, D1, ...], got " + shape_to_string(x->shape()));
    return dispatch_float(x->dtype(), [&]<typename T>() { return lrn_typed<T>(context, *x, size, alpha, beta, bias); });
  };
}

// LayerNormalization -------------------------------------------------------------------------

template <typename T, typename U>
Status layer_norm_typed(KernelContext& context, const Tensor& x, int64_t axis, float epsilon, const Tensor& scale,
                        const Tensor* bias, DType stash) {
  const Shape norm_shape(x.shape().begin() + axis, x.shape().end());
  const int64_t outer = dims_product(x.shape(), 0, static_cast<std::size_t>(axis));
  const int64_t inner = dims_product(norm_shape, 0, norm_shape.size());
  // Scale and B broadcast unidirectionally to the normalised shape.
  std::vector<int64_t> scale_index(static_cast<std::size_t>(inner)), bias_index(static_cast<std::size_t>(inner));
  for_each_broadcast(norm_shape, scale.shape(), bias ? bias->shape() : norm_shape, [&](int64_t i, int64_t a, int64_t b) {
    scale_index[static_cast<std::size_t>(i)] = a;
    bias_index[static_cast<std::size_t>(i)] = b;
  });
  Shape stat_shape(x.shape().begin(), x.shape().begin() + axis);
  stat_shape.resize(x.shape().size(), 1);
  Tensor y(x.dtype(), x.shape());
  Tensor mean_out(stash, stat_shape), inv_std_out(stash, stat_shape);
  const T* in = x.data<T>();
  const T* s = scale.data<T>();
  const T* b = bias ? bias->data<T>() : nullptr;
  T* out = y.data<T>();
  U* mean_data = mean_out.data<U>();
  U* inv_data = inv_std_out.data<U>();
  context.parallel_for(outer, 8 * inner, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const T* src = in + row * inner;
      T* dst = out + row * inner;
      const auto [mean, var] = mean_variance(src, inner);
      const double inv_std = 1.0 / std::sqrt(var + epsilon);
      for (int64_t i = 0; i < inner; ++i) {
        double v = (static_cast<double>(src[i]) - mean) * inv_std *
                   static_cast<double>(s[scale_index[static_cast<std::size_t>(i)]]);
        if (b) v += static_cast<double>(b[bias_index[static_cast<std::size_t>(i)]]);
        dst[i] = static_cast<T>(v);
      }
      mean_data[row] = static_cast<U>(mean);
      inv_data[row] = static_cast<U>(inv_std);
    }
  });
  context.outputs[0] = std::move(y);
  if (wants_output(context, 1)) context.outputs[1] = std::move(mean_out);
  if (wants_output(context, 2)) context.outputs[2] = std::move(inv_std_out);
  return Status::ok();
}

Status layer_normalization(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* x, context.required_input(0));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* scale, context.required_input(1));
  const Tensor* bias = context.input(2);
  QFLOW_RETURN_IF_ERROR(check_float_input(context, *x));
  if (scale->dtype() != x->dtype() || (bias && bias->dtype() != x->dtype()))
    return context.error("Scale and B must have the input's element type");
  auto axis = normalize_axis(context.node.attr_int("axis", -1), x->rank());
  if (!axis) return context.error(axis.status().message());
  const Shape norm_shape(x->shape().begin() + *axis, x->shape().end());
  for (const Tensor* p : {scale, bias}) {
    if (!p) continue;
    auto shape = broadcast_shapes(p->shape(), norm_shape);
    if (!shape || *shape != norm_shape)
      return context.error("Scale/B shape " + shape_to_string(p->shape()) +
                           " does not broadcast to the normalized shape " + shape_to_string(norm_shape));
  }
  const float epsilon = context.node.attr_float("epsilon", 1e-5f);
  const int64_t stash_attr = context.node.attr_int("stash_type", 1);
  const DType stash = dtype_from_onnx(static_cast<int32_t>(stash_attr));
  return dispatch_float(x->dtype(), [&]<typename T>() -> Status {
    if (stash == DType::Float32) return layer_norm_typed<T, float>(context, *x, *axis, epsilon, *scale, bias, stash);
    if (stash == DType::Float64) return layer_norm_typed<T, double>(context, *x, *axis, epsilon, *scale, bias, stash);
    return unsupported(context.node.op_type() + " '" + context.node.name() + "': stash_type " +
                       std::to_string(stash_attr) + " is not supported (float or double expected)");
  });
}

// MeanVarianceNormalization ------------------------------------------------------------------

template <typename T>
Status mvn_typed(KernelContext& context, const Tensor& x, const std::vector<bool>& reduced) {
  // Walk every element as (kept index, reduced index) so statistics are gathered per kept
  // position whatever axes are reduced.
  const std::size_t rank = x.shape().size();
  Shape kept_shape;
  for (std::size_t d = 0; d < rank; ++d) kept_shape.push_back(reduced[d] ? 1 : x.dim(static_cast<int64_t>(d)));
  const int64_t kept = shape_numel(kept_shape);
  const int64_t total = x.numel();
  const int64_t count = kept > 0 ? total / kept : 0;
  std::vector<int64_t> group(static_cast<std::size_t>(total));
  for_each_broadcast(x.shape(), x.shape(), kept_shape,
                     [&](int64_t i, int64_t, int64_t k) { group[static_cast<std::size_t>(i)] = k; });
  std::vector<double> sum(static_cast<std::size_t>(kept), 0.0), sq(static_cast<std::size_t>(kept), 0.0);
  const T* in = x.data<T>();
  for (int64_t i = 0; i < total; ++i) sum[static_cast<std::size_t>(group[static_cast<std::size_t>(i)])] += static_cast<double>(in[i]);
  for (double& s : sum) s /= static_cast<double>(std::max<int64_t>(count, 1));
  for (int64_t i = 0; i < total; ++i) {
    const std::size_t g = static_cast<std::size_t>(group[static_cast<std::size_t>(i)]);
    const double d = static_cast<double>(in[i]) - sum[g];
    sq[g] += d * d;
  }
  Tensor y(x.dtype(), x.shape());
  T* out = y.data<T>();
  // The operator's function body divides by sqrt(var) + 1e-9, not sqrt(var + eps).
  for (int64_t i = 0; i < total; ++i) {
    const std::size_t g = static_cast<std::size_t>(group[static_cast<std::size_t>(i)]);
    const double stddev = std::sqrt(sq[g] / static_cast<double>(std::max<int64_t>(count, 1)));
    out[i] = static_cast<T>((static_cast<double>(in[i]) - sum[g]) / (stddev + 1e-9));
  }
  context.outputs[0] = std::move(y);
  return Status::ok();
}

Status mean_variance_normalization(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* x, context.required_input(0));
  QFLOW_RETURN_IF_ERROR(check_float_input(context, *x));
  const std::vector<int64_t> axes = context.node.attr_ints("axes", {0, 2, 3});
  std::vector<bool> reduced(static_cast<std::size_t>(x->rank()), false);
  for (int64_t a : axes) {
    auto axis = normalize_axis(a, x->rank());
    if (!axis) return context.error(axis.status().message());
    reduced[static_cast<std::size_t>(*axis)] = true;
  }
  return dispatch_float(x->dtype(), [&]<typename T>() { return mvn_typed<T>(context, *x, reduced); });
}

// Softmax family -------------------------------------------------------------------------------

enum class SoftmaxKind { Softmax, LogSoftmax, Hardmax };

// One row of `len` elements spaced `stride` apart; kContiguous: stride is 1 (a float Softmax
// row then goes to the vector loops of softmax_float_row, with the same bits).
template <typename T, bool kContiguous>
void softmax_row_of(SoftmaxKind kind, const T* src, T* dst, int64_t len, int64_t row_stride) {
  const int64_t stride = kContiguous ? 1 : row_stride;
  if (kind == SoftmaxKind::Hardmax) {
    int64_t best = 0;
    for (int64_t i = 1; i < len; ++i)
      if (src[i * stride] > src[best * stride]) best = i;
    for (int64_t i = 0; i < len; ++i) dst[i * stride] = i == best ? T(1) : T(0);
    return;
  }
  thread_local std::vector<double> exps;
  if (exps.size() < static_cast<std::size_t>(len)) exps.resize(static_cast<std::size_t>(len));
  if constexpr (kContiguous && std::is_same_v<T, float>) {
    if (kind == SoftmaxKind::Softmax) return softmax_float_row(src, dst, len, exps.data());
  }
  // Subtracting the maximum keeps exp() from overflowing on large logits. Each exponential is
  // computed once, in double, and kept for the division.
  T max_value = src[0];
  for (int64_t i = 1; i < len; ++i) max_value = std::max(max_value, src[i * stride]);
  for (int64_t i = 0; i < len; ++i) exps[static_cast<std::size_t>(i)] = static_cast<double>(src[i * stride] - max_value);
  const double sum = exp_in_place_sum(exps.data(), len);
  if (kind == SoftmaxKind::Softmax) {
    for (int64_t i = 0; i < len; ++i) dst[i * stride] = static_cast<T>(exps[static_cast<std::size_t>(i)] / sum);
  } else {
    const double log_sum = std::log(sum);
    for (int64_t i = 0; i < len; ++i)
      dst[i * stride] = static_cast<T>(static_cast<double>(src[i * stride] - max_value) - log_sum);
  }
}

template <typename T>
void softmax_row(SoftmaxKind kind, const T* src, T* dst, int64_t len, int64_t stride) {
  if (len <= 0) return;
  if (stride == 1) softmax_row_of<T, true>(kind, src, dst, len, 1);
  else softmax_row_of<T, false>(kind, src, dst, len, stride);
}

Status softmax_family(KernelContext& context, SoftmaxKind kind, int64_t axis_attr) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* x, context.required_input(0));
  QFLOW_RETURN_IF_ERROR(check_float_input(context, *x));
  const bool coerce_2d = context.opset < 13;
  const int64_t rank = x->rank();
  int64_t axis = 0;
  if (rank == 0) {
    if (axis_attr != 0 && axis_attr != -1 && !(coerce_2d && axis_attr == 1))
      return context.error("axis " + std::to_string(axis_attr) + " is out of range for a scalar input");
  } else if (coerce_2d) {
    // Opsets before 13 flatten to [prod(shape[:axis]), prod(shape[axis:])]; axis == rank is allowed.
    const int64_t a = axis_attr < 0 ? axis_attr + rank : axis_attr;
    if (a < 0 || a > rank)
      return context.error("axis " + std::to_string(axis_attr) + " is out of range for rank " + std::to_string(rank));
    axis = a;
  } else {
    auto a = normalize_axis(axis_attr, rank);
    if (!a) return context.error(a.status().message());
    axis = *a;
  }
  int64_t outer = 1, len = 1, inner = 1;
  if (rank > 0) {
    outer = dims_product(x->shape(), 0, static_cast<std::size_t>(axis));
    if (coerce_2d) {
      len = dims_product(x->shape(), static_cast<std::size_t>(axis), x->shape().size());
    } else {
      len = x->dim(axis);
      inner = dims_product(x->shape(), static_cast<std::size_t>(axis) + 1, x->shape().size());
    }
  }
  return dispatch_float(x->dtype(), [&]<typename T>() -> Status {
    Tensor y(x->dtype(), x->shape());
    const T* in = x->data<T>();
    T* out = y.data<T>();
    context.parallel_for(outer * inner, 8 * len, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t base = (row / inner) * len * inner + row % inner;
        softmax_row<T>(kind, in + base, out + base, len, inner);
      }
    });
    context.outputs[0] = std::move(y);
    return Status::ok();
  });
}

// The axis attribute is read once, when the node's kernel is created.
KernelFactory softmax_kernel(SoftmaxKind kind) {
  return bound_kernel([kind](const Node& node, int64_t opset) -> KernelFunction {
    const int64_t axis = node.attr_int("axis", opset < 13 ? 1 : -1);
    return [kind, axis](KernelContext& context) { return softmax_family(context, kind, axis); };
  });
}

}  // namespace

void register_normalization_kernels(KernelRegistry& registry) {
  registry.add("", "BatchNormalization", 1, kLatestOpset, bound_kernel(bind_batch_normalization));
  registry.add_function("", "InstanceNormalization", 1, kLatestOpset, instance_normalization);
  registry.add_function("", "LpNormalization", 1, kLatestOpset, lp_normalization);
  registry.add("", "LRN", 1, kLatestOpset, bound_kernel(bind_lrn));
  registry.add_function("", "LayerNormalization", 17, kLatestOpset, layer_normalization);
  registry.add_function("", "GroupNormalization", 18, kLatestOpset, group_normalization);
  registry.add_function("", "MeanVarianceNormalization", 9, kLatestOpset, mean_variance_normalization);
  registry.add("", "Softmax", 1, kLatestOpset, softmax_kernel(SoftmaxKind::Softmax));
  registry.add("", "LogSoftmax", 1, kLatestOpset, softmax_kernel(SoftmaxKind::LogSoftmax));
  registry.add("", "Hardmax", 1, kLatestOpset, softmax_kernel(SoftmaxKind::Hardmax));
}

}  // namespace qflow

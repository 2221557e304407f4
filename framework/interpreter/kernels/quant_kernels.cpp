// QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear kernels, per ONNX opsets 10+.
#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>

#include "framework/interpreter/kernel_registry.h"
#include "framework/interpreter/kernel_util.h"
#include "framework/interpreter/kernels/quant_util.h"
#include "framework/interpreter/kernels/quantize_run.h"

namespace qflow {

namespace quant_detail {

Expected<std::vector<float>> read_scales(const KernelContext& context, const Tensor& scale, const char* what) {
  std::vector<float> values(static_cast<std::size_t>(scale.numel()));
  switch (scale.dtype()) {
    case DType::Float32: std::copy_n(scale.data<float>(), values.size(), values.begin()); break;
    case DType::Float64:
      for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(scale.data<double>()[i]);
      break;
    case DType::Float16:
      for (std::size_t i = 0; i < values.size(); ++i) values[i] = half_to_float(scale.data<uint16_t>()[i]);
      break;
    case DType::BFloat16:
      for (std::size_t i = 0; i < values.size(); ++i) values[i] = bfloat16_to_float(scale.data<uint16_t>()[i]);
      break;
    default:
      return context.error(std::string(what) + " must be a float tensor, got " +
                           std::string(dtype_name(scale.dtype())));
  }
  return values;
}

Expected<std::vector<int32_t>> read_zero_points(const KernelContext& context, const Tensor* zero_point,
                                                std::size_t count, const char* what) {
  if (!zero_point) return std::vector<int32_t>(count, 0);
  std::vector<int32_t> values(static_cast<std::size_t>(zero_point->numel()));
  const Status status = [&]() -> Status {
    if (zero_point->dtype() == DType::Int32) {
      std::copy_n(zero_point->data<int32_t>(), values.size(), values.begin());
      return Status::ok();
    }
    return dispatch_quantized(zero_point->dtype(), [&]<typename T>() {
      for (std::size_t i = 0; i < values.size(); ++i) values[i] = zero_point->data<T>()[i];
      return Status::ok();
    });
  }();
  if (!status) return context.error(std::string(what) + ": " + status.message());
  return values;
}

Status require_per_tensor(const KernelContext& context, const Tensor* tensor, const char* what) {
  if (!tensor) return Status::ok();
  if (tensor->numel() != 1 || tensor->rank() > 1)
    return context.error(std::string(what) + " must hold a single value (per-tensor), got shape " +
                         shape_to_string(tensor->shape()));
  return Status::ok();
}

}  // namespace quant_detail

namespace {

using quant_detail::dispatch_quantized;
using quant_detail::read_scales;
using quant_detail::read_zero_points;
using quant_detail::saturate_round;

// Prefixes the node to a status raised outside KernelContext::error, keeping its code.
Status with_node(const KernelContext& context, const Status& status) {
  return status.with_context(context.node.op_type() + " '" + context.node.name() + "'");
}

// Scale and zero point resolved against the data: element i of the data, viewed as
// [outer, channels, inner], uses parameter index (i / inner) % channels.
struct AxisParams {
  std::vector<float> scale;
  std::vector<int32_t> zero_point;
  int64_t outer = 1;
  int64_t channels = 1;
  int64_t inner = 1;
};

Expected<AxisParams> resolve_axis_params(const KernelContext& context, const Shape& data_shape, const Tensor& scale,
                                         const Tensor* zero_point) {
  AxisParams params;
  const int64_t numel = shape_numel(data_shape);
  if (zero_point && zero_point->shape() != scale.shape())
    return context.error("zero point shape " + shape_to_string(zero_point->shape()) + " differs from scale shape " +
                         shape_to_string(scale.shape()));
  if (scale.numel() == 1 && scale.rank() <= 1) {
    params.inner = numel;
  } else {
    if (scale.rank() != 1)
      return context.error("scale must be a scalar or a 1-D tensor, got shape " + shape_to_string(scale.shape()));
    if (context.opset < 13)
      return context.error("per-axis scale needs opset 13 or later (opset " + std::to_string(context.opset) + ")");
    if (context.node.attr_int("block_size", 0) != 0)
      return unsupported(context.node.op_type() + " '" + context.node.name() +
                         "': blocked quantization is not supported");
    auto axis = normalize_axis(context.node.attr_int("axis", 1), static_cast<int64_t>(data_shape.size()));
    if (!axis) return context.error(axis.status().message());
    const int64_t channels = data_shape[static_cast<std::size_t>(*axis)];
    if (scale.numel() != channels)
      return context.error("scale has " + std::to_string(scale.numel()) + " values but axis " + std::to_string(*axis) +
                           " of the input has " + std::to_string(channels));
    params.channels = channels;
    for (std::size_t d = 0; d < static_cast<std::size_t>(*axis); ++d) params.outer *= data_shape[d];
    for (std::size_t d = static_cast<std::size_t>(*axis) + 1; d < data_shape.size(); ++d) params.inner *= data_shape[d];
  }
  QFLOW_ASSIGN_OR_RETURN(params.scale, read_scales(context, scale, "scale"));
  QFLOW_ASSIGN_OR_RETURN(params.zero_point,
                         read_zero_points(context, zero_point, static_cast<std::size_t>(scale.numel()), "zero point"));
  return params;
}

// Elements per work unit: long runs (a per-tensor activation is one run) are cut into
// pieces of this size so they spread over the pool; each element is still written once.
constexpr int64_t kRunPiece = 1 << 14;

// Visits every element with its parameter index, outer loops outside so the per-channel
// parameters are loaded once per run of `inner` elements.
template <typename F>
void for_each_channel_run(const KernelContext& context, const AxisParams& p, F&& f) {
  const int64_t pieces = std::max<int64_t>(1, (p.inner + kRunPiece - 1) / kRunPiece);
  const int64_t piece_cost = 4 * std::min(p.inner, kRunPiece);
  context.parallel_for(p.outer * p.channels * pieces, piece_cost, [&](int64_t begin, int64_t end) {
    for (int64_t unit = begin; unit < end; ++unit) {
      const int64_t run = unit / pieces, piece = unit % pieces;
      const int64_t c = run % p.channels;
      const int64_t first = run * p.inner + piece * kRunPiece;
      const int64_t last = std::min((run + 1) * p.inner, first + kRunPiece);
      f(first, last, p.scale[static_cast<std::size_t>(c)], p.zero_point[static_cast<std::size_t>(c)]);
    }
  });
}

// Output element type when no zero point fixes it: uint8, or the opset-21 attribute.
Expected<DType> quantize_output_dtype(const KernelContext& context, const Tensor* zero_point) {
  if (zero_point) return zero_point->dtype();
  const int64_t attr = context.node.attr_int("output_dtype", 0);
  if (attr == 0) return DType::UInt8;
  const DType dtype = dtype_from_onnx(static_cast<int32_t>(attr));
  if (dtype == DType::Undefined) return context.error("output_dtype " + std::to_string(attr) + " is not supported");
  return dtype;
}

Status quantize_linear(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* x, context.required_input(0));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* scale, context.required_input(1));
  const Tensor* zero_point = context.input(2);
  QFLOW_ASSIGN_OR_RETURN(const DType out_dtype, quantize_output_dtype(context, zero_point));
  QFLOW_RETURN_IF_ERROR(with_node(context, dispatch_quantized(out_dtype, []<typename>() { return Status::ok(); })));
  QFLOW_ASSIGN_OR_RETURN(const AxisParams params, resolve_axis_params(context, x->shape(), *scale, zero_point));
  QFLOW_ASSIGN_OR_RETURN(Tensor y, context.allocate(out_dtype, x->shape()));
  const Status status = dispatch_quantized(out_dtype, [&]<typename Q>() -> Status {
    Q* out = y.data<Q>();
    switch (x->dtype()) {
      case DType::Float32: {
        // The reference divides in float32 and rounds the float32 quotient.
        const float* in = x->data<float>();
        for_each_channel_run(context, params, [&](int64_t b, int64_t e, float s, int32_t zp) {
          quant_detail::quantize_float_run<Q>(in + b, out + b, e - b, s, zp);
        });
        return Status::ok();
      }
      case DType::Float16:
      case DType::BFloat16: {
        const uint16_t* in = x->data<uint16_t>();
        const bool half = x->dtype() == DType::Float16;
        for_each_channel_run(context, params, [&](int64_t b, int64_t e, float s, int32_t zp) {
          for (int64_t i = b; i < e; ++i) {
            const float v = half ? half_to_float(in[i]) : bfloat16_to_float(in[i]);
            out[i] = saturate_round<Q>(v / s, zp);
          }
        });
        return Status::ok();
      }
      case DType::Int32: {
        // numpy promotes int32 / float32 to float64; so do we.
        const int32_t* in = x->data<int32_t>();
        for_each_channel_run(context, params, [&](int64_t b, int64_t e, float s, int32_t zp) {
          for (int64_t i = b; i < e; ++i) out[i] = saturate_round<Q>(static_cast<double>(in[i]) / s, zp);
        });
        return Status::ok();
      }
      default:
        return context.error("input x must be float, float16, bfloat16 or int32, got " +
                             std::string(dtype_name(x->dtype())));
    }
  });
  QFLOW_RETURN_IF_ERROR(status);
  context.outputs[0] = std::move(y);
  return Status::ok();
}

Status dequantize_linear(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* x, context.required_input(0));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* scale, context.required_input(1));
  const Tensor* zero_point = context.input(2);
  if (zero_point && zero_point->dtype() != x->dtype())
    return context.error("zero point type " + std::string(dtype_name(zero_point->dtype())) +
                         " differs from input type " + std::string(dtype_name(x->dtype())));
  QFLOW_ASSIGN_OR_RETURN(const AxisParams params, resolve_axis_params(context, x->shape(), *scale, zero_point));
  // From opset 19 the output follows the scale's type; before, scale and output are float.
  const DType out_dtype =
      scale->dtype() == DType::Float16 || scale->dtype() == DType::BFloat16 ? scale->dtype() : DType::Float32;
  QFLOW_ASSIGN_OR_RETURN(Tensor y, context.allocate(DType::Float32, x->shape()));
  float* out = y.data<float>();
  auto body = [&]<typename T>() -> Status {
    const T* in = x->data<T>();
    // Both operands go to float32 before subtracting, as the reference does.
    for_each_channel_run(context, params, [&](int64_t b, int64_t e, float s, int32_t zp) {
      quant_detail::dequantize_run<T>(in + b, out + b, e - b, s, zp);
    });
    return Status::ok();
  };
  const Status converted =
      x->dtype() == DType::Int32 ? body.template operator()<int32_t>() : dispatch_quantized(x->dtype(), body);
  QFLOW_RETURN_IF_ERROR(with_node(context, converted));
  if (out_dtype != DType::Float32) y = y.cast(out_dtype);
  context.outputs[0] = std::move(y);
  return Status::ok();
}

Status dynamic_quantize_linear(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* x, context.required_input(0));
  if (x->dtype() != DType::Float32)
    return context.error("input x must be float, got " + std::string(dtype_name(x->dtype())));
  const float* in = x->data<float>();
  const int64_t n = x->numel();
  // The range always includes 0 so that 0 is exactly representable. Min and max are exact
  // whatever the split, so chunks reduce on the pool.
  std::mutex merge;
  float lo = 0.0f, hi = 0.0f;
  context.parallel_for(n, 2, [&](int64_t b, int64_t e) {
    float chunk_lo = 0.0f, chunk_hi = 0.0f;
    quant_detail::float_range_run(in + b, e - b, chunk_lo, chunk_hi);
    const std::lock_guard<std::mutex> lock(merge);
    lo = std::min(lo, chunk_lo);
    hi = std::max(hi, chunk_hi);
  });
  constexpr float qmin = 0.0f, qmax = 255.0f;
  // An all-zero input would give scale 0; ONNX Runtime uses 1 so the output is all zero points.
  const float scale = hi == lo ? 1.0f : (hi - lo) / (qmax - qmin);
  const float initial_zero_point = qmin - lo / scale;
  const auto zero_point = static_cast<uint8_t>(std::nearbyint(std::clamp(initial_zero_point, qmin, qmax)));
  QFLOW_ASSIGN_OR_RETURN(Tensor y, context.allocate(DType::UInt8, x->shape()));
  uint8_t* out = y.data<uint8_t>();
  // QuantizeLinear's loop: round half to even, saturate, NaN to the zero point.
  context.parallel_for(n, 4, [&](int64_t b, int64_t e) {
    quant_detail::quantize_float_run<uint8_t>(in + b, out + b, e - b, scale, zero_point);
  });
  context.outputs[0] = std::move(y);
  if (context.outputs.size() > 1) context.outputs[1] = Tensor::scalar<float>(scale);
  if (context.outputs.size() > 2) context.outputs[2] = Tensor::scalar<uint8_t>(zero_point);
  return Status::ok();
}

}  // namespace

void register_quant_kernels(KernelRegistry& registry) {
  registry.add_function("", "QuantizeLinear", 10, kLatestOpset, quantize_linear);
  registry.add_function("", "DequantizeLinear", 10, kLatestOpset, dequantize_linear);
  registry.add_function("", "DynamicQuantizeLinear", 11, kLatestOpset, dynamic_quantize_linear);
  quant_detail::register_qlinear_kernels(registry);
}

}  // namespace qflow

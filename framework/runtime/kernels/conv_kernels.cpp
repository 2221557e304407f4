// Float reference kernels for Conv and ConvTranspose: im2col / col2im around an Eigen GEMM.
#include <algorithm>
#include <vector>

#include "framework/runtime/kernel_registry.h"
#include "framework/runtime/kernel_util.h"
#include "framework/runtime/kernels/conv_geometry.h"
#include "framework/runtime/kernels/eigen_maps.h"

namespace qflow {

namespace {

// Upper bound on the column buffer of one work unit, in elements. The tile width derives
// from the shape alone, never from the thread count, so every output element is produced
// by the same GEMM call (same summation order) however the units are spread over threads.
constexpr int64_t kColumnBudget = int64_t{1} << 20;

int64_t column_tile(int64_t rows, int64_t out_size) {
  const int64_t tile = std::max<int64_t>(64, kColumnBudget / std::max<int64_t>(1, rows));
  return std::max<int64_t>(1, std::min(out_size, tile));
}

Status check_bias(const KernelContext& context, const Tensor* bias, int64_t channels, DType dtype) {
  if (!bias) return Status::ok();
  if (bias->dtype() != dtype) return context.error("bias element type differs from the input's");
  if (bias->rank() != 1 || bias->dim(0) != channels)
    return context.error("bias shape " + shape_to_string(bias->shape()) + " should be [" + std::to_string(channels) +
                         "]");
  return Status::ok();
}

template <typename T>
Status run_conv(KernelContext& context, const ConvAttributes& attrs) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* x, context.required_input(0));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* w, context.required_input(1));
  const Tensor* bias = context.input(2);
  if (w->dtype() != x->dtype()) return context.error("weight element type differs from the input's");
  auto geometry = make_conv_geometry(attrs, x->shape(), w->shape());
  if (!geometry) return context.error(geometry.status().message());
  const ConvGeometry& g = *geometry;
  QFLOW_RETURN_IF_ERROR(check_bias(context, bias, g.out_channels, x->dtype()));

  auto made = Tensor::make(x->dtype(), g.column_shape());
  if (!made) return context.error(made.status().message());
  Tensor y = std::move(made).value();
  const int64_t groups = g.group, cg = g.in_channels_per_group(), mg = g.out_channels_per_group();
  const int64_t k = g.kernel_size(), rows = cg * k, in_size = g.in_size(), out_size = g.out_size();
  const bool pointwise = g.is_pointwise();
  const int64_t tile = column_tile(rows, out_size);
  const int64_t tiles = out_size > 0 ? (out_size + tile - 1) / tile : 0;
  const T* xd = x->data<T>();
  const T* wd = w->data<T>();
  const T* bd = bias ? bias->data<T>() : nullptr;
  T* yd = y.data<T>();

  context.parallel_for(g.batch * groups * tiles, [&](int64_t begin, int64_t end) {
    std::vector<T> columns(pointwise ? 0 : static_cast<std::size_t>(rows * tile));
    for (int64_t unit = begin; unit < end; ++unit) {
      const int64_t n = unit / (groups * tiles), gi = (unit / tiles) % groups, t = unit % tiles;
      const int64_t col_begin = t * tile, count = std::min(out_size, col_begin + tile) - col_begin;
      const T* image = xd + (n * g.in_channels + gi * cg) * in_size;
      auto weights = matrix_view(wd + gi * mg * rows, mg, rows, rows);
      auto out = matrix_view(yd + (n * g.out_channels + gi * mg) * out_size + col_begin, mg, count, out_size);
      if (pointwise) {
        out.noalias() = weights * matrix_view(image + col_begin, cg, count, in_size);
      } else {
        im2col(image, g, cg, T(0), col_begin, col_begin + count, columns.data());
        out.noalias() = weights * matrix_view(static_cast<const T*>(columns.data()), rows, count, count);
      }
      if (bd)
        for (int64_t m = 0; m < mg; ++m) out.row(m).array() += bd[gi * mg + m];
    }
  });
  context.outputs[0] = std::move(y);
  return Status::ok();
}

template <typename T>
Status run_conv_transpose(KernelContext& context, const ConvAttributes& attrs) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* x, context.required_input(0));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* w, context.required_input(1));
  const Tensor* bias = context.input(2);
  if (w->dtype() != x->dtype()) return context.error("weight element type differs from the input's");
  auto geometry = make_conv_transpose_geometry(attrs, x->shape(), w->shape());
  if (!geometry) return context.error(geometry.status().message());
  const ConvGeometry& g = *geometry;
  QFLOW_RETURN_IF_ERROR(check_bias(context, bias, g.in_channels, x->dtype()));

  auto made = Tensor::make(x->dtype(), g.image_shape());
  if (!made) return context.error(made.status().message());
  Tensor y = std::move(made).value();
  const int64_t groups = g.group, mg = g.in_channels_per_group(), cg = g.out_channels_per_group();
  const int64_t rows = mg * g.kernel_size(), in_size = g.out_size(), out_size = g.in_size();
  if (rows * in_size > Tensor::kDefaultMaxBytes / static_cast<int64_t>(sizeof(T)))
    return context.error("column buffer of " + std::to_string(rows) + " x " + std::to_string(in_size) +
                         " elements is too large");
  const T* xd = x->data<T>();
  const T* wd = w->data<T>();
  const T* bd = bias ? bias->data<T>() : nullptr;
  T* yd = y.data<T>();

  // Each (batch, group) unit owns a disjoint slice of the output, so col2im's scattered
  // additions never race and their order is fixed.
  context.parallel_for(g.batch * groups, [&](int64_t begin, int64_t end) {
    std::vector<T> columns(static_cast<std::size_t>(rows * in_size));
    for (int64_t unit = begin; unit < end; ++unit) {
      const int64_t n = unit / groups, gi = unit % groups;
      auto input = matrix_view(xd + (n * g.out_channels + gi * cg) * in_size, cg, in_size, in_size);
      auto weights = matrix_view(wd + gi * cg * rows, cg, rows, rows);
      auto cols = matrix_view(columns.data(), rows, in_size, in_size);
      cols.noalias() = weights.transpose() * input;
      T* image = yd + (n * g.in_channels + gi * mg) * out_size;
      col2im(static_cast<const T*>(columns.data()), g, mg, image);
      if (bd)
        for (int64_t m = 0; m < mg; ++m) {
          const T b = bd[gi * mg + m];
          std::for_each(image + m * out_size, image + (m + 1) * out_size, [b](T& v) { v += b; });
        }
    }
  });
  context.outputs[0] = std::move(y);
  return Status::ok();
}

Status conv(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* x, context.required_input(0));
  const ConvAttributes attrs = read_conv_attributes(context.node);
  return dispatch_float(x->dtype(), [&]<typename T>() { return run_conv<T>(context, attrs); });
}

Status conv_transpose(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* x, context.required_input(0));
  const ConvAttributes attrs = read_conv_attributes(context.node);
  return dispatch_float(x->dtype(), [&]<typename T>() { return run_conv_transpose<T>(context, attrs); });
}

}  // namespace

void register_conv_kernels(KernelRegistry& registry) {
  registry.add_function("", "Conv", 1, kLatestOpset, conv);
  registry.add_function("", "ConvTranspose", 1, kLatestOpset, conv_transpose);
}

}  // namespace qflow

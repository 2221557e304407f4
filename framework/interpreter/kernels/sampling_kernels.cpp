// Sampling kernels: RoiAlign and GridSample, bilinear (and bicubic) reads at computed positions.
// Both follow ONNX's reference implementations (onnx/reference/ops/op_roi_align.py,
// op_grid_sample.py), which are ONNX Runtime's CPU kernels written out, in the input's type.
#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "framework/interpreter/kernel_registry.h"
#include "framework/interpreter/kernel_util.h"

namespace qflow {
namespace {

// RoiAlign ----------------------------------------------------------------------------------

// One bilinear sample of a bin: four pixel offsets in the plane and their weights.
template <typename T>
struct Sample {
  std::array<int64_t, 4> pos{};
  std::array<T, 4> w{};
};

template <typename T>
Sample<T> roi_sample(T y, T x, int64_t height, int64_t width) {
  Sample<T> s;
  // Samples more than a pixel outside the map contribute nothing.
  if (y < T(-1) || y > static_cast<T>(height) || x < T(-1) || x > static_cast<T>(width)) return s;
  y = std::max(y, T(0));
  x = std::max(x, T(0));
  int64_t y_low = static_cast<int64_t>(y), x_low = static_cast<int64_t>(x), y_high, x_high;
  if (y_low >= height - 1) {
    y_high = y_low = height - 1;
    y = static_cast<T>(y_low);
  } else {
    y_high = y_low + 1;
  }
  if (x_low >= width - 1) {
    x_high = x_low = width - 1;
    x = static_cast<T>(x_low);
  } else {
    x_high = x_low + 1;
  }
  const T ly = y - static_cast<T>(y_low), lx = x - static_cast<T>(x_low);
  const T hy = T(1) - ly, hx = T(1) - lx;
  s.pos = {y_low * width + x_low, y_low * width + x_high, y_high * width + x_low, y_high * width + x_high};
  s.w = {hy * hx, hy * lx, ly * hx, ly * lx};
  return s;
}

template <typename T>
Status roi_align_typed(KernelContext& context, const Tensor& x, const Tensor& rois, const std::vector<int64_t>& batch,
                       int64_t out_h, int64_t out_w) {
  const Node& node = context.node;
  const bool max_mode = node.attr_string("mode", "avg") == "max";
  const int64_t sampling_ratio = node.attr_int("sampling_ratio", 0);
  const T spatial_scale = static_cast<T>(node.attr_float("spatial_scale", 1.0f));
  // Opset 16 added the mode and made half_pixel the default; before, nothing was shifted.
  const std::string ctm = node.attr_string("coordinate_transformation_mode", context.opset >= 16 ? "half_pixel" : "output_half_pixel");
  if (ctm != "half_pixel" && ctm != "output_half_pixel")
    return context.error("coordinate_transformation_mode '" + ctm + "' is not half_pixel or output_half_pixel");
  const bool half_pixel = ctm == "half_pixel";
  const int64_t channels = x.dim(1), height = x.dim(2), width = x.dim(3);
  const int64_t num_rois = rois.dim(0);
  Tensor y(x.dtype(), {num_rois, channels, out_h, out_w});
  const T* in = x.data<T>();
  const T* r = rois.data<T>();
  T* out = y.data<T>();
  context.parallel_for(num_rois, channels * out_h * out_w * 16, [&](int64_t begin, int64_t end) {
    std::vector<Sample<T>> samples;
    for (int64_t n = begin; n < end; ++n) {
      const T offset = half_pixel ? T(0.5) : T(0);
      const T start_w = r[n * 4 + 0] * spatial_scale - offset, start_h = r[n * 4 + 1] * spatial_scale - offset;
      const T end_w = r[n * 4 + 2] * spatial_scale - offset, end_h = r[n * 4 + 3] * spatial_scale - offset;
      T roi_w = end_w - start_w, roi_h = end_h - start_h;
      if (!half_pixel) {  // malformed ROIs are forced to 1x1
        roi_w = std::max(roi_w, T(1));
        roi_h = std::max(roi_h, T(1));
      }
      const T bin_h = roi_h / static_cast<T>(out_h), bin_w = roi_w / static_cast<T>(out_w);
      const int64_t grid_h = sampling_ratio > 0 ? sampling_ratio : static_cast<int64_t>(std::ceil(roi_h / static_cast<T>(out_h)));
      const int64_t grid_w = sampling_ratio > 0 ? sampling_ratio : static_cast<int64_t>(std::ceil(roi_w / static_cast<T>(out_w)));
      const T count = static_cast<T>(std::max<int64_t>(grid_h * grid_w, 1));
      samples.clear();
      for (int64_t ph = 0; ph < out_h; ++ph)
        for (int64_t pw = 0; pw < out_w; ++pw)
          for (int64_t iy = 0; iy < grid_h; ++iy) {
            const T yy = start_h + static_cast<T>(ph) * bin_h +
                         (static_cast<T>(iy) + T(0.5)) * bin_h / static_cast<T>(grid_h);
            for (int64_t ix = 0; ix < grid_w; ++ix) {
              const T xx = start_w + static_cast<T>(pw) * bin_w +
                           (static_cast<T>(ix) + T(0.5)) * bin_w / static_cast<T>(grid_w);
              samples.push_back(roi_sample<T>(yy, xx, height, width));
            }
          }
      for (int64_t c = 0; c < channels; ++c) {
        const T* plane = in + (batch[static_cast<std::size_t>(n)] * channels + c) * height * width;
        T* dst = out + (n * channels + c) * out_h * out_w;
        std::size_t k = 0;
        for (int64_t p = 0; p < out_h * out_w; ++p) {
          T value = T(0);
          bool first = true;
          for (int64_t i = 0; i < grid_h * grid_w; ++i, ++k) {
            const Sample<T>& s = samples[k];
            if (max_mode) {
              const T v = std::max(std::max(s.w[0] * plane[s.pos[0]], s.w[1] * plane[s.pos[1]]),
                                   std::max(s.w[2] * plane[s.pos[2]], s.w[3] * plane[s.pos[3]]));
              value = first ? v : std::max(value, v);
              first = false;
            } else {
              value += s.w[0] * plane[s.pos[0]] + s.w[1] * plane[s.pos[1]] + s.w[2] * plane[s.pos[2]] +
                       s.w[3] * plane[s.pos[3]];
            }
          }
          dst[p] = max_mode ? value : value / count;
        }
      }
    }
  });
  context.outputs[0] = std::move(y);
  return Status::ok();
}

Status roi_align(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* x, context.required_input(0));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* rois, context.required_input(1));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* batch_indices, context.required_input(2));
  QFLOW_RETURN_IF_ERROR(check_float_input(context, *x));
  if (x->rank() != 4) return context.error("X must be 4-D (N, C, H, W), got " + shape_to_string(x->shape()));
  if (rois->dtype() != x->dtype() || rois->rank() != 2 || rois->dim(1) != 4)
    return context.error("rois must be [num_rois, 4] of the input's type, got " + shape_to_string(rois->shape()));
  if (batch_indices->rank() != 1 || batch_indices->dim(0) != rois->dim(0))
    return context.error("batch_indices must have one entry per roi");
  const std::vector<int64_t> batch = batch_indices->to_int64s();
  for (int64_t b : batch)
    if (b < 0 || b >= x->dim(0)) return context.error("batch index " + std::to_string(b) + " is out of range");
  const int64_t out_h = context.node.attr_int("output_height", 1), out_w = context.node.attr_int("output_width", 1);
  if (out_h <= 0 || out_w <= 0) return context.error("output_height and output_width must be positive");
  if (const std::string mode = context.node.attr_string("mode", "avg"); mode != "avg" && mode != "max")
    return context.error("mode '" + mode + "' is not avg or max");
  return dispatch_float(x->dtype(),
                        [&]<typename T>() { return roi_align_typed<T>(context, *x, *rois, batch, out_h, out_w); });
}

// GridSample --------------------------------------------------------------------------------

enum class GridMode { Nearest, Linear, Cubic };
enum class GridPadding { Zeros, Border, Reflection };

// Reflects x by the nearer border until it lies within [lo, hi].
template <typename T>
T reflect(T x, T lo, T hi) {
  const T range = hi - lo;
  if (x < lo) {
    const T dx = lo - x;
    const int64_t n = static_cast<int64_t>(dx / range);
    const T r = dx - static_cast<T>(n) * range;
    return n % 2 == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    const T dx = x - hi;
    const int64_t n = static_cast<int64_t>(dx / range);
    const T r = dx - static_cast<T>(n) * range;
    return n % 2 == 0 ? hi - r : lo + r;
  }
  return x;
}

template <typename T>
std::array<T, 4> cubic_coeffs(T x) {
  constexpr T a = T(-0.75);
  x = std::abs(x);
  return {((a * (x + 1) - 5 * a) * (x + 1) + 8 * a) * (x + 1) - 4 * a, ((a + 2) * x - (a + 3)) * x * x + 1,
          ((a + 2) * (1 - x) - (a + 3)) * (1 - x) * (1 - x) + 1,
          ((a * (2 - x) - 5 * a) * (2 - x) + 8 * a) * (2 - x) - 4 * a};
}

template <typename T>
struct GridPlane {
  const T* data;
  int64_t h, w;
  GridPadding padding;
  T x_lo, x_hi, y_lo, y_hi;  // the borders reflection mirrors at

  T at(int64_t r, int64_t c) const {
    switch (padding) {
      case GridPadding::Zeros:
        return r >= 0 && r < h && c >= 0 && c < w ? data[r * w + c] : T(0);
      case GridPadding::Border:
        return data[std::clamp<int64_t>(r, 0, h - 1) * w + std::clamp<int64_t>(c, 0, w - 1)];
      case GridPadding::Reflection:
        r = static_cast<int64_t>(reflect(static_cast<T>(r), y_lo, y_hi));
        c = static_cast<int64_t>(reflect(static_cast<T>(c), x_lo, x_hi));
        return data[std::clamp<int64_t>(r, 0, h - 1) * w + std::clamp<int64_t>(c, 0, w - 1)];
    }
    return T(0);
  }
};

template <typename T>
T grid_value(const GridPlane<T>& p, GridMode mode, bool align_corners, T nx, T ny) {
  const auto denormalize = [&](T n, int64_t length) {
    return align_corners ? (n + 1) / 2 * static_cast<T>(length - 1) : ((n + 1) * static_cast<T>(length) - 1) / 2;
  };
  T x = denormalize(nx, p.w), y = denormalize(ny, p.h);
  if (mode == GridMode::Nearest) {  // ties to even, as PyTorch and ONNX Runtime round
    x = std::nearbyint(x);
    y = std::nearbyint(y);
  }
  if (x < p.x_lo || x > p.x_hi || y < p.y_lo || y > p.y_hi) {
    if (p.padding == GridPadding::Border) {
      x = std::clamp(x, T(0), static_cast<T>(p.w - 1));
      y = std::clamp(y, T(0), static_cast<T>(p.h - 1));
    } else if (p.padding == GridPadding::Reflection) {
      x = reflect(x, p.x_lo, p.x_hi);
      y = reflect(y, p.y_lo, p.y_hi);
    }
  }
  if (mode == GridMode::Nearest) return p.at(static_cast<int64_t>(y), static_cast<int64_t>(x));
  const int64_t x0 = static_cast<int64_t>(std::floor(x)), y0 = static_cast<int64_t>(std::floor(y));
  const T dx = x - static_cast<T>(x0), dy = y - static_cast<T>(y0);
  if (mode == GridMode::Linear) {
    const T top = (1 - dx) * p.at(y0, x0) + dx * p.at(y0, x0 + 1);
    const T bottom = (1 - dx) * p.at(y0 + 1, x0) + dx * p.at(y0 + 1, x0 + 1);
    return (1 - dy) * top + dy * bottom;
  }
  const std::array<T, 4> cx = cubic_coeffs(dx), cy = cubic_coeffs(dy);
  T value = T(0);
  for (int64_t i = 0; i < 4; ++i) {
    T row = T(0);
    for (int64_t j = 0; j < 4; ++j) row += cx[static_cast<std::size_t>(j)] * p.at(y0 - 1 + i, x0 - 1 + j);
    value += cy[static_cast<std::size_t>(i)] * row;
  }
  return value;
}

template <typename T>
Status grid_sample_typed(KernelContext& context, const Tensor& x, const Tensor& grid, GridMode mode, GridPadding padding,
                         bool align_corners) {
  const int64_t batch = x.dim(0), channels = x.dim(1), h = x.dim(2), w = x.dim(3);
  const int64_t out_h = grid.dim(1), out_w = grid.dim(2);
  Tensor y(x.dtype(), {batch, channels, out_h, out_w});
  const T* in = x.data<T>();
  const T* g = grid.data<T>();
  T* out = y.data<T>();
  const T x_lo = align_corners ? T(0) : T(-0.5), y_lo = x_lo;
  const T x_hi = align_corners ? static_cast<T>(w - 1) : static_cast<T>(w) - T(0.5);
  const T y_hi = align_corners ? static_cast<T>(h - 1) : static_cast<T>(h) - T(0.5);
  context.parallel_for(batch * channels, out_h * out_w * 24, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t n = row / channels;
      const GridPlane<T> plane{in + row * h * w, h, w, padding, x_lo, x_hi, y_lo, y_hi};
      const T* positions = g + n * out_h * out_w * 2;
      T* dst = out + row * out_h * out_w;
      for (int64_t i = 0; i < out_h * out_w; ++i)
        dst[i] = grid_value(plane, mode, align_corners, positions[2 * i], positions[2 * i + 1]);
    }
  });
  context.outputs[0] = std::move(y);
  return Status::ok();
}

Status grid_sample(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* x, context.required_input(0));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* grid, context.required_input(1));
  QFLOW_RETURN_IF_ERROR(check_float_input(context, *x));
  if (x->rank() != 4)
    return context.error("qflow runs GridSample on 4-D inputs (N, C, H, W) only, got " + shape_to_string(x->shape()));
  if (grid->dtype() != x->dtype() || grid->rank() != 4 || grid->dim(0) != x->dim(0) || grid->dim(3) != 2)
    return context.error("grid must be [N, H_out, W_out, 2] of the input's type, got " + shape_to_string(grid->shape()));
  // Opset 20 renamed bilinear and bicubic to linear and cubic.
  const bool renamed = context.opset >= 20;
  const std::string mode_name = context.node.attr_string("mode", renamed ? "linear" : "bilinear");
  GridMode mode;
  if (mode_name == "nearest") mode = GridMode::Nearest;
  else if (mode_name == (renamed ? "linear" : "bilinear")) mode = GridMode::Linear;
  else if (mode_name == (renamed ? "cubic" : "bicubic")) mode = GridMode::Cubic;
  else return context.error("mode '" + mode_name + "' is not defined at opset " + std::to_string(context.opset));
  const std::string padding_name = context.node.attr_string("padding_mode", "zeros");
  GridPadding padding;
  if (padding_name == "zeros") padding = GridPadding::Zeros;
  else if (padding_name == "border") padding = GridPadding::Border;
  else if (padding_name == "reflection") padding = GridPadding::Reflection;
  else return context.error("padding_mode '" + padding_name + "' is not zeros, border or reflection");
  const bool align_corners = context.node.attr_int("align_corners", 0) != 0;
  return dispatch_float(x->dtype(), [&]<typename T>() {
    return grid_sample_typed<T>(context, *x, *grid, mode, padding, align_corners);
  });
}

}  // namespace

void register_sampling_kernels(KernelRegistry& registry) {
  registry.add_function("", "RoiAlign", 10, kLatestOpset, roi_align);
  registry.add_function("", "GridSample", 16, kLatestOpset, grid_sample);
}

}  // namespace qflow

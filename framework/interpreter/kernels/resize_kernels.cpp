// Resize and Upsample kernels: nearest, linear and cubic interpolation over any number of axes.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "framework/interpreter/kernel_registry.h"
#include "framework/interpreter/kernel_util.h"

namespace qflow {
namespace {

enum class Mode { Nearest, Linear, Cubic };
enum class Coord { HalfPixel, HalfPixelSymmetric, PytorchHalfPixel, AlignCorners, Asymmetric, TfHalfPixelForNn, TfCropAndResize };
// Simple is the rule of Upsample and Resize-10, which named no rounding mode: truncate when
// enlarging, round up when shrinking (what ONNX Runtime and the opset-10 test data do).
enum class Rounding { RoundPreferFloor, RoundPreferCeil, Floor, Ceil, Simple };

struct ResizeParams {
  Mode mode = Mode::Nearest;
  Coord coord = Coord::HalfPixel;
  Rounding rounding = Rounding::RoundPreferFloor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0.0;
};

// Where every output coordinate of one axis reads from: `taps` (index, weight) pairs each,
// or the extrapolation value when `outside` is set (tf_crop_and_resize only).
struct AxisPlan {
  int64_t in_len = 0;
  int64_t out_len = 0;
  int taps = 1;
  std::vector<int64_t> index;
  std::vector<double> weight;
  std::vector<uint8_t> outside;
  bool identity = false;
};

Expected<Mode> parse_mode(const KernelContext& context, const std::string& name, bool allow_cubic) {
  if (name == "nearest") return Mode::Nearest;
  if (name == "linear" || name == "bilinear") return Mode::Linear;
  if (name == "cubic" && allow_cubic) return Mode::Cubic;
  return context.error("mode '" + name + "' is not supported (nearest, linear" + (allow_cubic ? ", cubic" : "") +
                       " expected)");
}

Expected<Coord> parse_coord(const KernelContext& context, const std::string& name) {
  if (name == "half_pixel") return Coord::HalfPixel;
  if (name == "half_pixel_symmetric") return Coord::HalfPixelSymmetric;
  if (name == "pytorch_half_pixel") return Coord::PytorchHalfPixel;
  if (name == "align_corners") return Coord::AlignCorners;
  if (name == "asymmetric") return Coord::Asymmetric;
  if (name == "tf_half_pixel_for_nn") return Coord::TfHalfPixelForNn;
  if (name == "tf_crop_and_resize") return Coord::TfCropAndResize;
  return context.error("coordinate_transformation_mode '" + name + "' is not supported");
}

Expected<Rounding> parse_rounding(const KernelContext& context, const std::string& name) {
  if (name == "round_prefer_floor") return Rounding::RoundPreferFloor;
  if (name == "round_prefer_ceil") return Rounding::RoundPreferCeil;
  if (name == "floor") return Rounding::Floor;
  if (name == "ceil") return Rounding::Ceil;
  return context.error("nearest_mode '" + name + "' is not supported");
}

// Maps an output coordinate to the input axis. `out_width` is scale * in_len, which the
// operator's reference keeps fractional when the output length was floored.
double original_coordinate(Coord coord, double x, double scale, int64_t in_len, int64_t out_len, double out_width,
                           double roi_start, double roi_end) {
  switch (coord) {
    case Coord::HalfPixel:
      return (x + 0.5) / scale - 0.5;
    case Coord::HalfPixelSymmetric: {
      const double adjustment = static_cast<double>(out_len) / out_width;
      const double center = static_cast<double>(in_len) / 2.0;
      return center * (1.0 - adjustment) + (x + 0.5) / scale - 0.5;
    }
    case Coord::PytorchHalfPixel:
      return out_len > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
    case Coord::AlignCorners:
      return out_width == 1.0 ? 0.0 : x * static_cast<double>(in_len - 1) / (out_width - 1.0);
    case Coord::Asymmetric:
      return x / scale;
    case Coord::TfHalfPixelForNn:
      return (x + 0.5) / scale;
    case Coord::TfCropAndResize:
      if (out_len > 1)
        return roi_start * static_cast<double>(in_len - 1) +
               x * (roi_end - roi_start) * static_cast<double>(in_len - 1) / (out_width - 1.0);
      return 0.5 * (roi_start + roi_end) * static_cast<double>(in_len - 1);
  }
  return x;
}

int64_t nearest_index(Rounding rounding, double x, double scale) {
  const double f = std::floor(x);
  const double frac = x - f;
  if (frac == 0.0) return static_cast<int64_t>(f);
  switch (rounding) {
    case Rounding::RoundPreferFloor:
      return static_cast<int64_t>(frac <= 0.5 ? f : f + 1.0);
    case Rounding::RoundPreferCeil:
      return static_cast<int64_t>(frac < 0.5 ? f : f + 1.0);
    case Rounding::Floor:
      return static_cast<int64_t>(f);
    case Rounding::Ceil:
      return static_cast<int64_t>(f + 1.0);
    case Rounding::Simple:
      return static_cast<int64_t>(scale < 1.0 ? f + 1.0 : f);
  }
  return static_cast<int64_t>(f);
}

// Keys' cubic convolution weights for the four neighbours floor(x)-1 .. floor(x)+2.
void cubic_weights(double ratio, double a, double* w) {
  const double r1 = ratio + 1.0, s = 1.0 - ratio, s1 = s + 1.0;
  w[0] = ((a * r1 - 5.0 * a) * r1 + 8.0 * a) * r1 - 4.0 * a;
  w[1] = ((a + 2.0) * ratio - (a + 3.0)) * ratio * ratio + 1.0;
  w[2] = ((a + 2.0) * s - (a + 3.0)) * s * s + 1.0;
  w[3] = ((a * s1 - 5.0 * a) * s1 + 8.0 * a) * s1 - 4.0 * a;
}

AxisPlan plan_axis(const ResizeParams& p, int64_t in_len, int64_t out_len, double scale, double out_width,
                   double roi_start, double roi_end) {
  AxisPlan plan;
  plan.in_len = in_len;
  plan.out_len = out_len;
  plan.taps = p.mode == Mode::Nearest ? 1 : p.mode == Mode::Linear ? 2 : 4;
  const std::size_t taps = static_cast<std::size_t>(plan.taps);
  plan.index.assign(static_cast<std::size_t>(out_len) * taps, 0);
  plan.weight.assign(static_cast<std::size_t>(out_len) * taps, 0.0);
  plan.outside.assign(static_cast<std::size_t>(out_len), 0);
  plan.identity = in_len == out_len;
  const auto clamp = [&](int64_t i) { return std::clamp<int64_t>(i, 0, std::max<int64_t>(in_len - 1, 0)); };
  for (int64_t o = 0; o < out_len; ++o) {
    const double x = original_coordinate(p.coord, static_cast<double>(o), scale, in_len, out_len, out_width,
                                         roi_start, roi_end);
    int64_t* idx = &plan.index[static_cast<std::size_t>(o) * taps];
    double* w = &plan.weight[static_cast<std::size_t>(o) * taps];
    if (p.coord == Coord::TfCropAndResize && (x < 0.0 || x > static_cast<double>(in_len - 1))) {
      plan.outside[static_cast<std::size_t>(o)] = 1;
      plan.identity = false;
      continue;
    }
    const double f = std::floor(x);
    const double ratio = x - f;
    if (p.mode == Mode::Nearest || ratio == 0.0) {
      // An exact input position reads that sample alone, whatever the mode.
      idx[0] = clamp(p.mode == Mode::Nearest ? nearest_index(p.rounding, x, scale) : static_cast<int64_t>(f));
      w[0] = 1.0;
      if (idx[0] != o) plan.identity = false;
      continue;
    }
    plan.identity = false;
    const int64_t base = static_cast<int64_t>(f);
    if (p.mode == Mode::Linear) {
      idx[0] = clamp(base);
      idx[1] = clamp(base + 1);
      w[0] = 1.0 - ratio;
      w[1] = ratio;
      continue;
    }
    cubic_weights(ratio, p.cubic_a, w);
    double sum = 0.0;
    for (std::size_t k = 0; k < 4; ++k) {
      const int64_t i = base - 1 + static_cast<int64_t>(k);
      if (p.exclude_outside && (i < 0 || i >= in_len)) w[k] = 0.0;
      sum += w[k];
      idx[k] = clamp(i);
    }
    if (p.exclude_outside && sum != 0.0)
      for (std::size_t k = 0; k < 4; ++k) w[k] /= sum;
  }
  return plan;
}

// Nearest: pure data movement, so it works for every element type.
template <typename T>
void resize_nearest(const KernelContext& context, const Tensor& x, Tensor& y, const std::vector<AxisPlan>& plans,
                    double extrapolation) {
  const std::size_t rank = plans.size();
  const T* in = x.data<T>();
  T* out = y.data<T>();
  if (rank == 0) {
    out[0] = in[0];
    return;
  }
  const std::vector<int64_t> in_strides = contiguous_strides(x.shape());
  const Shape& out_shape = y.shape();
  const int64_t row_len = out_shape.back();
  const int64_t rows = y.numel() / row_len;
  const T fill = static_cast<T>(extrapolation);
  // An integer upscale of the last axis (index o / repeat everywhere, nothing outside), the
  // nearest upsampling of detection necks: each input value copied `repeat` times, without
  // an index load per output.
  const AxisPlan& last = plans[rank - 1];
  int64_t repeat = last.in_len > 0 && row_len % last.in_len == 0 ? row_len / last.in_len : 0;
  for (int64_t o = 0; o < row_len && repeat > 0; ++o)
    if (last.outside[static_cast<std::size_t>(o)] || last.index[static_cast<std::size_t>(o)] != o / repeat) repeat = 0;
  context.parallel_for(rows, 4 * row_len, [&](int64_t begin, int64_t end) {
    int64_t previous_base = -1;
    bool previous_outside = false;
    for (int64_t row = begin; row < end; ++row) {
      int64_t rest = row, base = 0;
      bool outside = false;
      for (std::size_t d = rank - 1; d-- > 0;) {
        const int64_t o = rest % out_shape[d];
        rest /= out_shape[d];
        if (plans[d].outside[static_cast<std::size_t>(o)]) outside = true;
        base += plans[d].index[static_cast<std::size_t>(o)] * in_strides[d];
      }
      T* dst = out + row * row_len;
      // An upsampled axis repeats rows: a row that reads what the one before it read is a copy.
      if (row > begin && base == previous_base && outside == previous_outside) {
        std::copy(dst - row_len, dst, dst);
        continue;
      }
      previous_base = base;
      previous_outside = outside;
      if (repeat > 0 && !outside) {
        const T* src = in + base;
        const int64_t n = row_len / repeat;
        if (repeat == 2) {
          for (int64_t i = 0; i < n; ++i) dst[2 * i] = dst[2 * i + 1] = src[i];
        } else {
          for (int64_t i = 0; i < n; ++i) std::fill(dst + i * repeat, dst + (i + 1) * repeat, src[i]);
        }
        continue;
      }
      for (int64_t o = 0; o < row_len; ++o)
        dst[o] = (outside || last.outside[static_cast<std::size_t>(o)]) ? fill
                                                                        : in[base + last.index[static_cast<std::size_t>(o)]];
    }
  });
}

// Linear and cubic are separable: one weighted pass per resized axis, innermost first as
// the operator's reference does, accumulating in double.
template <typename T>
void resize_interpolate(const KernelContext& context, const Tensor& x, Tensor& y, const std::vector<AxisPlan>& plans,
                        double extrapolation) {
  Shape shape = x.shape();
  std::vector<double> current(static_cast<std::size_t>(x.numel()));
  const T* in = x.data<T>();
  for (std::size_t i = 0; i < current.size(); ++i) current[i] = static_cast<double>(in[i]);
  for (std::size_t d = plans.size(); d-- > 0;) {
    const AxisPlan& plan = plans[d];
    if (plan.identity) continue;
    int64_t outer = 1, inner = 1;
    for (std::size_t k = 0; k < d; ++k) outer *= shape[k];
    for (std::size_t k = d + 1; k < shape.size(); ++k) inner *= shape[k];
    std::vector<double> next(static_cast<std::size_t>(outer * plan.out_len * inner));
    const std::size_t taps = static_cast<std::size_t>(plan.taps);
    const int64_t row_cost = 2 * plan.taps * inner;
    context.parallel_for(outer * plan.out_len, row_cost, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t b = row / plan.out_len, o = row % plan.out_len;
        double* dst = next.data() + row * inner;
        if (plan.outside[static_cast<std::size_t>(o)]) {
          std::fill(dst, dst + inner, extrapolation);
          continue;
        }
        std::fill(dst, dst + inner, 0.0);
        for (std::size_t k = 0; k < taps; ++k) {
          const double w = plan.weight[static_cast<std::size_t>(o) * taps + k];
          if (w == 0.0) continue;
          const double* src =
              current.data() + (b * plan.in_len + plan.index[static_cast<std::size_t>(o) * taps + k]) * inner;
          for (int64_t i = 0; i < inner; ++i) dst[i] += w * src[i];
        }
      }
    });
    current.swap(next);
    shape[d] = plan.out_len;
  }
  T* out = y.data<T>();
  for (std::size_t i = 0; i < current.size(); ++i) out[i] = static_cast<T>(current[i]);
}

// The resolved request: output shape, per-axis scale and fractional output width, roi.
struct Request {
  Shape out_shape;
  std::vector<double> scales;
  std::vector<double> widths;
  std::vector<double> roi;  // starts then ends, one pair per axis
};

// float32 bilinear of a [H, W] or [N, C, H, W] input whose N and C are unchanged, computed in
// float as ONNX Runtime computes it: float coordinates and weights (both taps weigh 0.5 at
// the border), then one sum of the four weighted neighbours in a fixed order. The separable
// double path above rounds differently in the last bit, which a dynamically quantized model
// (each DynamicQuantizeLinear scales by a tensor's max) amplifies into visible differences.
bool bilinear_in_float(const ResizeParams& p, const Tensor& x, const Request& r) {
  if (p.mode != Mode::Linear || x.dtype() != DType::Float32) return false;
  if (p.coord != Coord::HalfPixel && p.coord != Coord::Asymmetric && p.coord != Coord::PytorchHalfPixel &&
      p.coord != Coord::AlignCorners)
    return false;
  const int64_t rank = x.rank();
  if (rank != 2 && rank != 4) return false;
  for (int64_t d = 0; d + 2 < rank; ++d)
    if (r.out_shape[static_cast<std::size_t>(d)] != x.dim(d)) return false;
  // A floored output length (scales that do not divide it) keeps the operator's fractional
  // width in align_corners; only the general path knows it.
  for (int64_t d = rank - 2; d < rank; ++d)
    if (r.widths[static_cast<std::size_t>(d)] != static_cast<double>(r.out_shape[static_cast<std::size_t>(d)]))
      return false;
  return true;
}

// One axis of bilinear_in_float: the two input positions (times `stride`) and their weights.
struct FloatTaps {
  std::vector<int64_t> first, second;
  std::vector<float> w_first, w_second;
};

FloatTaps float_taps(Coord coord, int64_t in_len, int64_t out_len, float scale, int64_t stride) {
  FloatTaps t;
  for (int64_t o = 0; o < out_len; ++o) {
    const float of = static_cast<float>(o);
    float in = of;
    if (scale != 1.0f) {
      switch (coord) {
        case Coord::Asymmetric: in = of / scale; break;
        case Coord::PytorchHalfPixel: in = out_len > 1 ? (of + 0.5f) / scale - 0.5f : 0.0f; break;
        case Coord::AlignCorners:
          in = out_len == 1 ? 0.0f : of * static_cast<float>(in_len - 1) / static_cast<float>(out_len - 1);
          break;
        default: in = (of + 0.5f) / scale - 0.5f; break;
      }
    }
    in = std::max(0.0f, std::min(in, static_cast<float>(in_len - 1)));
    const int64_t i1 = std::min(static_cast<int64_t>(in), in_len - 1);
    const int64_t i2 = std::min(i1 + 1, in_len - 1);
    float w1 = std::fabs(in - static_cast<float>(i2)), w2 = std::fabs(in - static_cast<float>(i1));
    if (i1 == i2) w1 = w2 = 0.5f;
    t.first.push_back(i1 * stride);
    t.second.push_back(i2 * stride);
    t.w_first.push_back(w1);
    t.w_second.push_back(w2);
  }
  return t;
}

void resize_bilinear_float(const KernelContext& context, const ResizeParams& p, const Request& r, const Tensor& x,
                           Tensor& y) {
  const int64_t rank = x.rank();
  const int64_t in_h = x.dim(rank - 2), in_w = x.dim(rank - 1);
  const int64_t out_h = y.dim(rank - 2), out_w = y.dim(rank - 1);
  const FloatTaps rows = float_taps(p.coord, in_h, out_h, static_cast<float>(r.scales[static_cast<std::size_t>(rank - 2)]), in_w);
  const FloatTaps cols = float_taps(p.coord, in_w, out_w, static_cast<float>(r.scales[static_cast<std::size_t>(rank - 1)]), 1);
  const int64_t planes = x.numel() / std::max<int64_t>(in_h * in_w, 1);
  const float* in = x.data<float>();
  float* out = y.data<float>();
  context.parallel_for(planes, out_h * out_w * 8, [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      const float* src = in + plane * in_h * in_w;
      float* dst = out + plane * out_h * out_w;
      for (int64_t oy = 0; oy < out_h; ++oy) {
        const auto yi = static_cast<std::size_t>(oy);
        const float* row1 = src + rows.first[yi];
        const float* row2 = src + rows.second[yi];
        const float dy1 = rows.w_first[yi], dy2 = rows.w_second[yi];
        for (int64_t ox = 0; ox < out_w; ++ox) {
          const auto xi = static_cast<std::size_t>(ox);
          const float dx1 = cols.w_first[xi], dx2 = cols.w_second[xi];
          const int64_t c1 = cols.first[xi], c2 = cols.second[xi];
          dst[oy * out_w + ox] = dx1 * dy1 * row1[c1] + dx2 * dy1 * row1[c2] + dx1 * dy2 * row2[c1] + dx2 * dy2 * row2[c2];
        }
      }
    }
  });
}

Status run_resize(KernelContext& context, const ResizeParams& params, const Request& request) {
  const Tensor& x = *context.input(0);
  const std::size_t rank = request.out_shape.size();
  for (int64_t d : request.out_shape)
    if (d < 0) return context.error("output shape " + shape_to_string(request.out_shape) + " is negative");
  // Every output element is computed (numeric types only): a dead buffer of the run will do.
  auto y = context.allocate(x.dtype(), request.out_shape);
  if (!y) return y.status();
  std::vector<AxisPlan> plans;
  for (std::size_t d = 0; d < rank; ++d) {
    const double roi_start = request.roi.empty() ? 0.0 : request.roi[d];
    const double roi_end = request.roi.empty() ? 1.0 : request.roi[rank + d];
    plans.push_back(plan_axis(params, x.shape()[d], request.out_shape[d], request.scales[d], request.widths[d],
                              roi_start, roi_end));
  }
  if (y->numel() > 0 && x.numel() == 0) return context.error("cannot resize an empty input to a non-empty output");
  if (y->numel() > 0) {
    if (params.mode == Mode::Nearest) {
      QFLOW_RETURN_IF_ERROR(dispatch_all(x.dtype(), [&]<typename T>() {
        resize_nearest<T>(context, x, *y, plans, params.extrapolation);
        return Status::ok();
      }));
    } else if (bilinear_in_float(params, x, request)) {
      resize_bilinear_float(context, params, request, x, *y);
    } else {
      QFLOW_RETURN_IF_ERROR(dispatch_float(x.dtype(), [&]<typename T>() {
        resize_interpolate<T>(context, x, *y, plans, params.extrapolation);
        return Status::ok();
      }));
    }
  }
  context.outputs[0] = std::move(y).value();
  return Status::ok();
}

// Output length floor(in * scale), as the operator defines it.
Status request_from_scales(const KernelContext& context, const Shape& in_shape, const std::vector<double>& scales,
                           Request& request) {
  if (scales.size() != in_shape.size())
    return context.error("scales has " + std::to_string(scales.size()) + " values, expected one per input axis (" +
                         std::to_string(in_shape.size()) + ")");
  for (std::size_t d = 0; d < scales.size(); ++d) {
    if (!(scales[d] > 0.0) || !std::isfinite(scales[d]))
      return context.error("scales must be positive, got " + std::to_string(scales[d]) + " on axis " + std::to_string(d));
    const double width = scales[d] * static_cast<double>(in_shape[d]);
    if (width > 9.0e15) return context.error("scale " + std::to_string(scales[d]) + " gives an output too large");
    request.out_shape.push_back(static_cast<int64_t>(std::floor(width)));
    request.scales.push_back(scales[d]);
    request.widths.push_back(width);
  }
  return Status::ok();
}

Status request_from_sizes(const KernelContext& context, const Shape& in_shape, const std::vector<int64_t>& sizes,
                          Request& request) {
  if (sizes.size() != in_shape.size())
    return context.error("sizes has " + std::to_string(sizes.size()) + " values, expected one per input axis (" +
                         std::to_string(in_shape.size()) + ")");
  for (std::size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] < 0) return context.error("sizes must not be negative, got " + std::to_string(sizes[d]));
    if (in_shape[d] == 0 && sizes[d] != 0) return context.error("cannot resize an empty axis to a non-empty one");
    request.out_shape.push_back(sizes[d]);
    request.scales.push_back(in_shape[d] == 0 ? 1.0 : static_cast<double>(sizes[d]) / static_cast<double>(in_shape[d]));
    request.widths.push_back(static_cast<double>(sizes[d]));
  }
  return Status::ok();
}

// Opset 18 names the resized axes explicitly; spread per-axis values over the full rank.
template <typename V>
Expected<std::vector<V>> expand_axes(const KernelContext& context, const std::vector<V>& values,
                                     const std::vector<int64_t>& axes, int64_t rank, V fill) {
  if (axes.empty()) return values;
  if (values.size() != axes.size())
    return context.error("scales/sizes have " + std::to_string(values.size()) + " values for " +
                         std::to_string(axes.size()) + " axes");
  std::vector<V> full(static_cast<std::size_t>(rank), fill);
  std::vector<bool> seen(static_cast<std::size_t>(rank), false);
  for (std::size_t i = 0; i < axes.size(); ++i) {
    auto axis = normalize_axis(axes[i], rank);
    if (!axis) return context.error(axis.status().message());
    if (seen[static_cast<std::size_t>(*axis)]) return context.error("axes repeats axis " + std::to_string(*axis));
    seen[static_cast<std::size_t>(*axis)] = true;
    full[static_cast<std::size_t>(*axis)] = values[i];
  }
  return full;
}

// Opset 18 names the resized axes and may keep the aspect ratio: then every named axis
// shares one factor, which is also the scale the coordinate transform uses.
Status request_from_named_sizes(const KernelContext& context, const Shape& in_shape, const std::vector<int64_t>& sizes,
                                const std::vector<int64_t>& axes, const std::string& aspect, Request& request) {
  const int64_t rank = static_cast<int64_t>(in_shape.size());
  std::vector<int64_t> named;
  std::vector<bool> is_named(in_shape.size(), axes.empty());
  for (int64_t i = 0; i < rank; ++i)
    if (axes.empty()) named.push_back(i);
  for (int64_t a : axes) {
    auto axis = normalize_axis(a, rank);
    if (!axis) return context.error(axis.status().message());
    if (is_named[static_cast<std::size_t>(*axis)]) return context.error("axes repeats axis " + std::to_string(*axis));
    is_named[static_cast<std::size_t>(*axis)] = true;
    named.push_back(*axis);
  }
  if (sizes.size() != named.size())
    return context.error("sizes has " + std::to_string(sizes.size()) + " values, expected one per resized axis (" +
                         std::to_string(named.size()) + ")");
  Shape target = in_shape;
  for (std::size_t i = 0; i < named.size(); ++i) target[static_cast<std::size_t>(named[i])] = sizes[i];
  if (aspect == "stretch") return request_from_sizes(context, in_shape, target, request);
  double factor = aspect == "not_larger" ? std::numeric_limits<double>::infinity() : 0.0;
  for (std::size_t i = 0; i < named.size(); ++i) {
    const int64_t in_len = in_shape[static_cast<std::size_t>(named[i])];
    if (in_len <= 0 || sizes[i] <= 0) return context.error("keep_aspect_ratio_policy needs positive sizes and input axes");
    const double r = static_cast<double>(sizes[i]) / static_cast<double>(in_len);
    factor = aspect == "not_larger" ? std::min(factor, r) : std::max(factor, r);
  }
  for (std::size_t d = 0; d < in_shape.size(); ++d) {
    const double width = is_named[d] ? factor * static_cast<double>(in_shape[d]) : static_cast<double>(in_shape[d]);
    request.out_shape.push_back(static_cast<int64_t>(width + 0.5));
    request.scales.push_back(is_named[d] ? factor : 1.0);
    request.widths.push_back(width);
  }
  return Status::ok();
}

Status resize_v11(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* x, context.required_input(0));
  const Node& node = context.node;
  ResizeParams params;
  QFLOW_ASSIGN_OR_RETURN(params.mode, parse_mode(context, node.attr_string("mode", "nearest"), true));
  QFLOW_ASSIGN_OR_RETURN(params.coord, parse_coord(context, node.attr_string("coordinate_transformation_mode", "half_pixel")));
  QFLOW_ASSIGN_OR_RETURN(params.rounding, parse_rounding(context, node.attr_string("nearest_mode", "round_prefer_floor")));
  params.cubic_a = node.attr_float("cubic_coeff_a", -0.75f);
  params.exclude_outside = node.attr_int("exclude_outside", 0) != 0;
  params.extrapolation = node.attr_float("extrapolation_value", 0.0f);
  if (node.attr_int("antialias", 0) != 0)
    return unsupported(node.op_type() + " '" + node.name() + "': antialias=1 is not supported");
  const std::vector<int64_t> axes = node.attr_ints("axes", {});
  const std::string aspect = node.attr_string("keep_aspect_ratio_policy", "stretch");
  if (aspect != "stretch" && aspect != "not_larger" && aspect != "not_smaller")
    return context.error("keep_aspect_ratio_policy '" + aspect + "' is not supported");

  const int64_t rank = x->rank();
  const Tensor* roi = context.input(1);
  const Tensor* scales = context.input(2);
  const Tensor* sizes = context.input(3);
  if (scales && scales->numel() == 0) scales = nullptr;
  if (sizes && sizes->numel() == 0) sizes = nullptr;
  if ((scales != nullptr) == (sizes != nullptr))
    return context.error("exactly one of scales and sizes must be given");

  Request request;
  if (scales) {
    if (!is_float(scales->dtype())) return context.error("scales must be a float tensor");
    QFLOW_ASSIGN_OR_RETURN(std::vector<double> values, expand_axes(context, scales->to_doubles(), axes, rank, 1.0));
    QFLOW_RETURN_IF_ERROR(request_from_scales(context, x->shape(), values, request));
  } else {
    if (sizes->dtype() != DType::Int64) return context.error("sizes must be an int64 tensor");
    QFLOW_RETURN_IF_ERROR(request_from_named_sizes(context, x->shape(), sizes->to_int64s(), axes, aspect, request));
  }
  if (params.coord == Coord::TfCropAndResize) {
    if (!roi || roi->numel() == 0) return context.error("tf_crop_and_resize needs the roi input");
    std::vector<double> r = roi->to_doubles();
    if (!axes.empty()) {
      if (r.size() != 2 * axes.size()) return context.error("roi must have 2 values per entry of axes");
      std::vector<double> full(static_cast<std::size_t>(2 * rank), 0.0);
      for (int64_t d = 0; d < rank; ++d) full[static_cast<std::size_t>(rank + d)] = 1.0;
      for (std::size_t i = 0; i < axes.size(); ++i) {
        const int64_t a = *normalize_axis(axes[i], rank);
        full[static_cast<std::size_t>(a)] = r[i];
        full[static_cast<std::size_t>(rank + a)] = r[axes.size() + i];
      }
      r = std::move(full);
    }
    if (static_cast<int64_t>(r.size()) != 2 * rank)
      return context.error("roi has " + std::to_string(r.size()) + " values, expected " + std::to_string(2 * rank));
    request.roi = std::move(r);
  }
  return run_resize(context, params, request);
}

// Resize-10 and Upsample: scales only, asymmetric coordinates, nearest or linear.
Status resize_scales_only(KernelContext& context, const std::vector<double>& scales) {
  const Tensor& x = *context.input(0);
  ResizeParams params;
  QFLOW_ASSIGN_OR_RETURN(params.mode, parse_mode(context, context.node.attr_string("mode", "nearest"), false));
  params.coord = Coord::Asymmetric;
  params.rounding = Rounding::Simple;
  Request request;
  QFLOW_RETURN_IF_ERROR(request_from_scales(context, x.shape(), scales, request));
  return run_resize(context, params, request);
}

Status resize_v10(KernelContext& context) {
  QFLOW_RETURN_IF_ERROR(context.required_input(0).status());
  QFLOW_ASSIGN_OR_RETURN(const Tensor* scales, context.required_input(1));
  if (!is_float(scales->dtype())) return context.error("scales must be a float tensor");
  return resize_scales_only(context, scales->to_doubles());
}

Status upsample(KernelContext& context) {
  QFLOW_RETURN_IF_ERROR(context.required_input(0).status());
  std::vector<double> scales;
  if (context.opset >= 9) {
    QFLOW_ASSIGN_OR_RETURN(const Tensor* s, context.required_input(1));
    if (!is_float(s->dtype())) return context.error("scales must be a float tensor");
    scales = s->to_doubles();
  } else {
    const Attribute* attr = context.node.find_attribute("scales");
    if (!attr || attr->type != AttributeType::Floats) return context.error("the scales attribute is required");
    scales.assign(attr->floats.begin(), attr->floats.end());
  }
  for (double s : scales)
    if (s < 1.0) return context.error("Upsample scales must be >= 1, got " + std::to_string(s));
  return resize_scales_only(context, scales);
}

}  // namespace

void register_resize_kernels(KernelRegistry& registry) {
  registry.add_function("", "Resize", 10, 10, resize_v10);
  registry.add_function("", "Resize", 11, kLatestOpset, resize_v11);
  registry.add_function("", "Upsample", 7, 9, upsample);
}

}  // namespace qflow

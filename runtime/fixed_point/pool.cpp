// MaxPool, AveragePool, GlobalAveragePool (docs/fixed-point.md, section 5).
#include <algorithm>
#include <climits>

#include "qflow/runtime/fixed_point.h"

namespace qflow::fx {
namespace {

Status check_pool(const Pool2DParams& p, std::span<const int32_t> x, std::span<int32_t> y) {
  if (p.batch < 1 || p.channels < 1 || p.in_h < 1 || p.in_w < 1 || p.kernel_h < 1 || p.kernel_w < 1 ||
      p.strides[0] < 1 || p.strides[1] < 1 || p.dilations[0] < 1 || p.dilations[1] < 1 ||
      std::any_of(p.pads.begin(), p.pads.end(), [](int64_t v) { return v < 0; }))
    return invalid_input("pool: dimensions, strides and dilations must be positive, pads non-negative");
  if (p.pads[0] >= p.kernel_h || p.pads[2] >= p.kernel_h || p.pads[1] >= p.kernel_w || p.pads[3] >= p.kernel_w)
    return invalid_input("pool: pads must be smaller than the kernel");
  const int64_t oh = pool_out_h(p), ow = pool_out_w(p);
  if (oh < 1 || ow < 1) return invalid_input("pool: the kernel does not fit the padded input");
  if (x.size() != static_cast<size_t>(p.batch * p.channels * p.in_h * p.in_w) ||
      y.size() != static_cast<size_t>(p.batch * p.channels * oh * ow))
    return invalid_input("pool: tensor sizes do not match the parameters");
  const Range r = range_of(p.input.type);
  if (p.input.zero_point < r.min || p.input.zero_point > r.max) return invalid_input("pool: input zero point outside its type");
  const Range ro = range_of(p.output.type);
  if (p.output.zero_point < ro.min || p.output.zero_point > ro.max)
    return invalid_input("pool: output zero point outside its type");
  for (const int32_t v : x)
    if (v < r.min || v > r.max) return invalid_input("pool: input value " + std::to_string(v) + " outside its type");
  return Status{};
}

}  // namespace

int64_t pool_out_h(const Pool2DParams& p) {
  return (p.in_h + p.pads[0] + p.pads[2] - (p.dilations[0] * (p.kernel_h - 1) + 1)) / p.strides[0] + 1;
}

int64_t pool_out_w(const Pool2DParams& p) {
  return (p.in_w + p.pads[1] + p.pads[3] - (p.dilations[1] * (p.kernel_w - 1) + 1)) / p.strides[1] + 1;
}

Status max_pool(const Pool2DParams& p, std::span<const int32_t> x, std::span<int32_t> y) {
  if (Status s = check_pool(p, x, y); !s.is_ok()) return invalid_input("max_pool: " + s.message());
  if (p.input != p.output) return invalid_input("max_pool: output parameters must equal the input's");
  const int64_t oh = pool_out_h(p), ow = pool_out_w(p);
  for (int64_t nc = 0; nc < p.batch * p.channels; ++nc) {
    const int32_t* xc = x.data() + nc * p.in_h * p.in_w;
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox) {
        int32_t best = range_of(p.input.type).min;  // padded taps never win
        for (int64_t ky = 0; ky < p.kernel_h; ++ky) {
          const int64_t iy = oy * p.strides[0] - p.pads[0] + ky * p.dilations[0];
          if (iy < 0 || iy >= p.in_h) continue;
          for (int64_t kx = 0; kx < p.kernel_w; ++kx) {
            const int64_t ix = ox * p.strides[1] - p.pads[1] + kx * p.dilations[1];
            if (ix >= 0 && ix < p.in_w) best = std::max(best, xc[iy * p.in_w + ix]);
          }
        }
        y[static_cast<size_t>((nc * oh + oy) * ow + ox)] = best;
      }
  }
  return Status{};
}

Status average_pool(const Pool2DParams& p, std::span<const int32_t> x, std::span<int32_t> y) {
  if (Status s = check_pool(p, x, y); !s.is_ok()) return invalid_input("average_pool: " + s.message());
  if (p.dilations[0] != 1 || p.dilations[1] != 1) return invalid_input("average_pool: dilations must be 1");
  if (!(p.input.scale > 0.0) || !(p.output.scale > 0.0)) return invalid_input("average_pool: scales must be positive");
  {
    // The window sum is an int32 accumulator.
    const Range r = range_of(p.input.type);
    const int64_t offset = std::max<int64_t>(int64_t{p.input.zero_point} - r.min, int64_t{r.max} - p.input.zero_point);
    if (p.kernel_h * p.kernel_w > INT32_MAX / std::max<int64_t>(offset, 1))
      return invalid_input("average_pool: a " + std::to_string(p.kernel_h) + "x" + std::to_string(p.kernel_w) +
                           " window may overflow the int32 sum");
  }
  const bool same = p.input == p.output;
  const double ratio = p.input.scale / p.output.scale;
  const Range ro = range_of(p.output.type);
  // One multiplier per possible divisor, derived once (the lowering stores them).
  std::vector<Multiplier> per_count(static_cast<size_t>(p.kernel_h * p.kernel_w + 1));
  if (!same)
    for (size_t c = 1; c < per_count.size(); ++c)
      if (Status s = make_multiplier(ratio / static_cast<double>(c), per_count[c]); !s.is_ok())
        return invalid_input("average_pool: " + s.message());
  const int64_t oh = pool_out_h(p), ow = pool_out_w(p);
  const int64_t zp = p.input.zero_point;
  for (int64_t nc = 0; nc < p.batch * p.channels; ++nc) {
    const int32_t* xc = x.data() + nc * p.in_h * p.in_w;
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox) {
        int64_t sum = 0, count = 0;
        for (int64_t ky = 0; ky < p.kernel_h; ++ky) {
          const int64_t iy = oy * p.strides[0] - p.pads[0] + ky;
          if (iy < 0 || iy >= p.in_h) continue;
          for (int64_t kx = 0; kx < p.kernel_w; ++kx) {
            const int64_t ix = ox * p.strides[1] - p.pads[1] + kx;
            if (ix < 0 || ix >= p.in_w) continue;
            sum += xc[iy * p.in_w + ix] - zp;
            ++count;
          }
        }
        // A padded tap is real 0, i.e. q - zp = 0: it only enlarges the divisor.
        if (p.count_include_pad) count = p.kernel_h * p.kernel_w;
        const auto out = static_cast<size_t>((nc * oh + oy) * ow + ox);
        if (same)
          y[out] = static_cast<int32_t>(std::clamp<int64_t>(rounding_divide(sum, count) + p.output.zero_point, ro.min, ro.max));
        else
          y[out] = requantize(sum, per_count[static_cast<size_t>(count)], p.output.zero_point, ro.min, ro.max);
      }
  }
  return Status{};
}

Status global_average_pool(int64_t batch, int64_t channels, int64_t h, int64_t w, const QParams& input,
                           const QParams& output, std::span<const int32_t> x, std::span<int32_t> y) {
  Pool2DParams p;
  p.batch = batch;
  p.channels = channels;
  p.in_h = h;
  p.in_w = w;
  p.kernel_h = h;
  p.kernel_w = w;
  p.input = input;
  p.output = output;
  if (Status s = average_pool(p, x, y); !s.is_ok()) return invalid_input("global_" + s.message());
  return Status{};
}

}  // namespace qflow::fx

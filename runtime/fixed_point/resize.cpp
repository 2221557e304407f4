// Resize nearest and bilinear with integer coordinate arithmetic (docs/fixed-point.md, section 6).
#include <algorithm>

#include "qflow/runtime/fixed_point.h"

namespace qflow::fx {
namespace {

// The source coordinate of output index o as the exact fraction num / den (den > 0).
void source_fraction(int64_t o, int64_t in, int64_t out, CoordinateMode cm, int64_t& num, int64_t& den) {
  switch (cm) {
    case CoordinateMode::Asymmetric: num = o * in, den = out; return;
    case CoordinateMode::HalfPixel: num = (2 * o + 1) * in - out, den = 2 * out; return;
    case CoordinateMode::AlignCorners:
      if (out == 1) num = 0, den = 1;
      else num = o * (in - 1), den = out - 1;
      return;
  }
}

int64_t floor_div(int64_t num, int64_t den) {
  const int64_t q = num / den;
  return (num % den != 0 && num < 0) ? q - 1 : q;
}

Status check_resize(const ResizeParams& p, std::span<const int32_t> x, std::span<int32_t> y) {
  if (p.batch < 1 || p.channels < 1 || p.in_h < 1 || p.in_w < 1 || p.out_h < 1 || p.out_w < 1)
    return invalid_input("resize: dimensions must be positive");
  // Coordinates are formed as (2o + 1) * in * 2^15: keep them far inside int64.
  if (p.in_h > (int64_t{1} << 20) || p.in_w > (int64_t{1} << 20) || p.out_h > (int64_t{1} << 20) ||
      p.out_w > (int64_t{1} << 20))
    return invalid_input("resize: spatial sizes above 2^20 are not supported");
  if (x.size() != static_cast<size_t>(p.batch * p.channels * p.in_h * p.in_w) ||
      y.size() != static_cast<size_t>(p.batch * p.channels * p.out_h * p.out_w))
    return invalid_input("resize: tensor sizes do not match the parameters");
  const Range r = range_of(p.type);
  for (const int32_t v : x)
    if (v < r.min || v > r.max) return invalid_input("resize: input value " + std::to_string(v) + " outside its type");
  return Status{};
}

}  // namespace

int64_t nearest_source_index(int64_t o, int64_t in, int64_t out, CoordinateMode cm, NearestMode nm) {
  int64_t num = 0, den = 1;
  source_fraction(o, in, out, cm, num, den);
  const int64_t f = floor_div(num, den);
  const int64_t rem = num - f * den;  // in [0, den)
  int64_t i = f;
  switch (nm) {
    case NearestMode::RoundPreferFloor: i += 2 * rem > den ? 1 : 0; break;
    case NearestMode::RoundPreferCeil: i += 2 * rem >= den && rem != 0 ? 1 : 0; break;
    case NearestMode::Floor: break;
    case NearestMode::Ceil: i += rem != 0 ? 1 : 0; break;
  }
  return std::clamp<int64_t>(i, 0, in - 1);
}

int64_t linear_source_position(int64_t o, int64_t in, int64_t out, CoordinateMode cm) {
  int64_t num = 0, den = 1;
  source_fraction(o, in, out, cm, num, den);
  return std::max<int64_t>(0, floor_div(num * (int64_t{1} << kResizeFracBits), den));
}

Status resize_nearest(const ResizeParams& p, std::span<const int32_t> x, std::span<int32_t> y) {
  if (Status s = check_resize(p, x, y); !s.is_ok()) return s;
  std::vector<int64_t> sy(static_cast<size_t>(p.out_h)), sx(static_cast<size_t>(p.out_w));
  for (int64_t o = 0; o < p.out_h; ++o)
    sy[static_cast<size_t>(o)] = nearest_source_index(o, p.in_h, p.out_h, p.coordinate_mode, p.nearest_mode);
  for (int64_t o = 0; o < p.out_w; ++o)
    sx[static_cast<size_t>(o)] = nearest_source_index(o, p.in_w, p.out_w, p.coordinate_mode, p.nearest_mode);
  for (int64_t nc = 0; nc < p.batch * p.channels; ++nc)
    for (int64_t oy = 0; oy < p.out_h; ++oy)
      for (int64_t ox = 0; ox < p.out_w; ++ox)
        y[static_cast<size_t>((nc * p.out_h + oy) * p.out_w + ox)] =
            x[static_cast<size_t>((nc * p.in_h + sy[static_cast<size_t>(oy)]) * p.in_w + sx[static_cast<size_t>(ox)])];
  return Status{};
}

Status resize_bilinear(const ResizeParams& p, std::span<const int32_t> x, std::span<int32_t> y) {
  if (Status s = check_resize(p, x, y); !s.is_ok()) return s;
  constexpr int64_t one = int64_t{1} << kResizeFracBits;
  struct Tap {
    int64_t i0, i1, frac;
  };
  auto taps = [&](int64_t out, int64_t in) {
    std::vector<Tap> t(static_cast<size_t>(out));
    for (int64_t o = 0; o < out; ++o) {
      const int64_t pos = linear_source_position(o, in, out, p.coordinate_mode);
      int64_t i0 = pos >> kResizeFracBits, frac = pos & (one - 1);
      if (i0 >= in - 1) i0 = in - 1, frac = 0;
      t[static_cast<size_t>(o)] = Tap{i0, std::min(i0 + 1, in - 1), frac};
    }
    return t;
  };
  const std::vector<Tap> ty = taps(p.out_h, p.in_h), tx = taps(p.out_w, p.in_w);
  for (int64_t nc = 0; nc < p.batch * p.channels; ++nc) {
    const int32_t* xc = x.data() + nc * p.in_h * p.in_w;
    for (int64_t oy = 0; oy < p.out_h; ++oy) {
      const Tap& a = ty[static_cast<size_t>(oy)];
      for (int64_t ox = 0; ox < p.out_w; ++ox) {
        const Tap& b = tx[static_cast<size_t>(ox)];
        const int64_t top = xc[a.i0 * p.in_w + b.i0] * (one - b.frac) + xc[a.i0 * p.in_w + b.i1] * b.frac;
        const int64_t bottom = xc[a.i1 * p.in_w + b.i0] * (one - b.frac) + xc[a.i1 * p.in_w + b.i1] * b.frac;
        const int64_t v = top * (one - a.frac) + bottom * a.frac;  // value * 2^30
        y[static_cast<size_t>((nc * p.out_h + oy) * p.out_w + ox)] =
            static_cast<int32_t>(rounding_shift(v, 2 * kResizeFracBits));
      }
    }
  }
  return Status{};
}

}  // namespace qflow::fx

// Lookup tables: direct 8-bit tables and segmented 16-bit tables (docs/fixed-point.md, section 7).
#include <algorithm>
#include <cmath>

#include "qflow/runtime/fixed_point.h"

namespace qflow::fx {

int32_t quantize(double real, const QParams& p) {
  const Range r = range_of(p.type);
  const double v = std::nearbyint(real / p.scale) + p.zero_point;  // half to even
  if (!(v > r.min)) return r.min;  // also -inf; NaN is the caller's to refuse
  if (v >= r.max) return r.max;
  return static_cast<int32_t>(v);
}

double dequantize(int32_t q, const QParams& p) { return p.scale * (static_cast<double>(q) - p.zero_point); }

Status build_lut(const std::function<double(double)>& f, const QParams& input, const QParams& output,
                 int segment_bits, Lut& out) {
  if (!(input.scale > 0.0) || !(output.scale > 0.0) || !std::isfinite(input.scale) || !std::isfinite(output.scale))
    return invalid_input("lut: scales must be positive and finite");
  const Range ri = range_of(input.type), ro = range_of(output.type);
  if (input.zero_point < ri.min || input.zero_point > ri.max || output.zero_point < ro.min || output.zero_point > ro.max)
    return invalid_input("lut: zero point outside its type");
  Lut lut;
  lut.input = input;
  lut.output = output;
  int64_t count = 0, step = 1;
  if (is_16bit(input.type)) {
    if (segment_bits != 7 && segment_bits != 8) return invalid_input("lut: 16-bit tables need 7 or 8 segment bits");
    lut.segment_bits = segment_bits;
    step = int64_t{1} << segment_bits;
    count = (int64_t{1} << (16 - segment_bits)) + 1;
  } else {
    count = 256;
  }
  lut.entries.resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    // The last 16-bit entry lies one segment past the type's maximum: f is evaluated there.
    const double x = input.scale * (static_cast<double>(ri.min + i * step) - input.zero_point);
    const double v = f(x);
    if (std::isnan(v)) return invalid_input("lut: the function is NaN at " + std::to_string(x));
    lut.entries[static_cast<size_t>(i)] = quantize(v, output);
  }
  out = std::move(lut);
  return Status{};
}

int32_t lut_lookup(const Lut& lut, int32_t q) {
  const int64_t u = int64_t{q} - range_of(lut.input.type).min;
  if (lut.segment_bits == 0) return lut.entries[static_cast<size_t>(u)];
  const int64_t i = u >> lut.segment_bits, frac = u & ((int64_t{1} << lut.segment_bits) - 1);
  const int64_t e0 = lut.entries[static_cast<size_t>(i)], e1 = lut.entries[static_cast<size_t>(i + 1)];
  return static_cast<int32_t>(e0 + rounding_shift((e1 - e0) * frac, lut.segment_bits));
}

Status apply_lut(const Lut& lut, std::span<const int32_t> x, std::span<int32_t> y) {
  if (x.size() != y.size()) return invalid_input("lut: sizes differ");
  const Range r = range_of(lut.input.type);
  const size_t expected = lut.segment_bits == 0 ? static_cast<size_t>(r.max - r.min + 1)
                                                : (size_t{1} << (16 - lut.segment_bits)) + 1;
  if (lut.entries.size() != expected) return invalid_input("lut: the table has the wrong number of entries");
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] < r.min || x[i] > r.max) return invalid_input("lut: input value " + std::to_string(x[i]) + " outside its type");
    y[i] = lut_lookup(lut, x[i]);
  }
  return Status{};
}

Status build_sigmoid_lut(const QParams& input, const QParams& output, int segment_bits, Lut& out) {
  return build_lut([](double x) { return 1.0 / (1.0 + std::exp(-x)); }, input, output, segment_bits, out);
}

Status build_tanh_lut(const QParams& input, const QParams& output, int segment_bits, Lut& out) {
  return build_lut([](double x) { return std::tanh(x); }, input, output, segment_bits, out);
}

Status build_hard_sigmoid_lut(const QParams& input, const QParams& output, double alpha, double beta,
                              int segment_bits, Lut& out) {
  return build_lut([=](double x) { return std::clamp(alpha * x + beta, 0.0, 1.0); }, input, output, segment_bits, out);
}

Status build_hard_swish_lut(const QParams& input, const QParams& output, int segment_bits, Lut& out) {
  return build_lut([](double x) { return x * std::clamp(x / 6.0 + 0.5, 0.0, 1.0); }, input, output, segment_bits, out);
}

Status build_gelu_lut(const QParams& input, const QParams& output, int segment_bits, Lut& out) {
  return build_lut([](double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }, input, output,
                   segment_bits, out);
}

Status build_exp_lut(const QParams& input, const QParams& output, int segment_bits, Lut& out) {
  return build_lut([](double x) { return std::exp(x); }, input, output, segment_bits, out);
}

Status build_reciprocal_lut(const QParams& input, const QParams& output, int segment_bits, Lut& out) {
  // 1 / +0 = +inf saturates to the output maximum.
  return build_lut([](double x) { return 1.0 / x; }, input, output, segment_bits, out);
}

}  // namespace qflow::fx

// Softmax and LayerNorm in integers with tables (docs/fixed-point.md, section 8).
#include <algorithm>
#include <bit>
#include <cmath>

#include "qflow/runtime/fixed_point.h"

namespace qflow::fx {
namespace {

Status check_params(const QParams& q, const char* what) {
  const Range r = range_of(q.type);
  if (!(q.scale > 0.0) || !std::isfinite(q.scale)) return invalid_input(std::string(what) + " scale must be positive and finite");
  if (q.zero_point < r.min || q.zero_point > r.max)
    return invalid_input(std::string(what) + " zero point " + std::to_string(q.zero_point) + " is outside its type");
  return Status{};
}

Status check_values(std::span<const int32_t> v, QType type, const char* what) {
  const Range r = range_of(type);
  for (const int32_t x : v)
    if (x < r.min || x > r.max) return invalid_input(std::string(what) + " value " + std::to_string(x) + " outside its type");
  return Status{};
}

}  // namespace

Status make_softmax_params(const QParams& input, const QParams& output, SoftmaxParams& out) {
  if (Status s = check_params(input, "softmax input"); !s.is_ok()) return s;
  if (Status s = check_params(output, "softmax output"); !s.is_ok()) return s;
  SoftmaxParams p;
  p.input = input;
  p.output = output;
  while (p.segment_bits < 4 && std::ldexp(4096.0 * input.scale, p.segment_bits) < 22.0) ++p.segment_bits;
  p.exp_table.resize(kSoftmaxEntries);
  for (int i = 0; i < kSoftmaxEntries; ++i) {
    const double d = std::ldexp(static_cast<double>(i - (kSoftmaxEntries - 1)), p.segment_bits);
    p.exp_table[static_cast<size_t>(i)] = static_cast<int32_t>(std::nearbyint(std::ldexp(std::exp(d * input.scale), 30)));
  }
  if (Status s = make_multiplier(std::ldexp(1.0, -30) / output.scale, p.output_multiplier); !s.is_ok())
    return invalid_input("softmax: " + s.message());
  out = std::move(p);
  return Status{};
}

Status softmax(const SoftmaxParams& p, int64_t row, std::span<const int32_t> x, std::span<int32_t> y) {
  if (row < 1 || row > 65536 || x.size() % static_cast<size_t>(row) != 0 || x.size() != y.size())
    return invalid_input("softmax: rows must have 1 to 65536 elements and x and y the same size");
  if (p.exp_table.size() != static_cast<size_t>(kSoftmaxEntries)) return invalid_input("softmax: wrong table size");
  if (Status s = check_values(x, p.input.type, "softmax input"); !s.is_ok()) return s;
  const Range ro = range_of(p.output.type);
  if (p.segment_bits < 0 || p.segment_bits > 4) return invalid_input("softmax: segment bits outside [0, 4]");
  const int bits = p.segment_bits;
  const int64_t mask = (int64_t{1} << bits) - 1, span = int64_t{kSoftmaxEntries - 1} << bits;
  std::vector<int64_t> e(static_cast<size_t>(row));
  for (size_t base = 0; base < x.size(); base += static_cast<size_t>(row)) {
    const int32_t mx = *std::max_element(x.begin() + static_cast<std::ptrdiff_t>(base),
                                         x.begin() + static_cast<std::ptrdiff_t>(base) + row);
    int64_t sum = 0;  // at most 65536 * 2^30; >= 2^30 (the maximum's entry)
    for (int64_t j = 0; j < row; ++j) {
      const int64_t u = int64_t{x[base + static_cast<size_t>(j)]} - mx + span;  // <= span
      int64_t v = 0;  // below the table: exp < 2^-31
      if (u >= 0) {
        const int64_t i = u >> bits, t = u & mask;
        const int64_t e0 = p.exp_table[static_cast<size_t>(i)];
        v = t == 0 ? e0 : e0 + rounding_shift((p.exp_table[static_cast<size_t>(i + 1)] - e0) * t, bits);
      }
      e[static_cast<size_t>(j)] = v;
      sum += v;
    }
    for (int64_t j = 0; j < row; ++j) {
      const int64_t prob = rounding_divide(e[static_cast<size_t>(j)] << 30, sum);  // Q30, <= 2^30
      y[base + static_cast<size_t>(j)] = requantize(prob, p.output_multiplier, p.output.zero_point, ro.min, ro.max);
    }
  }
  return Status{};
}

uint64_t integer_sqrt(uint64_t v) {
  if (v < 2) return v;
  // Newton's iteration from an over-estimate decreases monotonically to floor(sqrt(v)).
  uint64_t r = uint64_t{1} << ((std::bit_width(v) + 1) / 2);  // > sqrt(v)
  while (true) {
    const uint64_t next = (r + v / r) / 2;
    if (next >= r) return r;
    r = next;
  }
}

Status make_layernorm_params(const QParams& input, const QParams& output, const std::vector<double>& gamma,
                             const std::vector<double>& beta, double epsilon, LayerNormParams& out) {
  if (Status s = check_params(input, "layernorm input"); !s.is_ok()) return s;
  if (Status s = check_params(output, "layernorm output"); !s.is_ok()) return s;
  if (gamma.empty() || gamma.size() > static_cast<size_t>(kLayerNormMaxRow) || beta.size() != gamma.size())
    return invalid_input("layernorm: gamma and beta need the same length, 1 to 8192");
  if (!(epsilon >= 0.0) || !std::isfinite(epsilon)) return invalid_input("layernorm: epsilon must be finite and >= 0");
  double gmax = 0.0;
  for (const double g : gamma) {
    if (!std::isfinite(g)) return invalid_input("layernorm: gamma is not finite");
    gmax = std::max(gmax, std::fabs(g));
  }
  LayerNormParams p;
  p.input = input;
  p.output = output;
  p.row = static_cast<int64_t>(gamma.size());
  const double s_gamma = (gmax > 0.0 ? gmax : 1.0) / 32767.0;
  const double s_beta = std::ldexp(s_gamma, -kLayerNormFracBits);
  for (size_t i = 0; i < gamma.size(); ++i) {
    p.gamma.push_back(static_cast<int32_t>(std::nearbyint(gamma[i] / s_gamma)));
    const double b = std::nearbyint(beta[i] / s_beta);
    if (!(std::fabs(b) <= 2147483647.0)) return invalid_input("layernorm: beta does not fit int32 at scale s_gamma * 2^-12");
    p.beta.push_back(static_cast<int32_t>(b));
  }
  const double eps = std::nearbyint(std::ldexp(epsilon / (input.scale * input.scale), 16));
  if (!(eps < 4e18)) return invalid_input("layernorm: epsilon is too large for the input scale");
  p.epsilon = static_cast<int64_t>(eps);
  if (Status s = make_multiplier(s_beta / output.scale, p.output_multiplier); !s.is_ok())
    return invalid_input("layernorm: " + s.message());
  out = std::move(p);
  return Status{};
}

Status layernorm(const LayerNormParams& p, std::span<const int32_t> x, std::span<int32_t> y) {
  const auto row = static_cast<size_t>(p.row);
  if (p.row < 1 || p.row > kLayerNormMaxRow || p.gamma.size() != row || p.beta.size() != row ||
      x.size() % row != 0 || x.size() != y.size())
    return invalid_input("layernorm: sizes do not match the row length");
  if (Status s = check_values(x, p.input.type, "layernorm input"); !s.is_ok()) return s;
  const Range ro = range_of(p.output.type);
  std::vector<int64_t> dev(row);
  for (size_t base = 0; base < x.size(); base += row) {
    // Mean in Q8 of the input LSB, deviations in Q8: |dev| < 2^25.
    int64_t sum = 0;
    for (size_t j = 0; j < row; ++j) sum += int64_t{x[base + j]} - p.input.zero_point;
    const int64_t mean8 = rounding_divide(sum * 256, p.row);
    uint64_t squares = 0;  // row <= 2^13 and dev^2 < 2^50
    for (size_t j = 0; j < row; ++j) {
      dev[j] = (int64_t{x[base + j]} - p.input.zero_point) * 256 - mean8;
      squares += static_cast<uint64_t>(dev[j] * dev[j]);
    }
    // Variance (+ epsilon) in units of 2^-16 LSB^2, then scaled by 4^k into [2^60, 2^62) when
    // possible so the integer square root keeps precision.
    const auto var = static_cast<uint64_t>(rounding_divide(static_cast<int64_t>(squares), p.row)) +
                     static_cast<uint64_t>(p.epsilon);
    int k = 0;
    while (k < 16 && var != 0 && var < (uint64_t{1} << (60 - 2 * k))) ++k;
    const uint64_t root = integer_sqrt(var << (2 * k));  // sqrt(var) * 2^k
    for (size_t j = 0; j < row; ++j) {
      // normalized value in Q12: dev * 2^(12 + k) / root (|dev| < 2^25, 12 + k <= 28)
      const int64_t n = root == 0 ? 0 : rounding_divide(dev[j] * (int64_t{1} << (kLayerNormFracBits + k)), static_cast<int64_t>(root));
      const int64_t acc = n * p.gamma[j] + p.beta[j];
      y[base + j] = requantize(acc, p.output_multiplier, p.output.zero_point, ro.min, ro.max);
    }
  }
  return Status{};
}

}  // namespace qflow::fx

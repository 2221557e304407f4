// Add / Sub, Mul, rescaling and Concat (docs/fixed-point.md, section 4).
#include <algorithm>
#include <cmath>

#include "qflow/runtime/fixed_point.h"

namespace qflow::fx {
namespace {

Range bounds(QType type, Clamp clamp) {
  const Range r = range_of(type);
  return Range{std::max(r.min, clamp.min), std::min(r.max, clamp.max)};
}

Status check_params(const QParams& q, const char* what) {
  const Range r = range_of(q.type);
  if (!(q.scale > 0.0) || q.scale > 1e300)
    return invalid_input(std::string(what) + " scale must be positive and finite");
  if (q.zero_point < r.min || q.zero_point > r.max)
    return invalid_input(std::string(what) + " zero point " + std::to_string(q.zero_point) + " is outside its type");
  return Status{};
}

Status check_values(std::span<const int32_t> v, QType type, const char* what) {
  const Range r = range_of(type);
  for (const int32_t x : v)
    if (x < r.min || x > r.max)
      return invalid_input(std::string(what) + " holds " + std::to_string(x) + ", outside its type's range");
  return Status{};
}

}  // namespace

Status make_add_params(const QParams& a, const QParams& b, const QParams& output, bool subtract, AddParams& out) {
  for (const auto& [q, what] : {std::pair{&a, "add input A"}, std::pair{&b, "add input B"}, std::pair{&output, "add output"}})
    if (Status s = check_params(*q, what); !s.is_ok()) return s;
  AddParams p;
  p.a = a;
  p.b = b;
  p.output = output;
  p.subtract = subtract;
  p.left_shift = (is_16bit(a.type) || is_16bit(b.type)) ? 15 : 20;
  const double twice_max = 2.0 * std::max(a.scale, b.scale);
  if (Status s = make_multiplier(a.scale / twice_max, p.a_multiplier); !s.is_ok()) return s;
  if (Status s = make_multiplier(b.scale / twice_max, p.b_multiplier); !s.is_ok()) return s;
  if (Status s = make_multiplier(twice_max / (std::ldexp(1.0, p.left_shift) * output.scale), p.output_multiplier);
      !s.is_ok())
    return invalid_input("add: output rescale: " + s.message());
  out = p;
  return Status{};
}

Status add(const AddParams& p, std::span<const int32_t> a, std::span<const int32_t> b, std::span<int32_t> y) {
  if (a.size() != b.size() || a.size() != y.size()) return invalid_input("add: operand sizes differ");
  if (Status s = check_values(a, p.a.type, "add input A"); !s.is_ok()) return s;
  if (Status s = check_values(b, p.b.type, "add input B"); !s.is_ok()) return s;
  const Range r = bounds(p.output.type, p.clamp);
  if (r.min > r.max) return invalid_input("add: the clamp bounds leave no output value");
  for (size_t i = 0; i < a.size(); ++i) {
    const int64_t xa = (int64_t{a[i]} - p.a.zero_point) * (int64_t{1} << p.left_shift);
    const int64_t xb = (int64_t{b[i]} - p.b.zero_point) * (int64_t{1} << p.left_shift);
    const int64_t ra = multiply_by_multiplier(xa, p.a_multiplier);
    const int64_t rb = multiply_by_multiplier(xb, p.b_multiplier);
    y[i] = requantize(p.subtract ? ra - rb : ra + rb, p.output_multiplier, p.output.zero_point, r.min, r.max);
  }
  return Status{};
}

Status make_mul_params(const QParams& a, const QParams& b, const QParams& output, MulParams& out) {
  for (const auto& [q, what] : {std::pair{&a, "mul input A"}, std::pair{&b, "mul input B"}, std::pair{&output, "mul output"}})
    if (Status s = check_params(*q, what); !s.is_ok()) return s;
  MulParams p;
  p.a = a;
  p.b = b;
  p.output = output;
  if (Status s = make_multiplier(a.scale * b.scale / output.scale, p.multiplier); !s.is_ok())
    return invalid_input("mul: " + s.message());
  out = p;
  return Status{};
}

Status mul(const MulParams& p, std::span<const int32_t> a, std::span<const int32_t> b, std::span<int32_t> y) {
  if (a.size() != b.size() || a.size() != y.size()) return invalid_input("mul: operand sizes differ");
  if (Status s = check_values(a, p.a.type, "mul input A"); !s.is_ok()) return s;
  if (Status s = check_values(b, p.b.type, "mul input B"); !s.is_ok()) return s;
  const Range r = bounds(p.output.type, p.clamp);
  if (r.min > r.max) return invalid_input("mul: the clamp bounds leave no output value");
  for (size_t i = 0; i < a.size(); ++i) {
    const int64_t acc = (int64_t{a[i]} - p.a.zero_point) * (int64_t{b[i]} - p.b.zero_point);
    y[i] = requantize(acc, p.multiplier, p.output.zero_point, r.min, r.max);
  }
  return Status{};
}

Status rescale(const QParams& in, const QParams& out, std::span<const int32_t> x, std::span<int32_t> y) {
  if (x.size() != y.size()) return invalid_input("rescale: sizes differ");
  if (Status s = check_params(in, "rescale input"); !s.is_ok()) return s;
  if (Status s = check_params(out, "rescale output"); !s.is_ok()) return s;
  if (Status s = check_values(x, in.type, "rescale input"); !s.is_ok()) return s;
  if (in == out) {
    std::copy(x.begin(), x.end(), y.begin());
    return Status{};
  }
  Multiplier m;
  if (Status s = make_multiplier(in.scale / out.scale, m); !s.is_ok()) return invalid_input("rescale: " + s.message());
  const Range r = range_of(out.type);
  for (size_t i = 0; i < x.size(); ++i) y[i] = requantize(int64_t{x[i]} - in.zero_point, m, out.zero_point, r.min, r.max);
  return Status{};
}

Status concat(const std::vector<ConcatInput>& inputs, int64_t outer, int64_t inner, const QParams& output,
              std::span<int32_t> y) {
  if (outer < 1 || inner < 1) return invalid_input("concat: outer and inner sizes must be positive");
  int64_t total = 0;
  for (const ConcatInput& in : inputs) {
    if (in.axis_dim < 0 || in.data.size() != static_cast<size_t>(outer * in.axis_dim * inner))
      return invalid_input("concat: an input's size does not match its extent");
    total += in.axis_dim;
  }
  if (y.size() != static_cast<size_t>(outer * total * inner)) return invalid_input("concat: output size mismatch");
  int64_t offset = 0;
  std::vector<int32_t> rescaled;
  for (const ConcatInput& in : inputs) {
    rescaled.resize(in.data.size());
    if (Status s = rescale(in.params, output, in.data, rescaled); !s.is_ok()) return invalid_input("concat: " + s.message());
    const int64_t block = in.axis_dim * inner;
    for (int64_t o = 0; o < outer; ++o)
      std::copy_n(rescaled.begin() + o * block, block, y.begin() + (o * total + offset) * inner);
    offset += in.axis_dim;
  }
  return Status{};
}

}  // namespace qflow::fx

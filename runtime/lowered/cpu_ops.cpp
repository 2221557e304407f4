// Float kernels of the CPU segments: `cpu.<OnnxOp>` ops on f32 tensors (i64 for shapes and
// indices), with ONNX semantics (docs/lowered-model.md lists the ops and what each supports).
// Output shapes are the declared shapes of the output tensors; each kernel checks that its
// inputs produce them.
#include "qflow/runtime/cpu_ops.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>

#include "lowered/cpu_matmul.h"
#include "lowered/cpu_pointwise.h"
#include "lowered/cpu_rnn.h"
#include "lowered/op_common.h"

namespace qflow::lowered {
namespace {

using detail::element_count;
using detail::Shape;
using detail::shape_string;

struct Ctx {
  const Model& model;
  const Op& op;
  const std::vector<const Value*>& ins;
  const std::vector<Value*>& outs;

  const Value* in(size_t i) const { return i < ins.size() ? ins[i] : nullptr; }
  Value& out(size_t i = 0) const { return *outs[i]; }
  const Attribute* attr(std::string_view name) const { return detail::find_attribute(op, name); }
  int64_t i(std::string_view name, int64_t fallback) const { return detail::int_or(op, name, fallback); }
  double f(std::string_view name, double fallback) const { return detail::float_or(op, name, fallback); }
  std::string s(std::string_view name, std::string fallback) const { return detail::string_or(op, name, std::move(fallback)); }
  std::vector<int64_t> ints(std::string_view name, std::vector<int64_t> fallback) const {
    return detail::ints_or(op, name, std::move(fallback));
  }
};

Status err(std::string message) { return invalid_input(std::move(message)); }

Status shape_mismatch(const Shape& produced, const Shape& declared) {
  return err("produces shape " + shape_string(produced) + " but its output tensor declares " + shape_string(declared));
}

// Input / output counts, the first input present, the outputs present.
Status arity(const Ctx& c, size_t min_in, size_t max_in, size_t min_out = 1, size_t max_out = 1) {
  if (c.ins.size() < min_in || c.ins.size() > max_in)
    return err("has " + std::to_string(c.ins.size()) + " inputs, expected " + std::to_string(min_in) +
               (min_in == max_in ? std::string() : " to " + std::to_string(max_in)));
  if (c.outs.size() < min_out || c.outs.size() > max_out)
    return err("has " + std::to_string(c.outs.size()) + " outputs, expected " + std::to_string(min_out) +
               (min_out == max_out ? std::string() : " to " + std::to_string(max_out)));
  if (min_in > 0 && !c.in(0)) return err("input 0 is required");
  for (size_t k = 1; k < min_in; ++k)
    if (!c.in(k)) return err("input " + std::to_string(k) + " is required");
  return Status::ok();
}

Status need_f32(const Value* v, const char* what) {
  if (!v || v->type != ElemType::f32) return err(std::string(what) + " must be an f32 tensor");
  return Status::ok();
}

Status need_i64(const Value* v, const char* what) {
  if (!v || v->type != ElemType::i64) return err(std::string(what) + " must be an i64 tensor");
  return Status::ok();
}

// Axis in [-rank, rank) to [0, rank); -1 when out of range.
int64_t norm_axis(int64_t axis, size_t rank) {
  const auto r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) return -1;
  return axis < 0 ? axis + r : axis;
}

// An ONNX list parameter given as an attribute (older opsets) or as an i64 input (newer).
bool list_param(const Ctx& c, size_t input, std::string_view attr, std::vector<int64_t>& out) {
  if (const Value* v = c.in(input); v && v->type == ElemType::i64) {
    out = v->longs;
    return true;
  }
  if (const Attribute* a = c.attr(attr)) {
    out = a->ints;
    return true;
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// Elementwise

template <typename F>
Status unary(const Ctx& c, F f) {
  if (Status s = arity(c, 1, 1); !s) return s;
  if (Status s = need_f32(c.in(0), "input"); !s) return s;
  if (Status s = need_f32(&c.out(), "output"); !s) return s;
  if (c.in(0)->shape != c.out().shape) return shape_mismatch(c.in(0)->shape, c.out().shape);
  const std::vector<float>& x = c.in(0)->floats;
  std::vector<float>& y = c.out().floats;
  for (size_t k = 0; k < x.size(); ++k) y[k] = f(x[k]);
  return Status::ok();
}

Status op_relu(const Ctx& c) {
  return unary(c, [](float x) { return x > 0.0f ? x : 0.0f; });
}
Status op_sigmoid(const Ctx& c) {
  return unary(c, [](float x) { return static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(x)))); });
}
Status op_tanh(const Ctx& c) {
  return unary(c, [](float x) { return std::tanh(x); });
}
Status op_hard_sigmoid(const Ctx& c) {
  const auto alpha = static_cast<float>(c.f("alpha", 0.2)), beta = static_cast<float>(c.f("beta", 0.5));
  return unary(c, [=](float x) { return std::clamp(alpha * x + beta, 0.0f, 1.0f); });
}
Status op_hard_swish(const Ctx& c) {
  return unary(c, [](float x) { return x * std::clamp(x / 6.0f + 0.5f, 0.0f, 1.0f); });
}
Status op_leaky_relu(const Ctx& c) {
  const auto alpha = static_cast<float>(c.f("alpha", 0.01));
  return unary(c, [=](float x) { return x >= 0.0f ? x : alpha * x; });
}
Status op_sqrt(const Ctx& c) {
  return unary(c, [](float x) { return std::sqrt(x); });
}
Status op_exp(const Ctx& c) {
  return unary(c, [](float x) { return std::exp(x); });
}
Status op_erf(const Ctx& c) {
  return unary(c, [](float x) { return std::erf(x); });
}
Status op_abs(const Ctx& c) {
  return unary(c, [](float x) { return std::fabs(x); });
}
Status op_neg(const Ctx& c) {
  return unary(c, [](float x) { return -x; });
}
Status op_log(const Ctx& c) {
  return unary(c, [](float x) { return std::log(x); });
}
Status op_reciprocal(const Ctx& c) {
  return unary(c, [](float x) { return 1.0f / x; });
}
Status op_floor(const Ctx& c) {
  return unary(c, [](float x) { return std::floor(x); });
}
Status op_ceil(const Ctx& c) {
  return unary(c, [](float x) { return std::ceil(x); });
}
Status op_elu(const Ctx& c) {
  const double alpha = c.f("alpha", 1.0);
  return unary(c, [=](float x) { return x >= 0.0f ? x : static_cast<float>(alpha * std::expm1(static_cast<double>(x))); });
}
Status op_selu(const Ctx& c) {
  const double alpha = c.f("alpha", 1.67326319217681884765625), gamma = c.f("gamma", 1.05070102214813232421875);
  return unary(c, [=](float x) {
    const double v = x;
    return static_cast<float>(gamma * (v > 0.0 ? v : alpha * std::expm1(v)));
  });
}
Status op_softplus(const Ctx& c) {
  return unary(c, [](float x) {
    const double v = x;
    return static_cast<float>(v > 0.0 ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v)));
  });
}
Status op_gelu(const Ctx& c) {
  const std::string approximate = c.s("approximate", "none");
  if (approximate != "none" && approximate != "tanh") return err("approximate '" + approximate + "' is not none or tanh");
  if (approximate == "tanh")
    return unary(c, [](float x) {
      const double v = x;
      return static_cast<float>(0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))));
    });
  return unary(c, [](float x) {
    const double v = x;
    return static_cast<float>(0.5 * v * (1.0 + std::erf(v * 0.7071067811865476)));
  });
}

// Dropout at inference: the identity (the mask output is not supported).
Status op_dropout(const Ctx& c) {
  if (c.outs.size() != 1) return err("the mask output is not supported");
  return unary(Ctx{c.model, c.op, std::vector<const Value*>{c.in(0)}, c.outs}, [](float x) { return x; });
}

Status op_clip(const Ctx& c) {
  if (Status s = arity(c, 1, 3); !s) return s;
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
  for (size_t k : {size_t{1}, size_t{2}}) {
    const Value* v = c.in(k);
    if (!v) continue;
    if (v->type != ElemType::f32 || v->floats.size() != 1) return err("min and max must be f32 scalars");
    (k == 1 ? lo : hi) = v->floats[0];
  }
  if (c.ins.size() == 1) {
    lo = static_cast<float>(c.f("min", lo));
    hi = static_cast<float>(c.f("max", hi));
  }
  return unary(Ctx{c.model, c.op, std::vector<const Value*>{c.in(0)}, c.outs}, [=](float x) {
    return std::isnan(x) ? x : std::min(std::max(x, lo), hi);
  });
}

template <typename T, typename F>
void binary_loop(const Ctx& c, const std::vector<T>& a, const std::vector<T>& b, std::vector<T>& y, F f) {
  const Shape& ys = c.out().shape;
  std::vector<T> ea, eb;
  const T* pa = a.data();
  const T* pb = b.data();
  if (c.in(0)->shape != ys) {
    ea.resize(y.size());
    detail::broadcast_to(a.data(), c.in(0)->shape, ys, ea.data());
    pa = ea.data();
  }
  if (c.in(1)->shape != ys) {
    eb.resize(y.size());
    detail::broadcast_to(b.data(), c.in(1)->shape, ys, eb.data());
    pb = eb.data();
  }
  for (size_t k = 0; k < y.size(); ++k) y[k] = f(pa[k], pb[k]);
}

enum class Arith { Add, Sub, Mul, Div, Pow };

Status binary(const Ctx& c, Arith kind) {
  if (Status s = arity(c, 2, 2); !s) return s;
  const Value& a = *c.in(0);
  const Value& b = *c.in(1);
  Shape shape;
  if (!detail::broadcast_shape(a.shape, b.shape, shape))
    return err("shapes " + shape_string(a.shape) + " and " + shape_string(b.shape) + " do not broadcast");
  if (shape != c.out().shape) return shape_mismatch(shape, c.out().shape);
  if (kind == Arith::Pow) {
    if (a.type != ElemType::f32 || c.out().type != ElemType::f32) return err("Pow takes and gives f32");
    std::vector<float> exponent = b.floats;
    if (b.type == ElemType::i64) {
      exponent.resize(b.longs.size());
      for (size_t k = 0; k < b.longs.size(); ++k) exponent[k] = static_cast<float>(b.longs[k]);
    }
    binary_loop<float>(c, a.floats, exponent, c.out().floats, [](float x, float e) {
      return e == 2.0f ? x * x : std::pow(x, e);
    });
    return Status::ok();
  }
  if (a.type != b.type || a.type != c.out().type || (a.type != ElemType::f32 && a.type != ElemType::i64))
    return err("operands and output must all be f32 or all i64");
  if (a.type == ElemType::f32) {
    std::vector<float>& y = c.out().floats;
    switch (kind) {
      case Arith::Add: binary_loop<float>(c, a.floats, b.floats, y, [](float x, float z) { return x + z; }); break;
      case Arith::Sub: binary_loop<float>(c, a.floats, b.floats, y, [](float x, float z) { return x - z; }); break;
      case Arith::Mul: binary_loop<float>(c, a.floats, b.floats, y, [](float x, float z) { return x * z; }); break;
      default: binary_loop<float>(c, a.floats, b.floats, y, [](float x, float z) { return x / z; }); break;
    }
    return Status::ok();
  }
  if (kind == Arith::Div)
    for (const int64_t z : b.longs)
      if (z == 0) return err("integer division by zero");
  std::vector<int64_t>& y = c.out().longs;
  // Wrapping arithmetic in unsigned avoids undefined behaviour on overflow.
  using U = uint64_t;
  switch (kind) {
    case Arith::Add: binary_loop<int64_t>(c, a.longs, b.longs, y, [](int64_t x, int64_t z) { return static_cast<int64_t>(U(x) + U(z)); }); break;
    case Arith::Sub: binary_loop<int64_t>(c, a.longs, b.longs, y, [](int64_t x, int64_t z) { return static_cast<int64_t>(U(x) - U(z)); }); break;
    case Arith::Mul: binary_loop<int64_t>(c, a.longs, b.longs, y, [](int64_t x, int64_t z) { return static_cast<int64_t>(U(x) * U(z)); }); break;
    default:
      binary_loop<int64_t>(c, a.longs, b.longs, y, [](int64_t x, int64_t z) {
        return (z == -1) ? static_cast<int64_t>(U(0) - U(x)) : x / z;
      });
      break;
  }
  return Status::ok();
}

Status op_add(const Ctx& c) { return binary(c, Arith::Add); }
Status op_sub(const Ctx& c) { return binary(c, Arith::Sub); }
Status op_mul(const Ctx& c) { return binary(c, Arith::Mul); }
Status op_div(const Ctx& c) { return binary(c, Arith::Div); }
Status op_pow(const Ctx& c) { return binary(c, Arith::Pow); }

Status op_prelu(const Ctx& c) {
  if (Status s = arity(c, 2, 2); !s) return s;
  if (Status s = need_f32(c.in(1), "slope"); !s) return s;
  const Shape& xs = c.in(0)->shape;
  Shape shape;
  if (!detail::broadcast_shape(xs, c.in(1)->shape, shape) || shape != xs)
    return err("slope " + shape_string(c.in(1)->shape) + " does not broadcast to X " + shape_string(xs));
  if (xs != c.out().shape) return shape_mismatch(xs, c.out().shape);
  binary_loop<float>(c, c.in(0)->floats, c.in(1)->floats, c.out().floats, [](float x, float a) { return x < 0.0f ? a * x : x; });
  return Status::ok();
}

// Max / Min: elementwise over any number of f32 inputs with numpy broadcasting.
Status variadic_extreme(const Ctx& c, bool max) {
  if (Status s = arity(c, 1, c.ins.size()); !s) return s;
  Shape shape;
  for (size_t k = 0; k < c.ins.size(); ++k) {
    if (Status s = need_f32(c.in(k), "inputs"); !s) return s;
    if (k == 0) shape = c.in(0)->shape;
    else if (!detail::broadcast_shape(shape, c.in(k)->shape, shape)) return err("the inputs' shapes do not broadcast");
  }
  if (shape != c.out().shape) return shape_mismatch(shape, c.out().shape);
  std::vector<float>& y = c.out().floats;
  std::vector<float> e(y.size());
  for (size_t k = 0; k < c.ins.size(); ++k) {
    detail::broadcast_to(c.in(k)->floats.data(), c.in(k)->shape, shape, e.data());
    if (k == 0) y = e;
    else
      for (size_t i = 0; i < y.size(); ++i)
        if (std::isnan(e[i]) || (max ? e[i] > y[i] : e[i] < y[i])) y[i] = e[i];
  }
  return Status::ok();
}
Status op_max(const Ctx& c) { return variadic_extreme(c, true); }
Status op_min(const Ctx& c) { return variadic_extreme(c, false); }

// ---------------------------------------------------------------------------------------------
// Normalization

// [outer, axis, inner] view of a shape around `axis`.
void split_at(const Shape& s, size_t axis, int64_t& outer, int64_t& mid, int64_t& inner) {
  outer = element_count(Shape(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(axis)));
  mid = s[axis];
  inner = element_count(Shape(s.begin() + static_cast<std::ptrdiff_t>(axis) + 1, s.end()));
}

Status op_softmax(const Ctx& c) {
  if (Status s = arity(c, 1, 1); !s) return s;
  if (Status s = need_f32(c.in(0), "input"); !s) return s;
  const Shape& xs = c.in(0)->shape;
  if (xs != c.out().shape) return shape_mismatch(xs, c.out().shape);
  if (xs.empty()) {
    c.out().floats.assign(1, 1.0f);
    return Status::ok();
  }
  const int64_t axis = norm_axis(c.i("axis", -1), xs.size());
  if (axis < 0) return err("axis out of range");
  int64_t outer, mid, inner;
  split_at(xs, static_cast<size_t>(axis), outer, mid, inner);
  const float* x = c.in(0)->floats.data();
  float* y = c.out().floats.data();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * mid * inner + i;
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t k = 0; k < mid; ++k) mx = std::max(mx, x[base + k * inner]);
      double sum = 0.0;
      for (int64_t k = 0; k < mid; ++k) {
        const float e = std::exp(x[base + k * inner] - mx);
        y[base + k * inner] = e;
        sum += e;
      }
      for (int64_t k = 0; k < mid; ++k) y[base + k * inner] = static_cast<float>(y[base + k * inner] / sum);
    }
  return Status::ok();
}

Status op_layer_normalization(const Ctx& c) {
  if (Status s = arity(c, 2, 3, 1, 3); !s) return s;
  if (Status s = need_f32(c.in(0), "X"); !s) return s;
  if (Status s = need_f32(c.in(1), "Scale"); !s) return s;
  const Shape& xs = c.in(0)->shape;
  if (xs != c.out().shape) return shape_mismatch(xs, c.out().shape);
  const int64_t axis = norm_axis(c.i("axis", -1), xs.size());
  if (axis < 0) return err("axis out of range");
  const auto epsilon = c.f("epsilon", 1e-5);
  const Shape inner_shape(xs.begin() + axis, xs.end());
  const int64_t outer = element_count(Shape(xs.begin(), xs.begin() + axis)), inner = element_count(inner_shape);
  std::vector<float> scale(static_cast<size_t>(inner)), bias(static_cast<size_t>(inner), 0.0f);
  Shape tmp;
  if (!detail::broadcast_shape(c.in(1)->shape, inner_shape, tmp) || tmp != inner_shape)
    return err("Scale " + shape_string(c.in(1)->shape) + " does not broadcast to " + shape_string(inner_shape));
  detail::broadcast_to(c.in(1)->floats.data(), c.in(1)->shape, inner_shape, scale.data());
  if (const Value* b = c.in(2)) {
    if (Status s = need_f32(b, "B"); !s) return s;
    if (!detail::broadcast_shape(b->shape, inner_shape, tmp) || tmp != inner_shape)
      return err("B " + shape_string(b->shape) + " does not broadcast to " + shape_string(inner_shape));
    detail::broadcast_to(b->floats.data(), b->shape, inner_shape, bias.data());
  }
  Shape stat_shape(xs.begin(), xs.begin() + axis);
  stat_shape.resize(xs.size(), 1);
  for (size_t k = 1; k < c.outs.size(); ++k)
    if (c.outs[k] && c.outs[k]->shape != stat_shape) return shape_mismatch(stat_shape, c.outs[k]->shape);
  const float* x = c.in(0)->floats.data();
  float* y = c.out().floats.data();
  for (int64_t o = 0; o < outer; ++o) {
    const float* row = x + o * inner;
    double mean = 0.0;
    for (int64_t k = 0; k < inner; ++k) mean += row[k];
    mean /= static_cast<double>(inner);
    double var = 0.0;
    for (int64_t k = 0; k < inner; ++k) var += (row[k] - mean) * (row[k] - mean);
    var /= static_cast<double>(inner);
    const double inv = 1.0 / std::sqrt(var + epsilon);
    for (int64_t k = 0; k < inner; ++k)
      y[o * inner + k] = static_cast<float>((row[k] - mean) * inv * scale[static_cast<size_t>(k)] + bias[static_cast<size_t>(k)]);
    if (c.outs.size() > 1 && c.outs[1]) c.outs[1]->floats[static_cast<size_t>(o)] = static_cast<float>(mean);
    if (c.outs.size() > 2 && c.outs[2]) c.outs[2]->floats[static_cast<size_t>(o)] = static_cast<float>(inv);
  }
  return Status::ok();
}

enum class Reduce { Mean, Sum, Max, Min };

Status reduce(const Ctx& c, Reduce kind) {
  if (Status s = arity(c, 1, 2); !s) return s;
  if (Status s = need_f32(c.in(0), "input"); !s) return s;
  const Shape& xs = c.in(0)->shape;
  std::vector<int64_t> axes;
  list_param(c, 1, "axes", axes);
  const bool keepdims = c.i("keepdims", 1) != 0;
  if (axes.empty() && c.i("noop_with_empty_axes", 0) != 0) {
    if (xs != c.out().shape) return shape_mismatch(xs, c.out().shape);
    c.out().floats = c.in(0)->floats;
    return Status::ok();
  }
  std::vector<char> reduced(xs.size(), axes.empty() ? 1 : 0);
  for (const int64_t a : axes) {
    const int64_t n = norm_axis(a, xs.size());
    if (n < 0) return err("axis " + std::to_string(a) + " out of range");
    reduced[static_cast<size_t>(n)] = 1;
  }
  Shape kept, produced;
  for (size_t k = 0; k < xs.size(); ++k) {
    kept.push_back(reduced[k] ? 1 : xs[k]);
    if (!reduced[k] || keepdims) produced.push_back(reduced[k] ? 1 : xs[k]);
  }
  if (produced != c.out().shape) return shape_mismatch(produced, c.out().shape);
  // Sum every input element into its output slot: output strides, 0 on reduced axes.
  std::vector<int64_t> kept_strides = detail::strides_of(kept);
  for (size_t k = 0; k < xs.size(); ++k)
    if (reduced[k]) kept_strides[k] = 0;
  const double init = kind == Reduce::Max   ? -std::numeric_limits<double>::infinity()
                      : kind == Reduce::Min ? std::numeric_limits<double>::infinity()
                                            : 0.0;
  std::vector<double> sum(c.out().floats.size(), init);
  const std::vector<float>& x = c.in(0)->floats;
  std::vector<int64_t> index(xs.size(), 0);
  int64_t offset = 0;
  for (size_t k = 0; k < x.size(); ++k) {
    double& acc = sum[static_cast<size_t>(offset)];
    const double v = x[k];
    if (kind == Reduce::Max) acc = (v > acc || std::isnan(v)) ? v : acc;
    else if (kind == Reduce::Min) acc = (v < acc || std::isnan(v)) ? v : acc;
    else acc += v;
    for (size_t a = xs.size(); a-- > 0;) {
      ++index[a];
      offset += kept_strides[a];
      if (index[a] < xs[a]) break;
      offset -= kept_strides[a] * xs[a];
      index[a] = 0;
    }
  }
  const int64_t total = element_count(xs), outs = static_cast<int64_t>(sum.size());
  const double count =
      kind == Reduce::Mean && outs > 0 ? static_cast<double>(total) / static_cast<double>(outs) : 1.0;
  for (size_t k = 0; k < sum.size(); ++k) c.out().floats[k] = static_cast<float>(sum[k] / count);
  return Status::ok();
}

Status op_reduce_mean(const Ctx& c) { return reduce(c, Reduce::Mean); }
Status op_reduce_sum(const Ctx& c) { return reduce(c, Reduce::Sum); }
Status op_reduce_max(const Ctx& c) { return reduce(c, Reduce::Max); }
Status op_reduce_min(const Ctx& c) { return reduce(c, Reduce::Min); }

Status op_batch_normalization(const Ctx& c) {
  if (Status s = arity(c, 5, 5); !s) return s;
  for (size_t k = 0; k < 5; ++k)
    if (Status s = need_f32(c.in(k), "BatchNormalization operands"); !s) return s;
  const Shape& xs = c.in(0)->shape;
  if (xs.size() < 2) return err("X must have N and C dimensions");
  if (xs != c.out().shape) return shape_mismatch(xs, c.out().shape);
  const int64_t ch = xs[1], inner = element_count(Shape(xs.begin() + 2, xs.end())), n = xs[0];
  for (size_t k = 1; k < 5; ++k)
    if (static_cast<int64_t>(c.in(k)->floats.size()) != ch) return err("scale, B, mean and var must have C values");
  const double epsilon = c.f("epsilon", 1e-5);
  const float* x = c.in(0)->floats.data();
  float* y = c.out().floats.data();
  for (int64_t j = 0; j < ch; ++j) {
    const auto u = static_cast<size_t>(j);
    const double a = c.in(1)->floats[u] / std::sqrt(static_cast<double>(c.in(4)->floats[u]) + epsilon);
    const double b = c.in(2)->floats[u] - a * c.in(3)->floats[u];
    for (int64_t b0 = 0; b0 < n; ++b0) {
      const int64_t base = (b0 * ch + j) * inner;
      for (int64_t k = 0; k < inner; ++k) y[base + k] = static_cast<float>(a * x[base + k] + b);
    }
  }
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------
// Shape and data movement

// Flatten, Reshape, Squeeze, Unsqueeze, Identity: the data unchanged under the declared shape.
Status op_copy(const Ctx& c) {
  if (Status s = arity(c, 1, 2); !s) return s;
  const Value& x = *c.in(0);
  if (x.type != c.out().type) return err("input and output types differ");
  if (element_count(x.shape) != element_count(c.out().shape))
    return err("input shape " + shape_string(x.shape) + " and output shape " + shape_string(c.out().shape) +
               " differ in element count");
  c.out().floats = x.floats;
  c.out().longs = x.longs;
  c.out().ints = x.ints;
  return Status::ok();
}

Status op_identity(const Ctx& c) {
  if (Status s = arity(c, 1, 1); !s) return s;
  if (c.in(0)->shape != c.out().shape) return shape_mismatch(c.in(0)->shape, c.out().shape);
  return op_copy(c);
}

Status op_shape(const Ctx& c) {
  if (Status s = arity(c, 1, 1); !s) return s;
  if (c.out().type != ElemType::i64) return err("the output must be i64");
  const Shape& xs = c.in(0)->shape;
  const auto rank = static_cast<int64_t>(xs.size());
  int64_t start = c.i("start", 0), end = c.i("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  const Shape produced{std::max<int64_t>(0, end - start)};
  if (produced != c.out().shape) return shape_mismatch(produced, c.out().shape);
  for (int64_t k = start; k < end; ++k) c.out().longs[static_cast<size_t>(k - start)] = xs[static_cast<size_t>(k)];
  return Status::ok();
}

// Expand: numpy broadcasting of the input to the declared output shape.
Status op_expand(const Ctx& c) {
  if (Status s = arity(c, 1, 2); !s) return s;
  const Value& x = *c.in(0);
  if (x.type != c.out().type) return err("input and output types differ");
  Shape shape;
  if (const Value* sv = c.in(1); sv && sv->type == ElemType::i64) {
    if (!detail::broadcast_shape(x.shape, sv->longs, shape)) return err("the shape does not broadcast with the input");
  } else {
    shape = c.out().shape;
  }
  Shape check;
  if (!detail::broadcast_shape(x.shape, shape, check) || check != c.out().shape) return shape_mismatch(check, c.out().shape);
  if (x.type == ElemType::f32) detail::broadcast_to(x.floats.data(), x.shape, check, c.out().floats.data());
  else detail::broadcast_to(x.longs.data(), x.shape, check, c.out().longs.data());
  return Status::ok();
}

Status op_tile(const Ctx& c) {
  if (Status s = arity(c, 2, 2); !s) return s;
  if (Status s = need_i64(c.in(1), "repeats"); !s) return s;
  const Value& x = *c.in(0);
  if (x.type != c.out().type) return err("input and output types differ");
  const std::vector<int64_t>& reps = c.in(1)->longs;
  if (reps.size() != x.shape.size()) return err("repeats must have one value per axis");
  Shape produced(x.shape.size());
  for (size_t k = 0; k < reps.size(); ++k) {
    if (reps[k] < 0) return err("repeats must be non-negative");
    produced[k] = x.shape[k] * reps[k];
  }
  if (produced != c.out().shape) return shape_mismatch(produced, c.out().shape);
  const int64_t total = element_count(produced);
  const std::vector<int64_t> in_strides = detail::strides_of(x.shape);
  std::vector<int64_t> index(produced.size(), 0);
  for (int64_t o = 0; o < total; ++o) {
    int64_t src = 0;
    for (size_t k = 0; k < index.size(); ++k) src += (index[k] % x.shape[k]) * in_strides[k];
    if (x.type == ElemType::f32) c.out().floats[static_cast<size_t>(o)] = x.floats[static_cast<size_t>(src)];
    else c.out().longs[static_cast<size_t>(o)] = x.longs[static_cast<size_t>(src)];
    for (size_t a = index.size(); a-- > 0;) {
      if (++index[a] < produced[a]) break;
      index[a] = 0;
    }
  }
  return Status::ok();
}

Status op_transpose(const Ctx& c) {
  if (Status s = arity(c, 1, 1); !s) return s;
  const Value& x = *c.in(0);
  if (x.type != c.out().type) return err("input and output types differ");
  std::vector<int64_t> perm(x.shape.size());
  for (size_t k = 0; k < perm.size(); ++k) perm[k] = static_cast<int64_t>(perm.size() - 1 - k);
  perm = c.ints("perm", perm);
  Shape produced;
  if (!detail::transpose_shape(x.shape, perm, produced)) return err("perm is not a permutation of the input's axes");
  if (produced != c.out().shape) return shape_mismatch(produced, c.out().shape);
  if (x.type == ElemType::f32) detail::transpose(x.floats.data(), x.shape, perm, c.out().floats.data());
  else detail::transpose(x.longs.data(), x.shape, perm, c.out().longs.data());
  return Status::ok();
}

Status op_concat(const Ctx& c) {
  if (Status s = arity(c, 1, c.ins.size()); !s) return s;
  const Shape& ys = c.out().shape;
  const int64_t axis = norm_axis(c.i("axis", 0), ys.size());
  if (axis < 0) return err("axis out of range");
  const auto ax = static_cast<size_t>(axis);
  Shape produced;
  for (size_t k = 0; k < c.ins.size(); ++k) {
    const Value* v = c.in(k);
    if (!v) return err("input " + std::to_string(k) + " is required");
    if (v->type != c.out().type) return err("input and output types differ");
    if (v->shape.size() != ys.size()) return err("input " + std::to_string(k) + " has the wrong rank");
    if (k == 0) produced = v->shape;
    else {
      for (size_t d = 0; d < ys.size(); ++d)
        if (d != ax && v->shape[d] != produced[d]) return err("input shapes differ outside the axis");
      produced[ax] += v->shape[ax];
    }
  }
  if (produced != ys) return shape_mismatch(produced, ys);
  int64_t outer, mid, inner;
  split_at(ys, ax, outer, mid, inner);
  int64_t offset = 0;
  for (const Value* v : c.ins) {
    const int64_t block = v->shape[ax] * inner;
    for (int64_t o = 0; o < outer; ++o) {
      const auto src = static_cast<size_t>(o * block), dst = static_cast<size_t>((o * mid + offset) * inner);
      if (v->type == ElemType::f32) std::copy_n(v->floats.begin() + static_cast<std::ptrdiff_t>(src), block, c.out().floats.begin() + static_cast<std::ptrdiff_t>(dst));
      else std::copy_n(v->longs.begin() + static_cast<std::ptrdiff_t>(src), block, c.out().longs.begin() + static_cast<std::ptrdiff_t>(dst));
    }
    offset += v->shape[ax];
  }
  return Status::ok();
}

Status op_split(const Ctx& c) {
  if (Status s = arity(c, 1, 2, 1, c.outs.size()); !s) return s;
  const Value& x = *c.in(0);
  const int64_t axis = norm_axis(c.i("axis", 0), x.shape.size());
  if (axis < 0) return err("axis out of range");
  const auto ax = static_cast<size_t>(axis);
  int64_t total = 0;
  for (size_t k = 0; k < c.outs.size(); ++k) {
    const Value& y = c.out(k);
    if (y.type != x.type) return err("input and output types differ");
    Shape expect = x.shape;
    if (y.shape.size() != expect.size()) return err("output " + std::to_string(k) + " has the wrong rank");
    expect[ax] = y.shape[ax];
    if (y.shape != expect) return shape_mismatch(expect, y.shape);
    total += y.shape[ax];
  }
  if (total != x.shape[ax])
    return err("the outputs' extents along axis " + std::to_string(axis) + " sum to " + std::to_string(total) +
               ", not " + std::to_string(x.shape[ax]));
  std::vector<int64_t> sizes;
  if (list_param(c, 1, "split", sizes))
    for (size_t k = 0; k < c.outs.size() && k < sizes.size(); ++k)
      if (sizes.size() != c.outs.size() || sizes[k] != c.out(k).shape[ax]) return err("split sizes do not match the output shapes");
  int64_t outer, mid, inner;
  split_at(x.shape, ax, outer, mid, inner);
  int64_t offset = 0;
  for (size_t k = 0; k < c.outs.size(); ++k) {
    Value& y = c.out(k);
    const int64_t block = y.shape[ax] * inner;
    for (int64_t o = 0; o < outer; ++o) {
      const auto src = static_cast<std::ptrdiff_t>((o * mid + offset) * inner), dst = static_cast<std::ptrdiff_t>(o * block);
      if (x.type == ElemType::f32) std::copy_n(x.floats.begin() + src, block, y.floats.begin() + dst);
      else std::copy_n(x.longs.begin() + src, block, y.longs.begin() + dst);
    }
    offset += y.shape[ax];
  }
  return Status::ok();
}

Status op_slice(const Ctx& c) {
  if (Status s = arity(c, 1, 5); !s) return s;
  const Value& x = *c.in(0);
  if (x.type != c.out().type) return err("input and output types differ");
  std::vector<int64_t> starts, ends, axes, steps;
  if (!list_param(c, 1, "starts", starts) || !list_param(c, 2, "ends", ends)) return err("missing starts or ends");
  if (!list_param(c, 3, "axes", axes))
    for (size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
  if (!list_param(c, 4, "steps", steps)) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return err("starts, ends, axes and steps differ in length");
  const Shape& xs = x.shape;
  Shape produced = xs;
  std::vector<int64_t> begin(xs.size(), 0), step(xs.size(), 1);
  std::vector<char> seen(xs.size(), 0);
  for (size_t k = 0; k < starts.size(); ++k) {
    const int64_t a = norm_axis(axes[k], xs.size());
    if (a < 0 || seen[static_cast<size_t>(a)]) return err("axis " + std::to_string(axes[k]) + " out of range or repeated");
    const auto ax = static_cast<size_t>(a);
    seen[ax] = 1;
    const int64_t dim = xs[ax], st = steps[k];
    if (st == 0) return err("steps must not be 0");
    int64_t s = starts[k], e = ends[k];
    if (s < 0) s = s < -dim ? -1 : s + dim;
    if (e < 0) e = e < -dim ? -1 : e + dim;
    int64_t count;
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      count = e > s ? (e - s - 1) / st + 1 : 0;
    } else {
      s = std::clamp<int64_t>(s, -1, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      count = s > e ? (s - e - 1) / -st + 1 : 0;
    }
    begin[ax] = count > 0 ? s : 0;
    step[ax] = st;
    produced[ax] = count;
  }
  if (produced != c.out().shape) return shape_mismatch(produced, c.out().shape);
  const std::vector<int64_t> in_strides = detail::strides_of(xs);
  int64_t base = 0;
  std::vector<int64_t> strides(xs.size());
  for (size_t k = 0; k < xs.size(); ++k) {
    base += begin[k] * in_strides[k];
    strides[k] = step[k] * in_strides[k];
  }
  if (x.type == ElemType::f32) detail::strided_gather(x.floats.data(), base, strides, produced, c.out().floats.data());
  else detail::strided_gather(x.longs.data(), base, strides, produced, c.out().longs.data());
  return Status::ok();
}

Status op_gather(const Ctx& c) {
  if (Status s = arity(c, 2, 2); !s) return s;
  const Value& x = *c.in(0);
  if (Status s = need_i64(c.in(1), "indices"); !s) return s;
  if (x.type != c.out().type) return err("data and output types differ");
  const int64_t axis = norm_axis(c.i("axis", 0), x.shape.size());
  if (axis < 0) return err("axis out of range");
  const auto ax = static_cast<size_t>(axis);
  const Value& idx = *c.in(1);
  Shape produced(x.shape.begin(), x.shape.begin() + axis);
  produced.insert(produced.end(), idx.shape.begin(), idx.shape.end());
  produced.insert(produced.end(), x.shape.begin() + axis + 1, x.shape.end());
  if (produced != c.out().shape) return shape_mismatch(produced, c.out().shape);
  int64_t outer, mid, inner;
  split_at(x.shape, ax, outer, mid, inner);
  const auto n = static_cast<int64_t>(idx.longs.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < n; ++k) {
      int64_t j = idx.longs[static_cast<size_t>(k)];
      if (j < -mid || j >= mid) return err("index " + std::to_string(j) + " is out of range for extent " + std::to_string(mid));
      if (j < 0) j += mid;
      const auto src = static_cast<std::ptrdiff_t>((o * mid + j) * inner), dst = static_cast<std::ptrdiff_t>((o * n + k) * inner);
      if (x.type == ElemType::f32) std::copy_n(x.floats.begin() + src, inner, c.out().floats.begin() + dst);
      else std::copy_n(x.longs.begin() + src, inner, c.out().longs.begin() + dst);
    }
  return Status::ok();
}

Status op_cast(const Ctx& c) {
  if (Status s = arity(c, 1, 1); !s) return s;
  const Value& x = *c.in(0);
  Value& y = c.out();
  const int64_t to = c.i("to", y.type == ElemType::f32 ? 1 : 7);
  if ((to == 1 && y.type != ElemType::f32) || (to == 7 && y.type != ElemType::i64) || (to != 1 && to != 7))
    return err("casts only to FLOAT (1) or INT64 (7) matching the output tensor, not " + std::to_string(to));
  if (x.shape != y.shape) return shape_mismatch(x.shape, y.shape);
  if (x.type == y.type) return op_copy(c);
  if (x.type == ElemType::f32) {
    for (size_t k = 0; k < x.floats.size(); ++k) {
      const float v = x.floats[k];
      // Truncation toward zero, saturating (NaN gives 0).
      y.longs[k] = std::isnan(v) ? 0
                   : v >= 9.2233720368547758e18f ? std::numeric_limits<int64_t>::max()
                   : v <= -9.2233720368547758e18f ? std::numeric_limits<int64_t>::min()
                                                  : static_cast<int64_t>(v);
    }
  } else {
    for (size_t k = 0; k < x.longs.size(); ++k) y.floats[k] = static_cast<float>(x.longs[k]);
  }
  return Status::ok();
}

Status op_pad(const Ctx& c) {
  if (Status s = arity(c, 1, 4); !s) return s;
  const Value& x = *c.in(0);
  if (x.type != c.out().type) return err("input and output types differ");
  const size_t rank = x.shape.size();
  std::vector<int64_t> pads;
  if (!list_param(c, 1, "pads", pads)) return err("missing pads");
  std::vector<int64_t> axes;
  if (!list_param(c, 3, "axes", axes))
    for (size_t k = 0; k < rank; ++k) axes.push_back(static_cast<int64_t>(k));
  if (pads.size() != 2 * axes.size()) return err("pads must have two entries per padded axis");
  std::vector<int64_t> before(rank, 0), after(rank, 0);
  for (size_t k = 0; k < axes.size(); ++k) {
    const int64_t a = norm_axis(axes[k], rank);
    if (a < 0) return err("axis out of range");
    before[static_cast<size_t>(a)] = pads[k];
    after[static_cast<size_t>(a)] = pads[k + axes.size()];
  }
  double value = c.f("value", 0.0);
  if (const Value* v = c.in(2)) {
    if (v->type == ElemType::f32 && !v->floats.empty()) value = v->floats[0];
    else if (v->type == ElemType::i64 && !v->longs.empty()) value = static_cast<double>(v->longs[0]);
  }
  const std::string mode = c.s("mode", "constant");
  if (mode != "constant" && mode != "edge" && mode != "reflect" && mode != "wrap") return err("unknown mode '" + mode + "'");
  Shape produced(rank);
  for (size_t k = 0; k < rank; ++k) produced[k] = x.shape[k] + before[k] + after[k];
  if (produced != c.out().shape) return shape_mismatch(produced, c.out().shape);
  if (element_count(produced) == 0) return Status::ok();
  if (element_count(x.shape) == 0 && mode != "constant") return err("cannot pad an empty tensor in mode " + mode);
  // Per axis: the source index of every output index, -1 for the constant.
  std::vector<std::vector<int64_t>> source(rank);
  for (size_t k = 0; k < rank; ++k) {
    const int64_t dim = x.shape[k];
    source[k].resize(static_cast<size_t>(produced[k]));
    for (int64_t o = 0; o < produced[k]; ++o) {
      int64_t i = o - before[k];
      if (i < 0 || i >= dim) {
        if (mode == "constant") i = -1;
        else if (mode == "edge") i = std::clamp<int64_t>(i, 0, dim - 1);
        else if (mode == "wrap") i = ((i % dim) + dim) % dim;
        else if (dim == 1) i = 0;
        else {
          const int64_t period = 2 * (dim - 1);
          i = ((i % period) + period) % period;
          if (i >= dim) i = period - i;
        }
      }
      source[k][static_cast<size_t>(o)] = i;
    }
  }
  const std::vector<int64_t> in_strides = detail::strides_of(x.shape);
  const int64_t total = element_count(produced);
  std::vector<int64_t> index(rank, 0);
  for (int64_t o = 0; o < total; ++o) {
    int64_t offset = 0;
    bool constant = false;
    for (size_t k = 0; k < rank; ++k) {
      const int64_t i = source[k][static_cast<size_t>(index[k])];
      if (i < 0) {
        constant = true;
        break;
      }
      offset += i * in_strides[k];
    }
    const auto oi = static_cast<size_t>(o);
    if (x.type == ElemType::f32) c.out().floats[oi] = constant ? static_cast<float>(value) : x.floats[static_cast<size_t>(offset)];
    else c.out().longs[oi] = constant ? static_cast<int64_t>(value) : x.longs[static_cast<size_t>(offset)];
    for (size_t a = rank; a-- > 0;) {
      if (++index[a] < produced[a]) break;
      index[a] = 0;
    }
  }
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------
// Linear algebra

Status op_gemm(const Ctx& c) {
  if (Status s = arity(c, 2, 3); !s) return s;
  for (size_t k = 0; k < c.ins.size(); ++k)
    if (c.in(k))
      if (Status s = need_f32(c.in(k), "Gemm operands"); !s) return s;
  const Value& a = *c.in(0);
  const Value& b = *c.in(1);
  if (a.shape.size() != 2 || b.shape.size() != 2) return err("A and B must be 2-D");
  const bool ta = c.i("transA", 0) != 0, tb = c.i("transB", 0) != 0;
  const double alpha = c.f("alpha", 1.0), beta = c.f("beta", 1.0);
  const int64_t m = ta ? a.shape[1] : a.shape[0], k = ta ? a.shape[0] : a.shape[1];
  const int64_t kb = tb ? b.shape[1] : b.shape[0], n = tb ? b.shape[0] : b.shape[1];
  if (k != kb) return err("A " + shape_string(a.shape) + " and B " + shape_string(b.shape) + " differ in K");
  const Shape produced{m, n};
  if (produced != c.out().shape) return shape_mismatch(produced, c.out().shape);
  std::vector<float> bias(static_cast<size_t>(m * n), 0.0f);
  if (const Value* cv = c.in(2)) {
    Shape tmp;
    if (!detail::broadcast_shape(cv->shape, produced, tmp) || tmp != produced)
      return err("C " + shape_string(cv->shape) + " does not broadcast to " + shape_string(produced));
    detail::broadcast_to(cv->floats.data(), cv->shape, produced, bias.data());
  }
  const float* pa = a.floats.data();
  const float* pb = b.floats.data();
  float* y = c.out().floats.data();
  std::vector<double> row(static_cast<size_t>(n));
  for (int64_t i = 0; i < m; ++i) {
    std::fill(row.begin(), row.end(), 0.0);
    for (int64_t p = 0; p < k; ++p) {
      const double av = ta ? pa[p * m + i] : pa[i * k + p];
      if (tb)
        for (int64_t j = 0; j < n; ++j) row[static_cast<size_t>(j)] += av * pb[j * k + p];
      else
        for (int64_t j = 0; j < n; ++j) row[static_cast<size_t>(j)] += av * pb[p * n + j];
    }
    for (int64_t j = 0; j < n; ++j)
      y[i * n + j] = static_cast<float>(alpha * row[static_cast<size_t>(j)] + beta * bias[static_cast<size_t>(i * n + j)]);
  }
  return Status::ok();
}

Status op_matmul(const Ctx& c) {
  if (Status s = arity(c, 2, 2); !s) return s;
  if (Status s = need_f32(c.in(0), "A"); !s) return s;
  if (Status s = need_f32(c.in(1), "B"); !s) return s;
  Shape as = c.in(0)->shape, bs = c.in(1)->shape;
  if (as.empty() || bs.empty()) return err("operands must have at least 1 dimension");
  const bool a_vec = as.size() == 1, b_vec = bs.size() == 1;
  if (a_vec) as.insert(as.begin(), 1);
  if (b_vec) bs.push_back(1);
  const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  if (bs[bs.size() - 2] != k) return err("A " + shape_string(c.in(0)->shape) + " and B " + shape_string(c.in(1)->shape) + " differ in K");
  const Shape la(as.begin(), as.end() - 2), lb(bs.begin(), bs.end() - 2);
  Shape lead;
  if (!detail::broadcast_shape(la, lb, lead)) return err("leading dimensions do not broadcast");
  Shape produced = lead;
  if (!a_vec) produced.push_back(m);
  if (!b_vec) produced.push_back(n);
  if (produced != c.out().shape) return shape_mismatch(produced, c.out().shape);
  const int64_t batches = element_count(lead);
  // Batch index -> A / B matrix index, by broadcasting the matrix numbers.
  std::vector<int64_t> ia(static_cast<size_t>(batches)), ib(static_cast<size_t>(batches));
  {
    std::vector<int64_t> na(static_cast<size_t>(element_count(la))), nb(static_cast<size_t>(element_count(lb)));
    std::iota(na.begin(), na.end(), 0);
    std::iota(nb.begin(), nb.end(), 0);
    detail::broadcast_to(na.data(), la, lead, ia.data());
    detail::broadcast_to(nb.data(), lb, lead, ib.data());
  }
  const float* pa = c.in(0)->floats.data();
  const float* pb = c.in(1)->floats.data();
  float* y = c.out().floats.data();
  for (int64_t t = 0; t < batches; ++t)
    detail::matmul_rows(pa + ia[static_cast<size_t>(t)] * m * k, pb + ib[static_cast<size_t>(t)] * k * n, y + t * m * n,
                        m, k, n);
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------
// Convolution and pooling (2-D, NCHW)

struct Geometry {
  int64_t kh = 1, kw = 1;
  std::array<int64_t, 2> strides{1, 1}, dilations{1, 1};
  std::array<int64_t, 4> pads{0, 0, 0, 0};  // top, left, bottom, right
};

// 1-D window ops run as 2-D ones with H = 1: [N, C, W] is laid out as [N, C, 1, W].
Shape as_2d(const Shape& s) { return s.size() == 3 ? Shape{s[0], s[1], 1, s[2]} : s; }
Shape as_declared(const Shape& s, bool one_d) { return one_d ? Shape{s[0], s[1], s[3]} : s; }
// A 1-D window attribute ([a] or [begin, end] for pads) as its 2-D form.
std::vector<int64_t> widen(const std::vector<int64_t>& v, bool one_d, bool pads, int64_t fill) {
  if (!one_d) return v;
  if (pads) return v.size() == 2 ? std::vector<int64_t>{0, v[0], 0, v[1]} : std::vector<int64_t>{};
  return v.size() == 1 ? std::vector<int64_t>{fill, v[0]} : std::vector<int64_t>{};
}

// Reads strides, dilations, pads and auto_pad of a 2-D (or 1-D) window op over input H, W.
Status read_geometry(const Ctx& c, int64_t h, int64_t w, Geometry& g, bool one_d, bool transposed = false) {
  const std::vector<int64_t> strides = widen(c.ints("strides", one_d ? std::vector<int64_t>{1} : std::vector<int64_t>{1, 1}), one_d, false, 1);
  const std::vector<int64_t> dilations = widen(c.ints("dilations", one_d ? std::vector<int64_t>{1} : std::vector<int64_t>{1, 1}), one_d, false, 1);
  const std::vector<int64_t> pads = widen(c.ints("pads", one_d ? std::vector<int64_t>{0, 0} : std::vector<int64_t>{0, 0, 0, 0}), one_d, true, 0);
  if (strides.size() != 2 || dilations.size() != 2 || pads.size() != 4)
    return err(one_d ? "1-D windows take strides[1], dilations[1], pads[2]" : "2-D windows take strides[2], dilations[2], pads[4]");
  for (int k = 0; k < 2; ++k) {
    g.strides[static_cast<size_t>(k)] = strides[static_cast<size_t>(k)];
    g.dilations[static_cast<size_t>(k)] = dilations[static_cast<size_t>(k)];
  }
  for (int k = 0; k < 4; ++k) g.pads[static_cast<size_t>(k)] = pads[static_cast<size_t>(k)];
  if (g.strides[0] < 1 || g.strides[1] < 1 || g.dilations[0] < 1 || g.dilations[1] < 1 || g.kh < 1 || g.kw < 1)
    return err("kernel, strides and dilations must be positive");
  const std::string auto_pad = c.s("auto_pad", "NOTSET");
  if (auto_pad == "VALID") g.pads = {0, 0, 0, 0};
  else if ((auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") && !transposed) {
    const std::array<int64_t, 2> in{h, w}, k{g.kh, g.kw};
    for (size_t a = 0; a < 2; ++a) {
      const int64_t out = (in[a] + g.strides[a] - 1) / g.strides[a];
      const int64_t total = std::max<int64_t>(0, (out - 1) * g.strides[a] + (k[a] - 1) * g.dilations[a] + 1 - in[a]);
      const int64_t small = total / 2, large = total - small;
      g.pads[a] = auto_pad == "SAME_UPPER" ? small : large;
      g.pads[a + 2] = auto_pad == "SAME_UPPER" ? large : small;
    }
  } else if (auto_pad != "NOTSET" && !transposed) {
    return err("auto_pad '" + auto_pad + "' is not supported");
  }
  for (const int64_t p : g.pads)
    if (p < 0) return err("pads must be non-negative");
  return Status::ok();
}

int64_t window_out(int64_t in, int64_t pad_sum, int64_t k, int64_t d, int64_t s, bool ceil_mode) {
  const int64_t span = in + pad_sum - ((k - 1) * d + 1);
  if (span < 0) return 0;
  return (ceil_mode ? (span + s - 1) / s : span / s) + 1;
}

Status op_conv(const Ctx& c) {
  if (Status s = arity(c, 2, 3); !s) return s;
  for (size_t k = 0; k < c.ins.size(); ++k)
    if (c.in(k))
      if (Status s = need_f32(c.in(k), "Conv operands"); !s) return s;
  const Value& x = *c.in(0);
  const Value& w = *c.in(1);
  if ((x.shape.size() != 3 && x.shape.size() != 4) || w.shape.size() != x.shape.size())
    return err("only 1-D and 2-D convolutions (3-D or 4-D X and W) are supported");
  const bool one_d = x.shape.size() == 3;
  const Shape xs = as_2d(x.shape), ws = as_2d(w.shape);
  const int64_t n = xs[0], ch = xs[1], h = xs[2], wd = xs[3];
  const int64_t m = ws[0], group = c.i("group", 1);
  Geometry g;
  g.kh = ws[2];
  g.kw = ws[3];
  if (Status s = read_geometry(c, h, wd, g, one_d); !s) return s;
  if (group < 1 || ch % group != 0 || m % group != 0 || ws[1] != ch / group)
    return err("W " + shape_string(w.shape) + " does not match " + std::to_string(ch) + " input channels in " +
               std::to_string(group) + " groups");
  const int64_t oh = window_out(h, g.pads[0] + g.pads[2], g.kh, g.dilations[0], g.strides[0], false);
  const int64_t ow = window_out(wd, g.pads[1] + g.pads[3], g.kw, g.dilations[1], g.strides[1], false);
  const Shape produced = as_declared(Shape{n, m, oh, ow}, one_d);
  if (produced != c.out().shape) return shape_mismatch(produced, c.out().shape);
  const Value* bias = c.in(2);
  if (bias && static_cast<int64_t>(bias->floats.size()) != m) return err("B must have one value per output channel");
  const int64_t cg = ch / group, mg = m / group;
  const float* px = x.floats.data();
  const float* pw = w.floats.data();
  float* y = c.out().floats.data();
  const float* pb = bias ? bias->floats.data() : nullptr;
  if (g.kh == 1 && g.kw == 1 && g.strides == std::array<int64_t, 2>{1, 1} && g.pads == std::array<int64_t, 4>{} &&
      group == 1) {
    for (int64_t b = 0; b < n; ++b) detail::pointwise_conv(pw, pb, px + b * ch * h * wd, y + b * m * oh * ow, m, ch, oh * ow);
    return Status::ok();
  }
  std::vector<float> plane(static_cast<size_t>(oh * ow));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < m; ++oc) {
      std::fill(plane.begin(), plane.end(), pb ? pb[oc] : 0.0f);
      const int64_t gi = oc / mg;
      for (int64_t ic = 0; ic < cg; ++ic) {
        const float* xin = px + ((b * ch + gi * cg + ic) * h) * wd;
        for (int64_t ky = 0; ky < g.kh; ++ky)
          for (int64_t kx = 0; kx < g.kw; ++kx) {
            const float wv = pw[((oc * cg + ic) * g.kh + ky) * g.kw + kx];
            // The output columns whose tap lands inside the row, so the inner loop has no test.
            const int64_t off = kx * g.dilations[1] - g.pads[1], s = g.strides[1];
            const int64_t ox0 = off >= 0 ? 0 : (-off + s - 1) / s;
            const int64_t ox1 = std::min(ow, wd - off <= 0 ? int64_t{0} : (wd - off + s - 1) / s);
            for (int64_t oy = 0; oy < oh; ++oy) {
              const int64_t iy = oy * g.strides[0] - g.pads[0] + ky * g.dilations[0];
              if (iy < 0 || iy >= h) continue;
              const float* xrow = xin + iy * wd;
              float* prow = plane.data() + oy * ow;
              if (s == 1)
                for (int64_t ox = ox0; ox < ox1; ++ox) prow[ox] += wv * xrow[ox + off];
              else
                for (int64_t ox = ox0; ox < ox1; ++ox) prow[ox] += wv * xrow[ox * s + off];
            }
          }
      }
      std::copy(plane.begin(), plane.end(), y + (b * m + oc) * oh * ow);
    }
  return Status::ok();
}

Status op_conv_transpose(const Ctx& c) {
  if (Status s = arity(c, 2, 3); !s) return s;
  for (size_t k = 0; k < c.ins.size(); ++k)
    if (c.in(k))
      if (Status s = need_f32(c.in(k), "ConvTranspose operands"); !s) return s;
  const Value& x = *c.in(0);
  const Value& w = *c.in(1);
  if ((x.shape.size() != 3 && x.shape.size() != 4) || w.shape.size() != x.shape.size())
    return err("only 1-D and 2-D transposed convolutions are supported");
  const bool one_d = x.shape.size() == 3;
  const Shape xs = as_2d(x.shape), ws = as_2d(w.shape);
  const int64_t n = xs[0], ch = xs[1], h = xs[2], wd = xs[3], group = c.i("group", 1);
  if (group < 1 || ws[0] != ch || ch % group != 0)
    return err("W " + shape_string(w.shape) + " does not match " + std::to_string(ch) + " input channels");
  const int64_t mg = ws[1], m = mg * group, cg = ch / group;
  Geometry g;
  g.kh = ws[2];
  g.kw = ws[3];
  if (Status s = read_geometry(c, h, wd, g, one_d, true); !s) return s;
  const std::vector<int64_t> op =
      widen(c.ints("output_padding", one_d ? std::vector<int64_t>{0} : std::vector<int64_t>{0, 0}), one_d, false, 0);
  if (op.size() != 2 || op[0] < 0 || op[1] < 0) return err("output_padding must be non-negative, one per spatial axis");
  if (c.out().shape.size() != x.shape.size()) return err("X and Y differ in rank");
  const Shape ys = as_2d(c.out().shape);
  if (ys[0] != n || ys[1] != m) return shape_mismatch(as_declared(Shape{n, m, ys[2], ys[3]}, one_d), c.out().shape);
  const std::string auto_pad = c.s("auto_pad", "NOTSET");
  const bool derive = c.attr("output_shape") || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  const std::array<int64_t, 2> in{h, wd}, k{g.kh, g.kw};
  std::array<int64_t, 2> begin{g.pads[0], g.pads[1]};
  for (size_t a = 0; a < 2; ++a) {
    const int64_t full = g.strides[a] * (in[a] - 1) + op[a] + (k[a] - 1) * g.dilations[a] + 1;
    if (derive) {
      const int64_t total = full - ys[a + 2];
      begin[a] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    } else if (full - g.pads[a] - g.pads[a + 2] != ys[a + 2]) {
      return shape_mismatch(as_declared(Shape{n, m,
                                              g.strides[0] * (h - 1) + op[0] + (g.kh - 1) * g.dilations[0] + 1 - g.pads[0] - g.pads[2],
                                              g.strides[1] * (wd - 1) + op[1] + (g.kw - 1) * g.dilations[1] + 1 - g.pads[1] - g.pads[3]},
                                        one_d),
                            c.out().shape);
    }
  }
  const Value* bias = c.in(2);
  if (bias && static_cast<int64_t>(bias->floats.size()) != m) return err("B must have one value per output channel");
  const int64_t oh = ys[2], ow = ys[3];
  const float* px = x.floats.data();
  const float* pw = w.floats.data();
  float* y = c.out().floats.data();
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < m; ++oc) {
      float* plane = y + (b * m + oc) * oh * ow;
      std::fill(plane, plane + oh * ow, bias ? bias->floats[static_cast<size_t>(oc)] : 0.0f);
      const int64_t gi = oc / mg, mo = oc % mg;
      for (int64_t ic = 0; ic < cg; ++ic) {
        const int64_t ci = gi * cg + ic;
        const float* xin = px + ((b * ch + ci) * h) * wd;
        for (int64_t ky = 0; ky < g.kh; ++ky)
          for (int64_t kx = 0; kx < g.kw; ++kx) {
            const float wv = pw[((ci * mg + mo) * g.kh + ky) * g.kw + kx];
            for (int64_t iy = 0; iy < h; ++iy) {
              const int64_t oy = iy * g.strides[0] - begin[0] + ky * g.dilations[0];
              if (oy < 0 || oy >= oh) continue;
              for (int64_t ix = 0; ix < wd; ++ix) {
                const int64_t ox = ix * g.strides[1] - begin[1] + kx * g.dilations[1];
                if (ox >= 0 && ox < ow) plane[oy * ow + ox] += wv * xin[iy * wd + ix];
              }
            }
          }
      }
    }
  return Status::ok();
}

Status pool(const Ctx& c, bool max) {
  if (Status s = arity(c, 1, 1); !s) return s;
  if (Status s = need_f32(c.in(0), "input"); !s) return s;
  const Value& x = *c.in(0);
  if (x.shape.size() != 3 && x.shape.size() != 4) return err("only 1-D and 2-D pooling (3-D or 4-D input) is supported");
  const bool one_d = x.shape.size() == 3;
  const std::vector<int64_t> kernel = widen(c.ints("kernel_shape", {}), one_d, false, 1);
  if (kernel.size() != 2) return err("kernel_shape must have one value per spatial axis");
  const Shape xs = as_2d(x.shape);
  const int64_t n = xs[0], ch = xs[1], h = xs[2], wd = xs[3];
  Geometry g;
  g.kh = kernel[0];
  g.kw = kernel[1];
  if (Status s = read_geometry(c, h, wd, g, one_d); !s) return s;
  if (!max && (g.dilations[0] != 1 || g.dilations[1] != 1)) return err("dilations are not supported");
  const bool ceil_mode = c.i("ceil_mode", 0) != 0;
  if (c.out().shape.size() != x.shape.size()) return err("X and Y differ in rank");
  const Shape ys = as_2d(c.out().shape);
  const int64_t oh = window_out(h, g.pads[0] + g.pads[2], g.kh, g.dilations[0], g.strides[0], false);
  const int64_t ow = window_out(wd, g.pads[1] + g.pads[3], g.kw, g.dilations[1], g.strides[1], false);
  const int64_t ch_h = window_out(h, g.pads[0] + g.pads[2], g.kh, g.dilations[0], g.strides[0], true);
  const int64_t ch_w = window_out(wd, g.pads[1] + g.pads[3], g.kw, g.dilations[1], g.strides[1], true);
  const bool ok = ys.size() == 4 && ys[0] == n && ys[1] == ch &&
                  ((ys[2] == oh && ys[3] == ow) || (ceil_mode && ys[2] >= oh && ys[2] <= ch_h && ys[3] >= ow && ys[3] <= ch_w));
  if (!ok) return shape_mismatch(as_declared(Shape{n, ch, ceil_mode ? ch_h : oh, ceil_mode ? ch_w : ow}, one_d), c.out().shape);
  const bool include_pad = c.i("count_include_pad", 0) != 0;
  const float* px = x.floats.data();
  float* y = c.out().floats.data();
  const int64_t out_h = ys[2], out_w = ys[3];
  for (int64_t plane = 0; plane < n * ch; ++plane) {
    const float* xin = px + plane * h * wd;
    for (int64_t oy = 0; oy < out_h; ++oy)
      for (int64_t ox = 0; ox < out_w; ++ox) {
        float best = -std::numeric_limits<float>::infinity();
        double sum = 0.0;
        int64_t count = 0;
        for (int64_t ky = 0; ky < g.kh; ++ky) {
          const int64_t iy = oy * g.strides[0] - g.pads[0] + ky * g.dilations[0];
          for (int64_t kx = 0; kx < g.kw; ++kx) {
            const int64_t ix = ox * g.strides[1] - g.pads[1] + kx * g.dilations[1];
            const bool inside = iy >= 0 && iy < h && ix >= 0 && ix < wd;
            if (inside) {
              const float v = xin[iy * wd + ix];
              best = std::max(best, v);
              sum += v;
              ++count;
            } else if (include_pad && iy >= -g.pads[0] && iy < h + g.pads[2] && ix >= -g.pads[1] && ix < wd + g.pads[3]) {
              ++count;
            }
          }
        }
        y[(plane * out_h + oy) * out_w + ox] = max ? best : (count ? static_cast<float>(sum / static_cast<double>(count)) : 0.0f);
      }
  }
  return Status::ok();
}

Status op_max_pool(const Ctx& c) {
  if (c.outs.size() != 1) return err("the Indices output is not supported");
  return pool(c, true);
}
Status op_average_pool(const Ctx& c) { return pool(c, false); }

Status op_global_average_pool(const Ctx& c) {
  if (Status s = arity(c, 1, 1); !s) return s;
  if (Status s = need_f32(c.in(0), "input"); !s) return s;
  const Shape& xs = c.in(0)->shape;
  if (xs.size() < 3) return err("input must have N, C and spatial dimensions");
  Shape produced{xs[0], xs[1]};
  produced.resize(xs.size(), 1);
  if (produced != c.out().shape) return shape_mismatch(produced, c.out().shape);
  const int64_t planes = xs[0] * xs[1], size = element_count(Shape(xs.begin() + 2, xs.end()));
  const float* x = c.in(0)->floats.data();
  for (int64_t p = 0; p < planes; ++p) {
    double sum = 0.0;
    for (int64_t k = 0; k < size; ++k) sum += x[p * size + k];
    c.out().floats[static_cast<size_t>(p)] = size ? static_cast<float>(sum / static_cast<double>(size)) : 0.0f;
  }
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------
// Resize

Status op_resize(const Ctx& c) {
  if (Status s = arity(c, 1, 4); !s) return s;
  if (Status s = need_f32(c.in(0), "X"); !s) return s;
  const Value& x = *c.in(0);
  const Shape& xs = x.shape;
  const Shape& ys = c.out().shape;
  if (ys.size() != xs.size()) return err("X and Y differ in rank");
  const bool opset10 = c.ins.size() == 2;
  const Value* scales_in = opset10 ? c.in(1) : c.in(2);
  std::vector<double> scales(xs.size());
  for (size_t a = 0; a < xs.size(); ++a)
    scales[a] = xs[a] > 0 ? static_cast<double>(ys[a]) / static_cast<double>(xs[a]) : 1.0;
  const bool have_sizes = c.in(3) && !c.in(3)->longs.empty();
  if (scales_in && scales_in->type == ElemType::f32 && !scales_in->floats.empty() && !have_sizes) {
    if (scales_in->floats.size() != xs.size()) return err("scales must have one value per axis");
    for (size_t a = 0; a < xs.size(); ++a) {
      scales[a] = scales_in->floats[a];
      if (!(scales[a] > 0.0)) return err("scales must be positive");
      if (static_cast<int64_t>(std::floor(static_cast<double>(xs[a]) * scales[a])) != ys[a])
        return err("scales give " + std::to_string(static_cast<int64_t>(std::floor(static_cast<double>(xs[a]) * scales[a]))) +
                   " on axis " + std::to_string(a) + " but the output declares " + std::to_string(ys[a]));
    }
  }
  const std::string mode = c.s("mode", "nearest");
  const std::string ctm = c.s("coordinate_transformation_mode", opset10 ? "asymmetric" : "half_pixel");
  const std::string nm = c.s("nearest_mode", "round_prefer_floor");
  if (mode != "nearest" && mode != "linear") return err("mode '" + mode + "' is not supported (nearest, linear)");
  if (ctm != "half_pixel" && ctm != "pytorch_half_pixel" && ctm != "align_corners" && ctm != "asymmetric" &&
      ctm != "tf_half_pixel_for_nn")
    return err("coordinate_transformation_mode '" + ctm + "' is not supported");
  if (nm != "round_prefer_floor" && nm != "round_prefer_ceil" && nm != "floor" && nm != "ceil")
    return err("nearest_mode '" + nm + "' is not supported");
  for (size_t a = 0; a < xs.size(); ++a)
    if ((xs[a] == 0) != (ys[a] == 0)) return err("cannot resize an empty axis to a non-empty one");
  if (element_count(ys) == 0) return Status::ok();

  auto source = [&](int64_t o, size_t a) {
    const double in = static_cast<double>(xs[a]), out = static_cast<double>(ys[a]), s = scales[a];
    const double xo = static_cast<double>(o);
    if (ctm == "half_pixel") return (xo + 0.5) / s - 0.5;
    if (ctm == "pytorch_half_pixel") return out > 1 ? (xo + 0.5) / s - 0.5 : 0.0;
    if (ctm == "align_corners") return out > 1 ? xo * (in - 1) / (out - 1) : 0.0;
    if (ctm == "tf_half_pixel_for_nn") return (xo + 0.5) / s;
    return xo / s;  // asymmetric
  };
  // One 1-D pass per resized axis.
  std::vector<float> cur = x.floats, next;
  Shape cur_shape = xs;
  for (size_t a = 0; a < xs.size(); ++a) {
    if (xs[a] == ys[a] && scales[a] == 1.0) continue;
    int64_t outer, mid, inner;
    split_at(cur_shape, a, outer, mid, inner);
    const int64_t out_len = ys[a];
    std::vector<int64_t> i0(static_cast<size_t>(out_len)), i1(static_cast<size_t>(out_len));
    std::vector<float> wt(static_cast<size_t>(out_len), 0.0f);
    for (int64_t o = 0; o < out_len; ++o) {
      const double pos = source(o, a);
      const auto u = static_cast<size_t>(o);
      if (mode == "nearest") {
        double r;
        if (nm == "floor") r = std::floor(pos);
        else if (nm == "ceil") r = std::ceil(pos);
        else if (nm == "round_prefer_ceil") r = std::floor(pos + 0.5);
        else r = std::ceil(pos - 0.5);
        i0[u] = i1[u] = static_cast<int64_t>(std::clamp(r, 0.0, static_cast<double>(mid - 1)));
      } else {
        const double p = std::clamp(pos, 0.0, static_cast<double>(mid - 1));
        i0[u] = static_cast<int64_t>(std::floor(p));
        i1[u] = std::min(i0[u] + 1, mid - 1);
        wt[u] = static_cast<float>(p - static_cast<double>(i0[u]));
      }
    }
    next.assign(static_cast<size_t>(outer * out_len * inner), 0.0f);
    for (int64_t ot = 0; ot < outer; ++ot)
      for (int64_t o = 0; o < out_len; ++o) {
        const auto u = static_cast<size_t>(o);
        const float* s0 = cur.data() + (ot * mid + i0[u]) * inner;
        const float* s1 = cur.data() + (ot * mid + i1[u]) * inner;
        float* d = next.data() + (ot * out_len + o) * inner;
        const float w1 = wt[u], w0 = 1.0f - w1;
        if (w1 == 0.0f) std::copy(s0, s0 + inner, d);
        else
          for (int64_t k = 0; k < inner; ++k) d[k] = w0 * s0[k] + w1 * s1[k];
      }
    cur.swap(next);
    cur_shape[a] = out_len;
  }
  c.out().floats = std::move(cur);
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------
// Recurrent (cpu_rnn.cpp)

Status op_lstm(const Ctx& c) { return detail::run_lstm(c.op, c.ins, c.outs); }

// ---------------------------------------------------------------------------------------------

using Kernel = Status (*)(const Ctx&);
struct Entry {
  std::string_view name;
  Kernel kernel;
  bool float_only;  // the first input and every output are f32 (checked before the kernel runs)
};

// Sorted by name.
constexpr std::array kKernels = {
    Entry{"Abs", op_abs, true},
    Entry{"Add", op_add, false},
    Entry{"AveragePool", op_average_pool, true},
    Entry{"BatchNormalization", op_batch_normalization, true},
    Entry{"Cast", op_cast, false},
    Entry{"Ceil", op_ceil, true},
    Entry{"Clip", op_clip, true},
    Entry{"Concat", op_concat, false},
    Entry{"Conv", op_conv, true},
    Entry{"ConvTranspose", op_conv_transpose, true},
    Entry{"Div", op_div, false},
    Entry{"Dropout", op_dropout, true},
    Entry{"Elu", op_elu, true},
    Entry{"Erf", op_erf, true},
    Entry{"Exp", op_exp, true},
    Entry{"Expand", op_expand, false},
    Entry{"Flatten", op_copy, false},
    Entry{"Floor", op_floor, true},
    Entry{"Gather", op_gather, false},
    Entry{"Gelu", op_gelu, true},
    Entry{"Gemm", op_gemm, true},
    Entry{"GlobalAveragePool", op_global_average_pool, true},
    Entry{"HardSigmoid", op_hard_sigmoid, true},
    Entry{"HardSwish", op_hard_swish, true},
    Entry{"Identity", op_identity, false},
    Entry{"LSTM", op_lstm, true},
    Entry{"LayerNormalization", op_layer_normalization, true},
    Entry{"LeakyRelu", op_leaky_relu, true},
    Entry{"Log", op_log, true},
    Entry{"MatMul", op_matmul, true},
    Entry{"Max", op_max, true},
    Entry{"MaxPool", op_max_pool, true},
    Entry{"Min", op_min, true},
    Entry{"Mul", op_mul, false},
    Entry{"Neg", op_neg, true},
    Entry{"PRelu", op_prelu, true},
    Entry{"Pad", op_pad, false},
    Entry{"Pow", op_pow, true},
    Entry{"Reciprocal", op_reciprocal, true},
    Entry{"ReduceMax", op_reduce_max, true},
    Entry{"ReduceMean", op_reduce_mean, true},
    Entry{"ReduceMin", op_reduce_min, true},
    Entry{"ReduceSum", op_reduce_sum, true},
    Entry{"Relu", op_relu, true},
    Entry{"Reshape", op_copy, false},
    Entry{"Resize", op_resize, true},
    Entry{"Selu", op_selu, true},
    Entry{"Shape", op_shape, false},
    Entry{"Sigmoid", op_sigmoid, true},
    Entry{"Slice", op_slice, false},
    Entry{"Softmax", op_softmax, true},
    Entry{"Softplus", op_softplus, true},
    Entry{"Split", op_split, false},
    Entry{"Sqrt", op_sqrt, true},
    Entry{"Squeeze", op_copy, false},
    Entry{"Sub", op_sub, false},
    Entry{"Tanh", op_tanh, true},
    Entry{"Tile", op_tile, false},
    Entry{"Transpose", op_transpose, false},
    Entry{"Unsqueeze", op_copy, false},
};

const Entry* find_kernel(std::string_view name) {
  const auto it = std::lower_bound(kKernels.begin(), kKernels.end(), name,
                                   [](const Entry& e, std::string_view n) { return e.name < n; });
  return it != kKernels.end() && it->name == name ? &*it : nullptr;
}

}  // namespace

const std::vector<std::string>& cpu_op_types() {
  static const std::vector<std::string> types = [] {
    std::vector<std::string> v;
    for (const Entry& e : kKernels) v.emplace_back(e.name);
    return v;
  }();
  return types;
}

bool cpu_op_supported(std::string_view onnx_op_type) { return find_kernel(onnx_op_type) != nullptr; }

bool cpu_op_output_optional(std::string_view onnx_op_type, size_t position) {
  return position > 0 || onnx_op_type == "LSTM";
}

namespace detail {

Status run_cpu_op(const Model& model, const Op& op, const std::vector<const Value*>& ins, const std::vector<Value*>& outs) {
  const std::string_view type = std::string_view(op.type).substr(op.type.starts_with("cpu.") ? 4 : 0);
  const Entry* e = find_kernel(type);
  if (!e) return err("no CPU kernel for " + std::string(type));
  // Absent optional outputs (-1) at the end are dropped; LayerNormalization and LSTM take
  // gaps, and LSTM may lack its first output too (its kernel checks each output it writes).
  std::vector<Value*> present(outs);
  while (!present.empty() && !present.back()) present.pop_back();
  if (present.empty()) return err("output 0 is required");
  const bool gaps = type == "LayerNormalization" || type == "LSTM";
  for (size_t k = 0; k < present.size(); ++k)
    if (!present[k] && (!gaps || !cpu_op_output_optional(type, k))) return err("output " + std::to_string(k) + " is required");
  if (e->float_only) {
    if (!ins.empty() && ins[0] && ins[0]->type != ElemType::f32) return err("input 0 must be an f32 tensor");
    for (const Value* v : present)
      if (v && v->type != ElemType::f32) return err("outputs must be f32 tensors");
  }
  return e->kernel(Ctx{model, op, ins, present});
}

}  // namespace detail
}  // namespace qflow::lowered

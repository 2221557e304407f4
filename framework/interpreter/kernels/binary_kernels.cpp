// Binary and variadic arithmetic kernels: Add, Sub, Mul, Div, Mod, Pow, PRelu, BitShift,
// Min, Max, Sum, Mean.
#include <cmath>
#include <limits>
#include <type_traits>

#include "framework/interpreter/kernels/elementwise_common.h"

namespace qflow {

namespace {

using elementwise::binary_broadcast;
using elementwise::with_halves_as_float;

// Unsigned type wide enough that arithmetic on it neither promotes to int nor overflows
// with undefined behaviour: integer kernels wrap around like two's complement hardware.
template <typename T>
using Wide = std::conditional_t<(sizeof(T) < sizeof(uint32_t)), uint32_t, std::make_unsigned_t<T>>;

template <typename T, typename F>
T wrapping(T a, T b, F f) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(f(static_cast<Wide<T>>(a), static_cast<Wide<T>>(b)));
  } else {
    return f(a, b);
  }
}

Status check_same_dtype(const KernelContext& ctx, const Tensor& a, const Tensor& b) {
  if (a.dtype() == b.dtype()) return Status::ok();
  return ctx.error("inputs have different element types: " + std::string(dtype_name(a.dtype())) + " and " +
                   std::string(dtype_name(b.dtype())));
}

Expected<Shape> output_shape(const KernelContext& ctx, const Shape& a, const Shape& b) {
  auto shape = broadcast_shapes(a, b);
  if (!shape) return ctx.error("cannot broadcast " + shape_to_string(a) + " with " + shape_to_string(b));
  return shape;
}

// Same-typed numeric binary op; make_op(node) gives a generic functor (T, T) -> T.
template <typename MakeOp>
KernelFunction arithmetic(MakeOp make_op) {
  return [make_op](KernelContext& context) {
    return with_halves_as_float(context, [&make_op](KernelContext& ctx) -> Status {
      QFLOW_ASSIGN_OR_RETURN(const Tensor* a, ctx.required_input(0));
      QFLOW_ASSIGN_OR_RETURN(const Tensor* b, ctx.required_input(1));
      QFLOW_RETURN_IF_ERROR(check_same_dtype(ctx, *a, *b));
      QFLOW_ASSIGN_OR_RETURN(Shape b_shape, elementwise::legacy_broadcast_shape(ctx, a->shape(), b->shape()));
      QFLOW_ASSIGN_OR_RETURN(Shape out_shape, output_shape(ctx, a->shape(), b_shape));
      auto op = make_op(ctx.node);
      return dispatch_numeric(a->dtype(), [&]<typename T>() -> Status {
        QFLOW_ASSIGN_OR_RETURN(Tensor out, ctx.allocate(a->dtype(), out_shape));
        const Epilogue* program = std::is_same_v<T, float> ? elementwise::flat_epilogue(ctx, out_shape.size()) : nullptr;
        binary_broadcast(ctx, a->data<T>(), a->shape(), b->data<T>(), b_shape, out.data<T>(), out_shape,
                         [&op](T x, T y) { return static_cast<T>(op(x, y)); }, program);
        ctx.outputs[0] = std::move(out);
        ctx.epilogue_applied = program != nullptr;
        return Status::ok();
      });
    });
  };
}

template <typename F>
auto plain(F f) {
  return [f](const Node&) { return f; };
}

template <typename T>
T divide(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    // Division by zero has no integer result; 0 keeps the kernel total instead of trapping.
    if (b == 0) return T(0);
    if constexpr (std::is_signed_v<T>) {
      if (b == T(-1)) return wrapping(T(0), a, [](auto x, auto y) { return x - y; });
    }
    return static_cast<T>(a / b);
  } else {
    return a / b;
  }
}

template <typename T>
T modulo(T a, T b, bool fmod) {
  if constexpr (std::is_integral_v<T>) {
    if (b == 0) return T(0);
    if constexpr (std::is_signed_v<T>) {
      if (b == T(-1)) return T(0);
    }
    T r = static_cast<T>(a % b);
    // fmod=0 follows Python: the result takes the divisor's sign.
    if (!fmod && r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
    return r;
  } else {
    T r = std::fmod(a, b);
    if (!fmod && r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
  }
}

template <typename T>
T power(T base, double exponent) {
  if constexpr (std::is_integral_v<T>) {
    // Exact integer powers by squaring (wrapping on overflow); std::pow over doubles would
    // lose low bits of 64-bit results.
    if (exponent >= 0 && exponent == std::floor(exponent) && exponent < 1e18) {
      uint64_t e = static_cast<uint64_t>(exponent);
      Wide<T> result = 1, b = static_cast<Wide<T>>(base);
      while (e) {
        if (e & 1) result = static_cast<Wide<T>>(result * b);
        b = static_cast<Wide<T>>(b * b);
        e >>= 1;
      }
      return static_cast<T>(result);
    }
    const double v = std::pow(static_cast<double>(base), exponent);
    if (!std::isfinite(v)) return T(0);
    if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  } else {
    // A square (LayerNorm's variance) is the exact double product: pow is accurate to well
    // under an ulp and the square of a float is representable in double, so both give the
    // same double. NaN keeps pow's own result.
    if (exponent == 2.0 && !std::isnan(base)) return static_cast<T>(static_cast<double>(base) * static_cast<double>(base));
    return static_cast<T>(std::pow(static_cast<double>(base), exponent));
  }
}

// Pow allows the exponent a different numeric type than the base; the output has the base's.
Status pow_kernel(KernelContext& context) {
  return with_halves_as_float(context, [](KernelContext& ctx) -> Status {
    QFLOW_ASSIGN_OR_RETURN(const Tensor* a, ctx.required_input(0));
    QFLOW_ASSIGN_OR_RETURN(const Tensor* b, ctx.required_input(1));
    const Tensor exponent = b->dtype() == DType::Float64 ? *b : b->cast(DType::Float64);
    QFLOW_ASSIGN_OR_RETURN(Shape b_shape, elementwise::legacy_broadcast_shape(ctx, a->shape(), b->shape()));
    QFLOW_ASSIGN_OR_RETURN(Shape out_shape, output_shape(ctx, a->shape(), b_shape));
    return dispatch_numeric(a->dtype(), [&]<typename T>() -> Status {
      QFLOW_ASSIGN_OR_RETURN(Tensor out, ctx.allocate(a->dtype(), out_shape));
      binary_broadcast(ctx, a->data<T>(), a->shape(), exponent.data<double>(), b_shape, out.data<T>(), out_shape,
                       [](T x, double e) { return power(x, e); });
      ctx.outputs[0] = std::move(out);
      return Status::ok();
    });
  });
}

Status prelu(KernelContext& context) {
  return with_halves_as_float(context, [](KernelContext& ctx) -> Status {
    QFLOW_ASSIGN_OR_RETURN(const Tensor* x, ctx.required_input(0));
    QFLOW_ASSIGN_OR_RETURN(const Tensor* slope, ctx.required_input(1));
    QFLOW_RETURN_IF_ERROR(check_same_dtype(ctx, *x, *slope));
    Shape slope_shape = slope->shape();
    if (ctx.opset < 7 && slope->rank() == 1 && x->rank() >= 2 && slope->dim(0) == x->dim(1)) {
      // Before opset 7 a vector of C values is a per-channel slope, not a trailing-axis one.
      slope_shape.assign(static_cast<std::size_t>(x->rank() - 1), 1);
      slope_shape[0] = slope->dim(0);
    }
    auto joined = broadcast_shapes(x->shape(), slope_shape);
    if (!joined || *joined != x->shape())
      return ctx.error("slope " + shape_to_string(slope->shape()) + " does not broadcast to X " +
                       shape_to_string(x->shape()));
    return dispatch_numeric(x->dtype(), [&]<typename T>() -> Status {
      Tensor out(x->dtype(), x->shape());
      binary_broadcast(ctx, x->data<T>(), x->shape(), slope->data<T>(), slope_shape, out.data<T>(), x->shape(),
                       [](T v, T s) { return v < T(0) ? static_cast<T>(v * s) : v; });
      ctx.outputs[0] = std::move(out);
      return Status::ok();
    });
  });
}

Status bit_shift(KernelContext& ctx) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* a, ctx.required_input(0));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* b, ctx.required_input(1));
  QFLOW_RETURN_IF_ERROR(check_same_dtype(ctx, *a, *b));
  const std::string direction = ctx.node.attr_string("direction", "");
  if (direction != "LEFT" && direction != "RIGHT")
    return ctx.error("direction is '" + direction + "', expected LEFT or RIGHT");
  const bool left = direction == "LEFT";
  QFLOW_ASSIGN_OR_RETURN(Shape out_shape, output_shape(ctx, a->shape(), b->shape()));
  auto body = [&]<typename T>() -> Status {
    QFLOW_ASSIGN_OR_RETURN(Tensor out, ctx.allocate(a->dtype(), out_shape));
    binary_broadcast(ctx, a->data<T>(), a->shape(), b->data<T>(), b->shape(), out.data<T>(), out_shape,
                     [left](T x, T s) -> T {
                       // Shifting by the bit width or more is undefined in C++; every bit is gone.
                       if (s >= sizeof(T) * 8) return T(0);
                       return left ? static_cast<T>(static_cast<Wide<T>>(x) << s) : static_cast<T>(x >> s);
                     });
    ctx.outputs[0] = std::move(out);
    return Status::ok();
  };
  switch (a->dtype()) {
    case DType::UInt8: return body.operator()<uint8_t>();
    case DType::UInt16: return body.operator()<uint16_t>();
    case DType::UInt32: return body.operator()<uint32_t>();
    case DType::UInt64: return body.operator()<uint64_t>();
    default: return ctx.error("BitShift needs unsigned integers, got " + std::string(dtype_name(a->dtype())));
  }
}

template <typename T>
T max_of(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
  }
  return a < b ? b : a;
}

template <typename T>
T min_of(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
  }
  return b < a ? b : a;
}

enum class Fold { Min, Max, Sum, Mean };

// Variadic ops fold their inputs left to right, broadcasting at each step.
template <Fold kind>
Status variadic(KernelContext& context) {
  return with_halves_as_float(context, [](KernelContext& ctx) -> Status {
    if (ctx.input_count() == 0 || !ctx.input(0)) return ctx.error("needs at least one input");
    const Tensor& first = *ctx.input(0);
    for (std::size_t i = 1; i < ctx.input_count(); ++i) {
      if (!ctx.input(i)) return ctx.error("input " + std::to_string(i) + " is missing");
      QFLOW_RETURN_IF_ERROR(check_same_dtype(ctx, first, *ctx.input(i)));
    }
    return dispatch_numeric(first.dtype(), [&]<typename T>() -> Status {
      Tensor acc = first.clone();
      for (std::size_t i = 1; i < ctx.input_count(); ++i) {
        const Tensor& next = *ctx.input(i);
        QFLOW_ASSIGN_OR_RETURN(Shape shape, output_shape(ctx, acc.shape(), next.shape()));
        // Not from the arena: a fold step's result may be dropped without becoming a value.
        Expected<Tensor> made = Tensor::make(first.dtype(), shape);
        if (!made) return ctx.error(made.status().message());
        Tensor out = std::move(made).value();
        auto run = [&](auto op) {
          binary_broadcast(ctx, acc.data<T>(), acc.shape(), next.data<T>(), next.shape(), out.data<T>(), shape, op);
        };
        if constexpr (kind == Fold::Min) run([](T x, T y) { return min_of(x, y); });
        if constexpr (kind == Fold::Max) run([](T x, T y) { return max_of(x, y); });
        if constexpr (kind == Fold::Sum || kind == Fold::Mean)
          run([](T x, T y) { return wrapping(x, y, [](auto p, auto q) { return p + q; }); });
        acc = std::move(out);
      }
      if constexpr (kind == Fold::Mean) {
        const T count = static_cast<T>(ctx.input_count());
        T* p = acc.data<T>();
        for (int64_t i = 0; i < acc.numel(); ++i) p[i] = static_cast<T>(p[i] / count);
      }
      ctx.outputs[0] = std::move(acc);
      return Status::ok();
    });
  });
}

}  // namespace

void register_binary_kernels(KernelRegistry& r) {
  const std::string d;
  const int64_t L = kLatestOpset;
  r.add_function(d, "Add", 1, L, arithmetic(plain([](auto a, auto b) {
    return wrapping(a, b, [](auto x, auto y) { return x + y; });
  })));
  r.add_function(d, "Sub", 1, L, arithmetic(plain([](auto a, auto b) {
    return wrapping(a, b, [](auto x, auto y) { return x - y; });
  })));
  r.add_function(d, "Mul", 1, L, arithmetic(plain([](auto a, auto b) {
    return wrapping(a, b, [](auto x, auto y) { return x * y; });
  })));
  r.add_function(d, "Div", 1, L, arithmetic(plain([](auto a, auto b) { return divide(a, b); })));
  r.add_function(d, "Mod", 1, L, arithmetic([](const Node& n) {
    const bool fmod = n.attr_int("fmod", 0) != 0;
    return [fmod](auto a, auto b) { return modulo(a, b, fmod); };
  }));
  r.add_function(d, "Pow", 1, L, pow_kernel);
  r.add_function(d, "PRelu", 1, L, prelu);
  r.add_function(d, "BitShift", 11, L, bit_shift);
  r.add_function(d, "Min", 1, L, variadic<Fold::Min>);
  r.add_function(d, "Max", 1, L, variadic<Fold::Max>);
  r.add_function(d, "Sum", 1, L, variadic<Fold::Sum>);
  r.add_function(d, "Mean", 1, L, variadic<Fold::Mean>);
}

}  // namespace qflow

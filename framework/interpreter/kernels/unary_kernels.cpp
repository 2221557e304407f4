// Unary element-wise kernels: activations, math functions, rounding, predicates and Clip.
#include <cmath>
#include <limits>
#include <type_traits>

#include "framework/interpreter/kernels/activation.h"
#include "framework/interpreter/kernels/bound_kernel.h"
#include "framework/interpreter/kernels/elementwise_common.h"

namespace qflow {

namespace {

using elementwise::unary_map;
using elementwise::with_halves_as_float;

// A functor maker reads the node's attributes once, when the node's kernel is created, and
// returns a generic functor applied to every element of type T.
template <typename MakeOp>
KernelFactory float_unary(MakeOp make_op) {
  return bound_kernel([make_op](const Node& node, int64_t) -> KernelFunction {
    return [op = make_op(node)](KernelContext& context) {
      return with_halves_as_float(context, [&op](KernelContext& ctx) -> Status {
        QFLOW_ASSIGN_OR_RETURN(const Tensor* x, ctx.required_input(0));
        return dispatch_float(x->dtype(), [&]<typename T>() -> Status {
          QFLOW_ASSIGN_OR_RETURN(Tensor out, ctx.allocate(x->dtype(), x->shape()));
          const Epilogue* program = std::is_same_v<T, float> ? elementwise::flat_epilogue(ctx, x->rank()) : nullptr;
          unary_map(ctx, x->data<T>(), out.data<T>(), x->numel(), [&op](T v) { return static_cast<T>(op(v)); }, program);
          ctx.outputs[0] = std::move(out);
          ctx.epilogue_applied = program != nullptr;
          return Status::ok();
        });
      });
    };
  });
}

// As float_unary, for ops that also accept integer types.
template <typename MakeOp>
KernelFactory numeric_unary(MakeOp make_op) {
  return bound_kernel([make_op](const Node& node, int64_t) -> KernelFunction {
    return [op = make_op(node)](KernelContext& context) {
      return with_halves_as_float(context, [&op](KernelContext& ctx) -> Status {
        QFLOW_ASSIGN_OR_RETURN(const Tensor* x, ctx.required_input(0));
        return dispatch_numeric(x->dtype(), [&]<typename T>() -> Status {
          QFLOW_ASSIGN_OR_RETURN(Tensor out, ctx.allocate(x->dtype(), x->shape()));
          const Epilogue* program = std::is_same_v<T, float> ? elementwise::flat_epilogue(ctx, x->rank()) : nullptr;
          unary_map(ctx, x->data<T>(), out.data<T>(), x->numel(), [&op](T v) { return static_cast<T>(op(v)); }, program);
          ctx.outputs[0] = std::move(out);
          ctx.epilogue_applied = program != nullptr;
          return Status::ok();
        });
      });
    };
  });
}

// Float input, bool output.
template <typename MakeOp>
KernelFactory float_predicate(MakeOp make_op) {
  return bound_kernel([make_op](const Node& node, int64_t) -> KernelFunction {
    return [op = make_op(node)](KernelContext& context) {
      return with_halves_as_float(context, [&op](KernelContext& ctx) -> Status {
        QFLOW_ASSIGN_OR_RETURN(const Tensor* x, ctx.required_input(0));
        return dispatch_float(x->dtype(), [&]<typename T>() -> Status {
          Tensor out(DType::Bool, x->shape());
          unary_map(ctx, x->data<T>(), out.data<bool>(), x->numel(), [&op](T v) { return static_cast<bool>(op(v)); });
          ctx.outputs[0] = std::move(out);
          return Status::ok();
        });
      });
    };
  });
}

// Attribute-free functors.
template <typename F>
auto plain(F f) {
  return [f](const Node&) { return f; };
}

template <typename T>
T clip_bound(const Tensor* bound, T fallback) {
  return bound && bound->numel() > 0 ? bound->data<T>()[0] : fallback;
}

// Clip before opset 11 takes its bounds from attributes, read once per node here.
KernelFunction clip(const Node& node, int64_t) {
  const float min_attr = node.attr_float("min", -std::numeric_limits<float>::max());
  const float max_attr = node.attr_float("max", std::numeric_limits<float>::max());
  const bool has_min = node.find_attribute("min") != nullptr, has_max = node.find_attribute("max") != nullptr;
  return [=](KernelContext& context) {
    return with_halves_as_float(context, [&](KernelContext& ctx) -> Status {
      QFLOW_ASSIGN_OR_RETURN(const Tensor* x, ctx.required_input(0));
      return dispatch_numeric(x->dtype(), [&]<typename T>() -> Status {
        T lo = std::numeric_limits<T>::lowest();
        T hi = std::numeric_limits<T>::max();
        if (ctx.opset < 11) {
          lo = static_cast<T>(min_attr);
          hi = static_cast<T>(max_attr);
          if constexpr (std::is_same_v<T, double>) {
            // The attributes are float; an absent bound must not clamp doubles at FLT_MAX.
            if (!has_min) lo = std::numeric_limits<double>::lowest();
            if (!has_max) hi = std::numeric_limits<double>::max();
          }
        } else {
          for (std::size_t i : {std::size_t{1}, std::size_t{2}}) {
            const Tensor* b = ctx.input(i);
            if (b && b->dtype() != x->dtype())
              return ctx.error(std::string(i == 1 ? "min" : "max") + " has element type " +
                               std::string(dtype_name(b->dtype())) + ", expected " + std::string(dtype_name(x->dtype())));
          }
          lo = clip_bound<T>(ctx.input(1), lo);
          hi = clip_bound<T>(ctx.input(2), hi);
        }
        QFLOW_ASSIGN_OR_RETURN(Tensor out, ctx.allocate(x->dtype(), x->shape()));
        if constexpr (std::is_same_v<T, float>) {
          const float* in = x->data<float>();
          float* y = out.data<float>();
          elementwise::chunked(ctx, x->numel(),
                               [=](int64_t b, int64_t e) { activation::clip_floats(in + b, y + b, e - b, lo, hi); });
        } else {
          unary_map(ctx, x->data<T>(), out.data<T>(), x->numel(), [lo, hi](T v) { return activation::clip(v, lo, hi); });
        }
        ctx.outputs[0] = std::move(out);
        return Status::ok();
      });
    });
  };
}

template <typename T>
T sign_of(T v) {
  if constexpr (std::is_unsigned_v<T>) {
    return static_cast<T>(v > 0 ? 1 : 0);
  } else {
    return static_cast<T>(v > 0 ? 1 : (v < 0 ? -1 : 0));
  }
}

}  // namespace

void register_unary_kernels(KernelRegistry& r) {
  const std::string d;
  const int64_t L = kLatestOpset;

  // Activations.
  r.add(d, "Relu", 1, L, numeric_unary(plain([](auto v) { return activation::relu(v); })));
  r.add(d, "LeakyRelu", 1, L, float_unary([](const Node& n) {
    const double alpha = n.attr_float("alpha", 0.01f);
    return [alpha](auto v) { return v >= 0 ? v : static_cast<decltype(v)>(alpha * v); };
  }));
  r.add(d, "Elu", 1, L, float_unary([](const Node& n) {
    const double alpha = n.attr_float("alpha", 1.0f);
    return [alpha](auto v) { return v >= 0 ? v : static_cast<decltype(v)>(alpha * std::expm1(v)); };
  }));
  r.add(d, "Selu", 1, L, float_unary([](const Node& n) {
    const double alpha = n.attr_float("alpha", 1.67326319217681884765625f);
    const double gamma = n.attr_float("gamma", 1.05070102214813232421875f);
    return [alpha, gamma](auto v) {
      return static_cast<decltype(v)>(v > 0 ? gamma * v : gamma * alpha * std::expm1(static_cast<double>(v)));
    };
  }));
  r.add(d, "Celu", 1, L, float_unary([](const Node& n) {
    const double alpha = n.attr_float("alpha", 1.0f);
    return [alpha](auto v) {
      const double x = v;
      return static_cast<decltype(v)>(std::max(0.0, x) + std::min(0.0, alpha * std::expm1(x / alpha)));
    };
  }));
  r.add(d, "ThresholdedRelu", 1, L, float_unary([](const Node& n) {
    const double alpha = n.attr_float("alpha", 1.0f);
    return [alpha](auto v) { return v > alpha ? v : decltype(v){0}; };
  }));
  r.add(d, "Shrink", 9, L, numeric_unary([](const Node& n) {
    const double lambd = n.attr_float("lambd", 0.5f), bias = n.attr_float("bias", 0.0f);
    return [lambd, bias](auto v) {
      const double x = static_cast<double>(v);
      return x < -lambd ? x + bias : (x > lambd ? x - bias : 0.0);
    };
  }));
  r.add(d, "Sigmoid", 1, L, float_unary(plain([](auto v) { return activation::sigmoid(v); })));
  r.add(d, "HardSigmoid", 1, L, float_unary([](const Node& n) {
    const double alpha = n.attr_float("alpha", 0.2f);
    const double beta = n.attr_float("beta", 0.5f);
    return [alpha, beta](auto v) {
      using T = decltype(v);
      return activation::hard_sigmoid(v, static_cast<T>(alpha), static_cast<T>(beta));
    };
  }));
  r.add(d, "HardSwish", 1, L, float_unary(plain([](auto v) { return activation::hard_swish(v); })));
  // Gelu-20: the erf form, or the tanh approximation with approximate = "tanh"; computed in
  // double as the device runtime's CPU op does.
  r.add(d, "Gelu", 20, L, float_unary([](const Node& n) {
    const bool tanh_form = n.attr_string("approximate", "none") == "tanh";
    return [tanh_form](auto v) {
      const double x = static_cast<double>(v);
      const double inner = tanh_form ? std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))
                                     : std::erf(x * 0.7071067811865476);
      return static_cast<decltype(v)>(0.5 * x * (1.0 + inner));
    };
  }));
  r.add(d, "Softplus", 1, L, float_unary(plain([](auto v) {
    using T = decltype(v);
    // log(1 + e^v) = max(v, 0) + log1p(e^-|v|), without overflow for large v.
    return std::max(v, T(0)) + std::log1p(std::exp(-std::abs(v)));
  })));
  r.add(d, "Softsign", 1, L, float_unary(plain([](auto v) { return v / (decltype(v)(1) + std::abs(v)); })));

  // Math functions.
  r.add(d, "Tanh", 1, L, float_unary(plain([](auto v) { return std::tanh(v); })));
  r.add(d, "Erf", 1, L, float_unary(plain([](auto v) { return std::erf(v); })));
  r.add(d, "Exp", 1, L, float_unary(plain([](auto v) { return std::exp(v); })));
  r.add(d, "Log", 1, L, float_unary(plain([](auto v) { return std::log(v); })));
  r.add(d, "Sqrt", 1, L, float_unary(plain([](auto v) { return std::sqrt(v); })));
  r.add(d, "Reciprocal", 1, L, float_unary(plain([](auto v) { return decltype(v)(1) / v; })));
  r.add(d, "Sin", 1, L, float_unary(plain([](auto v) { return std::sin(v); })));
  r.add(d, "Cos", 1, L, float_unary(plain([](auto v) { return std::cos(v); })));
  r.add(d, "Tan", 1, L, float_unary(plain([](auto v) { return std::tan(v); })));
  r.add(d, "Asin", 1, L, float_unary(plain([](auto v) { return std::asin(v); })));
  r.add(d, "Acos", 1, L, float_unary(plain([](auto v) { return std::acos(v); })));
  r.add(d, "Atan", 1, L, float_unary(plain([](auto v) { return std::atan(v); })));
  r.add(d, "Sinh", 1, L, float_unary(plain([](auto v) { return std::sinh(v); })));
  r.add(d, "Cosh", 1, L, float_unary(plain([](auto v) { return std::cosh(v); })));
  r.add(d, "Asinh", 1, L, float_unary(plain([](auto v) { return std::asinh(v); })));
  r.add(d, "Acosh", 1, L, float_unary(plain([](auto v) { return std::acosh(v); })));
  r.add(d, "Atanh", 1, L, float_unary(plain([](auto v) { return std::atanh(v); })));

  // Sign and rounding.
  r.add(d, "Neg", 1, L, numeric_unary(plain([](auto v) {
    using T = decltype(v);
    if constexpr (std::is_integral_v<T>) {
      // Two's complement wrap-around, so negating the most negative value is defined.
      return static_cast<T>(T(0) - static_cast<std::make_unsigned_t<T>>(v));
    } else {
      return -v;
    }
  })));
  r.add(d, "Abs", 1, L, numeric_unary(plain([](auto v) {
    using T = decltype(v);
    if constexpr (std::is_unsigned_v<T>) {
      return v;
    } else if constexpr (std::is_integral_v<T>) {
      return v < 0 ? static_cast<T>(T(0) - static_cast<std::make_unsigned_t<T>>(v)) : v;
    } else {
      return std::abs(v);
    }
  })));
  r.add(d, "Sign", 1, L, numeric_unary(plain([](auto v) { return sign_of(v); })));
  r.add(d, "Floor", 1, L, float_unary(plain([](auto v) { return std::floor(v); })));
  r.add(d, "Ceil", 1, L, float_unary(plain([](auto v) { return std::ceil(v); })));
  // nearbyint in the default rounding mode rounds halves to even, as ONNX Round requires.
  r.add(d, "Round", 1, L, float_unary(plain([](auto v) { return std::nearbyint(v); })));

  // Predicates.
  r.add(d, "IsNaN", 1, L, float_predicate(plain([](auto v) { return std::isnan(v); })));
  r.add(d, "IsInf", 1, L, float_predicate([](const Node& n) {
    const bool negative = n.attr_int("detect_negative", 1) != 0;
    const bool positive = n.attr_int("detect_positive", 1) != 0;
    return [negative, positive](auto v) { return std::isinf(v) && (v > 0 ? positive : negative); };
  }));

  r.add(d, "Clip", 1, L, bound_kernel(clip));
}

}  // namespace qflow

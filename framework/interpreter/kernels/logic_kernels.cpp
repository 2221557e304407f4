// Comparison and logical kernels with bool outputs, and Where.
#include "framework/interpreter/kernels/elementwise_common.h"

namespace qflow {

namespace {

using elementwise::binary_broadcast;
using elementwise::with_halves_as_float;

Expected<Shape> output_shape(const KernelContext& ctx, const Shape& a, const Shape& b) {
  auto shape = broadcast_shapes(a, b);
  if (!shape) return ctx.error("cannot broadcast " + shape_to_string(a) + " with " + shape_to_string(b));
  return shape;
}

// Numeric or bool inputs of one type, bool output.
template <typename Op>
KernelFunction comparison(Op op) {
  return [op](KernelContext& context) {
    return with_halves_as_float(context, [&op](KernelContext& ctx) -> Status {
      QFLOW_ASSIGN_OR_RETURN(const Tensor* a, ctx.required_input(0));
      QFLOW_ASSIGN_OR_RETURN(const Tensor* b, ctx.required_input(1));
      if (a->dtype() != b->dtype())
        return ctx.error("inputs have different element types: " + std::string(dtype_name(a->dtype())) + " and " +
                         std::string(dtype_name(b->dtype())));
      QFLOW_ASSIGN_OR_RETURN(Shape b_shape, elementwise::legacy_broadcast_shape(ctx, a->shape(), b->shape()));
      QFLOW_ASSIGN_OR_RETURN(Shape out_shape, output_shape(ctx, a->shape(), b_shape));
      auto body = [&]<typename T>() -> Status {
        QFLOW_ASSIGN_OR_RETURN(Tensor out, ctx.allocate(DType::Bool, out_shape));
        binary_broadcast(ctx, a->data<T>(), a->shape(), b->data<T>(), b_shape, out.data<bool>(), out_shape,
                         [&op](T x, T y) { return static_cast<bool>(op(x, y)); });
        ctx.outputs[0] = std::move(out);
        return Status::ok();
      };
      if (a->dtype() == DType::Bool) return body.template operator()<bool>();
      return dispatch_numeric(a->dtype(), body);
    });
  };
}

// Bool inputs only.
template <typename Op>
KernelFunction logical(Op op) {
  return [op](KernelContext& ctx) -> Status {
    QFLOW_ASSIGN_OR_RETURN(const Tensor* a, ctx.required_input(0));
    QFLOW_ASSIGN_OR_RETURN(const Tensor* b, ctx.required_input(1));
    if (a->dtype() != DType::Bool || b->dtype() != DType::Bool)
      return ctx.error("inputs must be bool, got " + std::string(dtype_name(a->dtype())) + " and " +
                       std::string(dtype_name(b->dtype())));
    QFLOW_ASSIGN_OR_RETURN(Shape b_shape, elementwise::legacy_broadcast_shape(ctx, a->shape(), b->shape()));
    QFLOW_ASSIGN_OR_RETURN(Shape out_shape, output_shape(ctx, a->shape(), b_shape));
    QFLOW_ASSIGN_OR_RETURN(Tensor out, ctx.allocate(DType::Bool, out_shape));
    binary_broadcast(ctx, a->data<bool>(), a->shape(), b->data<bool>(), b_shape, out.data<bool>(), out_shape, op);
    ctx.outputs[0] = std::move(out);
    return Status::ok();
  };
}

Status logical_not(KernelContext& ctx) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* x, ctx.required_input(0));
  if (x->dtype() != DType::Bool) return ctx.error("input must be bool, got " + std::string(dtype_name(x->dtype())));
  Tensor out(DType::Bool, x->shape());
  elementwise::unary_map(ctx, x->data<bool>(), out.data<bool>(), x->numel(), [](bool v) { return !v; });
  ctx.outputs[0] = std::move(out);
  return Status::ok();
}

Status where(KernelContext& ctx) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* cond, ctx.required_input(0));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* x, ctx.required_input(1));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* y, ctx.required_input(2));
  if (cond->dtype() != DType::Bool)
    return ctx.error("condition must be bool, got " + std::string(dtype_name(cond->dtype())));
  if (x->dtype() != y->dtype())
    return ctx.error("X and Y have different element types: " + std::string(dtype_name(x->dtype())) + " and " +
                     std::string(dtype_name(y->dtype())));
  auto out_shape = broadcast_shapes({cond->shape(), x->shape(), y->shape()});
  if (!out_shape)
    return ctx.error("cannot broadcast " + shape_to_string(cond->shape()) + ", " + shape_to_string(x->shape()) +
                     " and " + shape_to_string(y->shape()));
  const auto plan = elementwise::make_broadcast_plan<3>(*out_shape, {&cond->shape(), &x->shape(), &y->shape()});
  return elementwise::name_node(ctx, dispatch_all(x->dtype(), [&]<typename T>() -> Status {
    QFLOW_ASSIGN_OR_RETURN(Tensor out, ctx.allocate(x->dtype(), *out_shape));
    const bool* c = cond->data<bool>();
    const T* px = x->data<T>();
    const T* py = y->data<T>();
    T* po = out.data<T>();
    elementwise::chunked(ctx, out.numel(), [&](int64_t begin, int64_t end) {
      elementwise::walk_broadcast<3>(plan, begin, end, [&](int64_t count, int64_t o, const std::array<int64_t, 3>& off,
                                                           const std::array<int64_t, 3>& step) {
        for (int64_t i = 0; i < count; ++i)
          po[o + i] = c[off[0] + i * step[0]] ? px[off[1] + i * step[1]] : py[off[2] + i * step[2]];
      });
    });
    ctx.outputs[0] = std::move(out);
    return Status::ok();
  }));
}

}  // namespace

void register_logic_kernels(KernelRegistry& r) {
  const std::string d;
  const int64_t L = kLatestOpset;
  r.add_function(d, "Equal", 1, L, comparison([](auto a, auto b) { return a == b; }));
  r.add_function(d, "Less", 1, L, comparison([](auto a, auto b) { return a < b; }));
  r.add_function(d, "Greater", 1, L, comparison([](auto a, auto b) { return a > b; }));
  r.add_function(d, "LessOrEqual", 12, L, comparison([](auto a, auto b) { return a <= b; }));
  r.add_function(d, "GreaterOrEqual", 12, L, comparison([](auto a, auto b) { return a >= b; }));
  r.add_function(d, "And", 1, L, logical([](bool a, bool b) { return a && b; }));
  r.add_function(d, "Or", 1, L, logical([](bool a, bool b) { return a || b; }));
  r.add_function(d, "Xor", 1, L, logical([](bool a, bool b) { return a != b; }));
  r.add_function(d, "Not", 1, L, logical_not);
  r.add_function(d, "Where", 9, L, where);
}

}  // namespace qflow

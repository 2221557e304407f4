// Element-wise kernel family: registration and the helpers its files share.
#include "framework/interpreter/kernels/elementwise_common.h"

namespace qflow {

namespace elementwise {

Expected<Shape> legacy_broadcast_shape(const KernelContext& context, const Shape& a, const Shape& b) {
  if (context.opset >= 7 || context.node.attr_int("broadcast", 0) == 0) return b;
  const Attribute* axis_attr = context.node.find_attribute("axis");
  if (!axis_attr) return b;
  const int64_t rank = static_cast<int64_t>(a.size());
  const int64_t b_rank = static_cast<int64_t>(b.size());
  int64_t axis = axis_attr->i;
  if (axis < 0) axis += rank;
  if (axis < 0 || axis + b_rank > rank)
    return context.error("legacy broadcast of B " + shape_to_string(b) + " at axis " + std::to_string(axis_attr->i) +
                         " does not fit A " + shape_to_string(a));
  Shape aligned(a.size(), 1);
  for (int64_t i = 0; i < b_rank; ++i) aligned[static_cast<std::size_t>(axis + i)] = b[static_cast<std::size_t>(i)];
  return aligned;
}

Status name_node(const KernelContext& context, Status status) {
  // Dispatch failures do not know the node; kernel errors from context.error already do.
  if (status.code() != StatusCode::Unsupported) return status;
  return status.with_context(context.node.op_type() + " '" + context.node.name() + "'");
}

Status with_halves_as_float(KernelContext& context, const KernelFunction& body) {
  DType half = DType::Undefined;
  for (const Tensor* t : context.inputs)
    if (t && (t->dtype() == DType::Float16 || t->dtype() == DType::BFloat16)) half = t->dtype();
  if (half == DType::Undefined) return name_node(context, body(context));

  std::vector<Tensor> widened;
  widened.reserve(context.inputs.size());
  KernelContext inner{context.node, context.opset, {}, {}, context.threads};
  for (const Tensor* t : context.inputs) {
    if (t && (t->dtype() == DType::Float16 || t->dtype() == DType::BFloat16)) {
      widened.push_back(t->cast(DType::Float32));
      inner.inputs.push_back(&widened.back());
    } else {
      inner.inputs.push_back(t);
    }
  }
  inner.outputs.resize(context.outputs.size());
  QFLOW_RETURN_IF_ERROR(name_node(context, body(inner)));
  for (std::size_t i = 0; i < inner.outputs.size(); ++i) {
    Tensor& out = inner.outputs[i];
    context.outputs[i] = out.dtype() == DType::Float32 ? out.cast(half) : std::move(out);
  }
  return Status::ok();
}

}  // namespace elementwise

void register_elementwise_kernels(KernelRegistry& registry) {
  register_unary_kernels(registry);
  register_binary_kernels(registry);
  register_logic_kernels(registry);
}

}  // namespace qflow

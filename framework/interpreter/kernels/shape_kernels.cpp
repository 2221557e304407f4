// Shape kernels: views (Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout), shape queries,
// Cast and the constant producers (Constant, ConstantOfShape, Range, EyeLike).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "framework/interpreter/kernel_registry.h"
#include "framework/interpreter/kernel_util.h"
#include "framework/interpreter/kernels/bound_kernel.h"
#include "framework/interpreter/kernels/shape_kernel_util.h"

namespace qflow {

namespace {

using shape_detail::make_output;
using shape_detail::normalize_axes;
using shape_detail::read_ints;

Status reshape(KernelContext& context, bool allow_zero) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* data, context.required_input(0));
  std::vector<int64_t> target;
  if (context.opset < 5) {
    const Attribute* shape = context.node.find_attribute("shape");
    if (!shape) return context.error("attribute 'shape' is missing");
    target = shape->ints;
  } else {
    QFLOW_ASSIGN_OR_RETURN(const Tensor* shape, context.required_input(1));
    QFLOW_ASSIGN_OR_RETURN(target, read_ints(context, *shape, "shape"));
  }
  Shape out(target.size());
  int64_t infer = -1, known = 1;
  for (std::size_t i = 0; i < target.size(); ++i) {
    int64_t d = target[i];
    if (d == 0 && !allow_zero) {
      if (i >= data->shape().size())
        return context.error("shape entry " + std::to_string(i) + " is 0 but the input has rank " +
                             std::to_string(data->rank()));
      d = data->shape()[i];
    }
    if (d == -1) {
      if (infer >= 0) return context.error("shape has more than one -1");
      infer = static_cast<int64_t>(i);
      continue;
    }
    if (d < 0) return context.error("shape entry " + std::to_string(d) + " is invalid");
    out[i] = d;
    if (__builtin_mul_overflow(known, d, &known)) return context.error("shape " + shape_to_string(target) + " overflows");
  }
  if (infer >= 0) {
    if (known == 0 || data->numel() % known != 0)
      return context.error("cannot infer the -1 dimension reshaping " + shape_to_string(data->shape()) + " to " +
                           shape_to_string(target));
    out[static_cast<std::size_t>(infer)] = data->numel() / known;
  }
  if (shape_numel(out) != data->numel())
    return context.error("cannot reshape " + shape_to_string(data->shape()) + " to " + shape_to_string(out));
  context.outputs[0] = data->reshaped(out);
  return Status::ok();
}

KernelFunction bind_reshape(const Node& node, int64_t opset) {
  const bool allow_zero = opset >= 14 && node.attr_int("allowzero", 0) != 0;
  return [allow_zero](KernelContext& context) { return reshape(context, allow_zero); };
}

Status flatten(KernelContext& context, int64_t axis) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* data, context.required_input(0));
  const int64_t rank = data->rank();
  if (axis < 0) axis += rank;
  if (axis < 0 || axis > rank) return context.error("axis is out of range for rank " + std::to_string(rank));
  int64_t outer = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= data->dim(i);
  const int64_t inner = outer == 0 ? shape_numel(Shape(data->shape().begin() + axis, data->shape().end()))
                                   : data->numel() / outer;
  context.outputs[0] = data->reshaped({outer, inner});
  return Status::ok();
}

KernelFunction bind_flatten(const Node& node, int64_t) {
  const int64_t axis = node.attr_int("axis", 1);
  return [axis](KernelContext& context) { return flatten(context, axis); };
}

// Squeeze/Unsqueeze axes come from an attribute before opset 13 and from input 1 after.
Expected<std::vector<int64_t>> axes_of(const KernelContext& context, bool* given) {
  *given = false;
  if (context.opset < 13) {
    const Attribute* axes = context.node.find_attribute("axes");
    if (!axes) return std::vector<int64_t>{};
    *given = true;
    return axes->ints;
  }
  const Tensor* axes = context.input(1);
  if (!axes) return std::vector<int64_t>{};
  *given = true;
  return read_ints(context, *axes, "axes");
}

Status squeeze(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* data, context.required_input(0));
  bool given = false;
  QFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> axes, axes_of(context, &given));
  QFLOW_ASSIGN_OR_RETURN(axes, normalize_axes(context, axes, data->rank()));
  Shape out;
  for (int64_t i = 0; i < data->rank(); ++i) {
    const bool listed = std::find(axes.begin(), axes.end(), i) != axes.end();
    if (listed && data->dim(i) != 1)
      return context.error("cannot squeeze axis " + std::to_string(i) + " of size " + std::to_string(data->dim(i)));
    if (listed || (!given && data->dim(i) == 1)) continue;
    out.push_back(data->dim(i));
  }
  context.outputs[0] = data->reshaped(out);
  return Status::ok();
}

Status unsqueeze(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* data, context.required_input(0));
  bool given = false;
  QFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> axes, axes_of(context, &given));
  if (!given) return context.error("axes are missing");
  const int64_t out_rank = data->rank() + static_cast<int64_t>(axes.size());
  QFLOW_ASSIGN_OR_RETURN(axes, normalize_axes(context, axes, out_rank));
  Shape out;
  std::size_t next = 0;
  for (int64_t i = 0; i < out_rank; ++i) {
    if (std::find(axes.begin(), axes.end(), i) != axes.end())
      out.push_back(1);
    else
      out.push_back(data->shape()[next++]);
  }
  context.outputs[0] = data->reshaped(out);
  return Status::ok();
}

Status identity(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* data, context.required_input(0));
  context.outputs[0] = *data;
  return Status::ok();
}

Status dropout(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* data, context.required_input(0));
  if (context.opset >= 12) {
    bool training = false;
    if (const Tensor* mode = context.input(2)) {
      if (mode->numel() != 1) return context.error("training_mode must be a scalar");
      training = mode->to_doubles()[0] != 0.0;
    }
    double ratio = 0.5;
    if (const Tensor* r = context.input(1)) {
      if (r->numel() != 1) return context.error("ratio must be a scalar");
      ratio = r->to_doubles()[0];
    }
    // A zero ratio drops nothing, so training mode is then deterministic.
    if (training && ratio != 0.0)
      return unsupported(context.node.op_type() + " '" + context.node.name() +
                         "': training_mode=true drops random elements; only inference is supported");
  }
  // Opsets 1-6 carry an is_test flag; an interpreter for deployment always runs inference.
  context.outputs[0] = *data;
  if (context.outputs.size() > 1) {
    const DType mask_type = context.opset < 10 ? data->dtype() : DType::Bool;
    QFLOW_ASSIGN_OR_RETURN(Tensor mask, make_output(context, DType::Bool, data->shape()));
    std::memset(mask.raw_data(), 1, mask.nbytes());
    context.outputs[1] = mask_type == DType::Bool ? mask : mask.cast(mask_type);
  }
  return Status::ok();
}

Status shape_of(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* data, context.required_input(0));
  const int64_t rank = data->rank();
  int64_t start = 0, end = rank;
  if (context.opset >= 15) {
    start = context.node.attr_int("start", 0);
    end = context.node.attr_int("end", rank);
  }
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  std::vector<int64_t> dims;
  for (int64_t i = start; i < end; ++i) dims.push_back(data->dim(i));
  context.outputs[0] = Tensor::from_vector<int64_t>({static_cast<int64_t>(dims.size())}, dims);
  return Status::ok();
}

Status size_of(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* data, context.required_input(0));
  context.outputs[0] = Tensor::scalar<int64_t>(data->numel());
  return Status::ok();
}

// Cast-1 named the target type with a string.
DType dtype_from_name(const std::string& name) {
  static const std::map<std::string, DType> names = {
      {"FLOAT", DType::Float32}, {"UINT8", DType::UInt8},     {"INT8", DType::Int8},     {"UINT16", DType::UInt16},
      {"INT16", DType::Int16},   {"INT32", DType::Int32},     {"INT64", DType::Int64},   {"BOOL", DType::Bool},
      {"FLOAT16", DType::Float16}, {"DOUBLE", DType::Float64}, {"UINT32", DType::UInt32}, {"UINT64", DType::UInt64},
      {"BFLOAT16", DType::BFloat16}};
  auto it = names.find(name);
  return it == names.end() ? DType::Undefined : it->second;
}

// Cast of an integer model's accumulators and activations back to float (ConvInteger -> Cast)
// into a buffer of the run, split across the pool: the values of Tensor::cast (float32 holds
// these types exactly or rounds once), without faulting in a fresh buffer per node.
bool widens_to_float(DType dtype) {
  return dtype == DType::Int32 || dtype == DType::Int16 || dtype == DType::Int8 || dtype == DType::UInt8;
}

template <typename S>
void widen_run(const KernelContext& context, const S* src, float* dst, int64_t n) {
  context.parallel_for(n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) dst[i] = static_cast<float>(src[i]);
  });
}

Status widen_to_float(KernelContext& context, const Tensor& in) {
  QFLOW_ASSIGN_OR_RETURN(Tensor out, context.allocate(DType::Float32, in.shape()));
  float* dst = out.data<float>();
  switch (in.dtype()) {
    case DType::Int32: widen_run(context, in.data<int32_t>(), dst, in.numel()); break;
    case DType::Int16: widen_run(context, in.data<int16_t>(), dst, in.numel()); break;
    case DType::Int8: widen_run(context, in.data<int8_t>(), dst, in.numel()); break;
    default: widen_run(context, in.data<uint8_t>(), dst, in.numel()); break;
  }
  context.outputs[0] = std::move(out);
  return Status::ok();
}

// ONNX's reference implementation (and the 1.12 conformance data) narrows float to
// bfloat16 by dropping the low 16 bits rather than rounding; NaN stays a quiet NaN.
Tensor cast_any(const Tensor& in, DType target) {
  if (in.dtype() == target) return in;
  if (target != DType::BFloat16) return in.cast(target);
  const Tensor f = in.dtype() == DType::Float32 ? in : in.cast(DType::Float32);
  Tensor out(DType::BFloat16, in.shape());
  const float* src = f.data<float>();
  uint16_t* dst = out.data<uint16_t>();
  for (int64_t i = 0; i < f.numel(); ++i) {
    uint32_t bits = 0;
    std::memcpy(&bits, &src[i], sizeof bits);
    dst[i] = std::isnan(src[i]) ? static_cast<uint16_t>(((bits >> 16) & 0x8000u) | 0x7fc0u)
                                : static_cast<uint16_t>(bits >> 16);
  }
  return out;
}

// The target type is resolved once, when the node's kernel is created.
KernelFunction bind_cast(const Node& node, int64_t) {
  // A node that cannot be cast still reports a missing input first.
  auto refuse = [](Status refused) -> KernelFunction {
    return [refused](KernelContext& context) -> Status {
      if (!context.input(0)) return context.required_input(0).status();
      return refused;
    };
  };
  const Attribute* to = node.find_attribute("to");
  if (!to) return refuse(invalid_input(node.op_type() + " '" + node.name() + "': attribute 'to' is missing"));
  const DType target = to->type == AttributeType::String ? dtype_from_name(to->s)
                                                          : dtype_from_onnx(static_cast<int32_t>(to->i));
  if (target == DType::Undefined) {
    const std::string name = to->type == AttributeType::String ? to->s : std::to_string(to->i);
    return refuse(unsupported(node.op_type() + " '" + node.name() + "': cast to ONNX type " + name +
                              " is not supported (complex numbers and 8-bit floats cannot be held)"));
  }
  return [target](KernelContext& context) -> Status {
    QFLOW_ASSIGN_OR_RETURN(const Tensor* data, context.required_input(0));
    if (target == DType::Float32 && widens_to_float(data->dtype())) return widen_to_float(context, *data);
    context.outputs[0] = cast_any(*data, target);
    return Status::ok();
  };
}

Status cast_like(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* data, context.required_input(0));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* like, context.required_input(1));
  context.outputs[0] = cast_any(*data, like->dtype());
  return Status::ok();
}

Expected<Tensor> constant_value(const Node& node) {
  for (const char* name : {"sparse_value", "value_string", "value_strings"}) {
    if (node.find_attribute(name))
      return unsupported(node.op_type() + " '" + node.name() + "': attribute '" + name + "' is not supported");
  }
  if (const Attribute* a = node.find_attribute("value")) {
    if (a->type != AttributeType::Tensor || a->t.empty())
      return unsupported(node.op_type() + " '" + node.name() + "': attribute 'value' holds no numeric tensor");
    return a->t;
  } else if (const Attribute* a = node.find_attribute("value_float")) {
    return Tensor::scalar<float>(a->f);
  } else if (const Attribute* a = node.find_attribute("value_floats")) {
    return Tensor::from_vector<float>({static_cast<int64_t>(a->floats.size())}, a->floats);
  } else if (const Attribute* a = node.find_attribute("value_int")) {
    return Tensor::scalar<int64_t>(a->i);
  } else if (const Attribute* a = node.find_attribute("value_ints")) {
    return Tensor::from_vector<int64_t>({static_cast<int64_t>(a->ints.size())}, a->ints);
  } else {
    return invalid_input(node.op_type() + " '" + node.name() + "': no value attribute");
  }
}

// The value is built once, when the node's kernel is created; every run hands out the
// same storage (kernels never write to their inputs).
KernelFunction bind_constant(const Node& node, int64_t) {
  Expected<Tensor> made = constant_value(node);
  const Status status = made ? Status::ok() : made.status();
  const Tensor value = made ? *made : Tensor();
  return [status, value](KernelContext& context) -> Status {
    if (!status.is_ok()) return status;
    context.outputs[0] = value;
    return Status::ok();
  };
}

Status constant_of_shape(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* shape, context.required_input(0));
  QFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> dims, read_ints(context, *shape, "shape"));
  Tensor value = Tensor::scalar<float>(0.0f);
  if (const Attribute* a = context.node.find_attribute("value")) {
    if (a->type != AttributeType::Tensor || a->t.numel() != 1)
      return context.error("attribute 'value' must be a one-element tensor");
    value = a->t;
  }
  QFLOW_ASSIGN_OR_RETURN(Tensor out, make_output(context, value.dtype(), dims));
  const std::size_t size = dtype_size(value.dtype());
  for (int64_t i = 0; i < out.numel(); ++i)
    std::memcpy(out.raw_data() + static_cast<std::size_t>(i) * size, value.raw_data(), size);
  context.outputs[0] = std::move(out);
  return Status::ok();
}

Status range(KernelContext& context) {
  const Tensor* in[3];
  for (std::size_t i = 0; i < 3; ++i) {
    QFLOW_ASSIGN_OR_RETURN(in[i], context.required_input(i));
    if (in[i]->numel() != 1) return context.error("start, limit and delta must be scalars");
    if (in[i]->dtype() != in[0]->dtype()) return context.error("start, limit and delta must share one type");
  }
  const DType dtype = in[0]->dtype();
  Tensor out;
  Status status = dispatch_numeric(dtype, [&]<typename T>() -> Status {
    const T start = in[0]->data<T>()[0], limit = in[1]->data<T>()[0], delta = in[2]->data<T>()[0];
    if (delta == T(0)) return context.error("delta must not be zero");
    const double count = std::ceil((static_cast<double>(limit) - static_cast<double>(start)) / static_cast<double>(delta));
    if (!(count < 0x1p62)) return context.error("range holds too many elements");
    const int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
    QFLOW_ASSIGN_OR_RETURN(out, make_output(context, dtype, {n}));
    T* dst = out.data<T>();
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<T>(start + static_cast<T>(i) * delta);
    return Status::ok();
  });
  QFLOW_RETURN_IF_ERROR(status);
  context.outputs[0] = std::move(out);
  return Status::ok();
}

Status eye_like(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* data, context.required_input(0));
  if (data->rank() != 2) return context.error("input must be 2-D, got shape " + shape_to_string(data->shape()));
  DType dtype = data->dtype();
  if (const Attribute* a = context.node.find_attribute("dtype")) {
    dtype = dtype_from_onnx(static_cast<int32_t>(a->i));
    if (dtype == DType::Undefined)
      return unsupported(context.node.op_type() + " '" + context.node.name() + "': dtype " + std::to_string(a->i) +
                         " is not supported");
  }
  const int64_t k = context.node.attr_int("k", 0);
  const int64_t rows = data->dim(0), cols = data->dim(1);
  Tensor ones = Tensor::scalar<float>(1.0f).cast(dtype);
  QFLOW_ASSIGN_OR_RETURN(Tensor out, make_output(context, dtype, data->shape()));
  const std::size_t size = dtype_size(dtype);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t c = r + k;
    if (c >= 0 && c < cols)
      std::memcpy(out.raw_data() + static_cast<std::size_t>(r * cols + c) * size, ones.raw_data(), size);
  }
  context.outputs[0] = std::move(out);
  return Status::ok();
}

}  // namespace

void register_shape_kernels(KernelRegistry& registry) {
  registry.add("", "Reshape", 1, kLatestOpset, bound_kernel(bind_reshape));
  registry.add("", "Flatten", 1, kLatestOpset, bound_kernel(bind_flatten));
  registry.add_function("", "Squeeze", 1, kLatestOpset, squeeze);
  registry.add_function("", "Unsqueeze", 1, kLatestOpset, unsqueeze);
  registry.add_function("", "Identity", 1, kLatestOpset, identity);
  registry.add_function("", "Dropout", 1, kLatestOpset, dropout);
  registry.add_function("", "Shape", 1, kLatestOpset, shape_of);
  registry.add_function("", "Size", 1, kLatestOpset, size_of);
  registry.add("", "Cast", 1, kLatestOpset, bound_kernel(bind_cast));
  registry.add_function("", "CastLike", 15, kLatestOpset, cast_like);
  registry.add("", "Constant", 1, kLatestOpset, bound_kernel(bind_constant));
  registry.add_function("", "ConstantOfShape", 9, kLatestOpset, constant_of_shape);
  registry.add_function("", "Range", 11, kLatestOpset, range);
  registry.add_function("", "EyeLike", 9, kLatestOpset, eye_like);
  register_movement_kernels(registry);
  register_gather_kernels(registry);
}

}  // namespace qflow

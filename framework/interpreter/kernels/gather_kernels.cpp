// Index-driven kernels: Gather, GatherElements, GatherND, Scatter(Elements), ScatterND, OneHot, NonZero.
#include <algorithm>
#include <cstring>

#include "framework/interpreter/kernel_registry.h"
#include "framework/interpreter/kernel_util.h"
#include "framework/interpreter/kernels/shape_kernel_util.h"

namespace qflow {

namespace {

using shape_detail::make_output;

// Reads an index tensor and maps negative entries into [0, dim); refuses anything outside.
Expected<std::vector<int64_t>> read_indices(const KernelContext& context, const Tensor& indices, int64_t dim) {
  if (indices.dtype() != DType::Int32 && indices.dtype() != DType::Int64)
    return context.error("indices must be int32 or int64, got " + std::string(dtype_name(indices.dtype())));
  std::vector<int64_t> values = indices.to_int64s();
  for (int64_t& v : values) {
    if (v < -dim || v >= dim)
      return context.error("index " + std::to_string(v) + " is out of range for an axis of size " + std::to_string(dim));
    if (v < 0) v += dim;
  }
  return values;
}

Status gather(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* data, context.required_input(0));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* indices, context.required_input(1));
  auto axis_or = normalize_axis(context.node.attr_int("axis", 0), data->rank());
  if (!axis_or || data->rank() == 0) return context.error("axis is out of range for rank " + std::to_string(data->rank()));
  const std::size_t axis = static_cast<std::size_t>(*axis_or);
  const int64_t dim = data->shape()[axis];
  QFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> idx, read_indices(context, *indices, dim));
  Shape out_shape(data->shape().begin(), data->shape().begin() + static_cast<std::ptrdiff_t>(axis));
  out_shape.insert(out_shape.end(), indices->shape().begin(), indices->shape().end());
  out_shape.insert(out_shape.end(), data->shape().begin() + static_cast<std::ptrdiff_t>(axis) + 1, data->shape().end());
  QFLOW_ASSIGN_OR_RETURN(Tensor out, make_output(context, data->dtype(), out_shape));
  const int64_t outer = dims_product(data->shape(), 0, axis);
  const std::size_t inner =
      static_cast<std::size_t>(dims_product(data->shape(), axis + 1, data->shape().size())) * dtype_size(data->dtype());
  const std::size_t n = idx.size();
  if (inner > 0) {
    for (int64_t o = 0; o < outer; ++o)
      for (std::size_t j = 0; j < n; ++j)
        std::memcpy(out.raw_data() + (static_cast<std::size_t>(o) * n + j) * inner,
                    data->raw_data() + (static_cast<std::size_t>(o * dim + idx[j])) * inner, inner);
  }
  context.outputs[0] = std::move(out);
  return Status::ok();
}

// Offset into `data` for every position of `indices` with the axis coordinate replaced by
// the index found there: shared by GatherElements and ScatterElements.
Expected<std::vector<int64_t>> element_offsets(const KernelContext& context, const Tensor& data, const Tensor& indices,
                                               std::size_t axis) {
  if (indices.rank() != data.rank())
    return context.error("indices rank " + std::to_string(indices.rank()) + " differs from data rank " +
                         std::to_string(data.rank()));
  for (std::size_t d = 0; d < data.shape().size(); ++d)
    if (d != axis && indices.shape()[d] > data.shape()[d])
      return context.error("indices shape " + shape_to_string(indices.shape()) + " exceeds data shape " +
                           shape_to_string(data.shape()));
  QFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> idx, read_indices(context, indices, data.shape()[axis]));
  const std::vector<int64_t> strides = contiguous_strides(data.shape());
  const std::size_t rank = data.shape().size();
  std::vector<int64_t> offsets(idx.size());
  std::vector<int64_t> pos(rank, 0);
  for (std::size_t i = 0; i < idx.size(); ++i) {
    int64_t offset = 0;
    for (std::size_t d = 0; d < rank; ++d) offset += (d == axis ? idx[i] : pos[d]) * strides[d];
    offsets[i] = offset;
    for (std::size_t d = rank; d-- > 0;) {
      if (++pos[d] < indices.shape()[d]) break;
      pos[d] = 0;
    }
  }
  return offsets;
}

Status gather_elements(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* data, context.required_input(0));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* indices, context.required_input(1));
  auto axis_or = normalize_axis(context.node.attr_int("axis", 0), data->rank());
  if (!axis_or || data->rank() == 0) return context.error("axis is out of range for rank " + std::to_string(data->rank()));
  QFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> offsets,
                         element_offsets(context, *data, *indices, static_cast<std::size_t>(*axis_or)));
  QFLOW_ASSIGN_OR_RETURN(Tensor out, make_output(context, data->dtype(), indices->shape()));
  const std::size_t size = dtype_size(data->dtype());
  for (std::size_t i = 0; i < offsets.size(); ++i)
    std::memcpy(out.raw_data() + i * size, data->raw_data() + static_cast<std::size_t>(offsets[i]) * size, size);
  context.outputs[0] = std::move(out);
  return Status::ok();
}

// Slices selected by GatherND/ScatterND index tuples: the element offset of each slice in
// `data` and the slice length.
struct NdSlices {
  std::vector<int64_t> offsets;
  int64_t slice = 1;
  Shape tuple_shape;  // indices.shape[:-1]
};

Expected<NdSlices> nd_slices(const KernelContext& context, const Tensor& data, const Tensor& indices,
                             int64_t batch_dims) {
  const int64_t r = data.rank(), q = indices.rank();
  if (q < 1) return context.error("indices must have rank 1 or more");
  const int64_t k = indices.shape().back();
  if (batch_dims < 0 || batch_dims >= std::min(r, q) || batch_dims + k > r)
    return context.error("indices shape " + shape_to_string(indices.shape()) + " with batch_dims " +
                         std::to_string(batch_dims) + " does not fit data shape " + shape_to_string(data.shape()));
  const std::size_t b = static_cast<std::size_t>(batch_dims);
  for (std::size_t d = 0; d < b; ++d)
    if (indices.shape()[d] != data.shape()[d]) return context.error("batch dimensions of data and indices differ");
  if (indices.dtype() != DType::Int64 && indices.dtype() != DType::Int32)
    return context.error("indices must be int64");
  const std::vector<int64_t> idx = indices.to_int64s();
  const std::vector<int64_t> strides = contiguous_strides(data.shape());
  NdSlices out;
  out.tuple_shape.assign(indices.shape().begin(), indices.shape().end() - 1);
  out.slice = dims_product(data.shape(), b + static_cast<std::size_t>(k), data.shape().size());
  const int64_t tuples = shape_numel(out.tuple_shape);
  const int64_t batches = dims_product(data.shape(), 0, b);
  const int64_t per_batch = batches == 0 ? 0 : tuples / batches;
  const int64_t batch_stride = dims_product(data.shape(), b, data.shape().size());
  out.offsets.reserve(static_cast<std::size_t>(tuples));
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t offset = per_batch == 0 ? 0 : (t / per_batch) * batch_stride;
    for (int64_t j = 0; j < k; ++j) {
      const std::size_t d = b + static_cast<std::size_t>(j);
      int64_t v = idx[static_cast<std::size_t>(t * k + j)];
      const int64_t dim = data.shape()[d];
      if (v < -dim || v >= dim)
        return context.error("index " + std::to_string(v) + " is out of range for an axis of size " + std::to_string(dim));
      if (v < 0) v += dim;
      offset += v * strides[d];
    }
    out.offsets.push_back(offset);
  }
  return out;
}

Status gather_nd(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* data, context.required_input(0));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* indices, context.required_input(1));
  const int64_t batch_dims = context.opset >= 12 ? context.node.attr_int("batch_dims", 0) : 0;
  QFLOW_ASSIGN_OR_RETURN(NdSlices slices, nd_slices(context, *data, *indices, batch_dims));
  Shape out_shape = slices.tuple_shape;
  const int64_t k = indices->shape().back();
  out_shape.insert(out_shape.end(), data->shape().begin() + batch_dims + k, data->shape().end());
  QFLOW_ASSIGN_OR_RETURN(Tensor out, make_output(context, data->dtype(), out_shape));
  const std::size_t bytes = static_cast<std::size_t>(slices.slice) * dtype_size(data->dtype());
  const std::size_t size = dtype_size(data->dtype());
  if (bytes > 0) {
    for (std::size_t t = 0; t < slices.offsets.size(); ++t)
      std::memcpy(out.raw_data() + t * bytes, data->raw_data() + static_cast<std::size_t>(slices.offsets[t]) * size,
                  bytes);
  }
  context.outputs[0] = std::move(out);
  return Status::ok();
}

enum class Reduction { None, Add, Mul, Max, Min };

Expected<Reduction> reduction_of(const KernelContext& context) {
  const std::string name = context.node.attr_string("reduction", "none");
  if (name == "none") return Reduction::None;
  if (name == "add") return Reduction::Add;
  if (name == "mul") return Reduction::Mul;
  if (name == "max") return Reduction::Max;
  if (name == "min") return Reduction::Min;
  return context.error("reduction '" + name + "' is not none, add, mul, max or min");
}

// out[offsets[i] + j] (op)= updates[i * slice + j], in index order as the ONNX reference does.
Status scatter_into(const KernelContext& context, Tensor& out, const Tensor& updates,
                    const std::vector<int64_t>& offsets, int64_t slice, Reduction reduction) {
  if (updates.dtype() != out.dtype()) return context.error("updates and data types differ");
  if (reduction == Reduction::None) {
    const std::size_t bytes = static_cast<std::size_t>(slice) * dtype_size(out.dtype());
    for (std::size_t i = 0; i < offsets.size(); ++i)
      std::memcpy(out.raw_data() + static_cast<std::size_t>(offsets[i]) * dtype_size(out.dtype()),
                  updates.raw_data() + i * bytes, bytes);
    return Status::ok();
  }
  Status status = dispatch_numeric(out.dtype(), [&]<typename T>() -> Status {
    T* dst = out.data<T>();
    const T* src = updates.data<T>();
    for (std::size_t i = 0; i < offsets.size(); ++i) {
      for (int64_t j = 0; j < slice; ++j) {
        T& d = dst[offsets[i] + j];
        const T u = src[static_cast<int64_t>(i) * slice + j];
        switch (reduction) {
          case Reduction::Add: d = static_cast<T>(d + u); break;
          case Reduction::Mul: d = static_cast<T>(d * u); break;
          case Reduction::Max: d = std::max(d, u); break;
          case Reduction::Min: d = std::min(d, u); break;
          case Reduction::None: d = u; break;
        }
      }
    }
    return Status::ok();
  });
  return status.with_context(context.node.op_type() + " '" + context.node.name() + "'");
}

Status scatter_elements(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* data, context.required_input(0));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* indices, context.required_input(1));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* updates, context.required_input(2));
  if (updates->shape() != indices->shape())
    return context.error("updates shape " + shape_to_string(updates->shape()) + " differs from indices shape " +
                         shape_to_string(indices->shape()));
  auto axis_or = normalize_axis(context.node.attr_int("axis", 0), data->rank());
  if (!axis_or || data->rank() == 0) return context.error("axis is out of range for rank " + std::to_string(data->rank()));
  QFLOW_ASSIGN_OR_RETURN(Reduction reduction, reduction_of(context));
  QFLOW_ASSIGN_OR_RETURN(std::vector<int64_t> offsets,
                         element_offsets(context, *data, *indices, static_cast<std::size_t>(*axis_or)));
  Tensor out = data->clone();
  QFLOW_RETURN_IF_ERROR(scatter_into(context, out, *updates, offsets, 1, reduction));
  context.outputs[0] = std::move(out);
  return Status::ok();
}

Status scatter_nd(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* data, context.required_input(0));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* indices, context.required_input(1));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* updates, context.required_input(2));
  QFLOW_ASSIGN_OR_RETURN(Reduction reduction, reduction_of(context));
  QFLOW_ASSIGN_OR_RETURN(NdSlices slices, nd_slices(context, *data, *indices, 0));
  Shape expected = slices.tuple_shape;
  expected.insert(expected.end(), data->shape().begin() + indices->shape().back(), data->shape().end());
  if (updates->shape() != expected)
    return context.error("updates shape " + shape_to_string(updates->shape()) + " should be " +
                         shape_to_string(expected));
  Tensor out = data->clone();
  QFLOW_RETURN_IF_ERROR(scatter_into(context, out, *updates, slices.offsets, slices.slice, reduction));
  context.outputs[0] = std::move(out);
  return Status::ok();
}

Status one_hot(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* indices, context.required_input(0));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* depth_input, context.required_input(1));
  QFLOW_ASSIGN_OR_RETURN(const Tensor* values, context.required_input(2));
  if (depth_input->numel() != 1) return context.error("depth must hold one value");
  if (values->numel() != 2) return context.error("values must hold [off_value, on_value]");
  const double depth_value = depth_input->to_doubles()[0];
  if (!(depth_value >= 1.0 && depth_value < 0x1p62)) return context.error("depth must be a positive size");
  const int64_t depth = static_cast<int64_t>(depth_value);
  auto axis_or = normalize_axis(context.node.attr_int("axis", -1), indices->rank() + 1);
  if (!axis_or) return context.error(axis_or.status().message());
  const std::size_t axis = static_cast<std::size_t>(*axis_or);
  Shape out_shape = indices->shape();
  out_shape.insert(out_shape.begin() + static_cast<std::ptrdiff_t>(axis), depth);
  QFLOW_ASSIGN_OR_RETURN(Tensor out, make_output(context, values->dtype(), out_shape));
  const std::size_t size = dtype_size(values->dtype());
  const std::byte* off = values->raw_data();
  const std::byte* on = values->raw_data() + size;
  for (int64_t i = 0; i < out.numel(); ++i) std::memcpy(out.raw_data() + static_cast<std::size_t>(i) * size, off, size);
  const int64_t outer = dims_product(indices->shape(), 0, axis);
  const int64_t inner = dims_product(indices->shape(), axis, indices->shape().size());
  const std::vector<double> idx = indices->to_doubles();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      int64_t v = static_cast<int64_t>(idx[static_cast<std::size_t>(o * inner + i)]);
      if (v < 0) v += depth;
      if (v < 0 || v >= depth) continue;
      std::memcpy(out.raw_data() + static_cast<std::size_t>((o * depth + v) * inner + i) * size, on, size);
    }
  }
  context.outputs[0] = std::move(out);
  return Status::ok();
}

Status non_zero(KernelContext& context) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* data, context.required_input(0));
  std::vector<int64_t> hits;
  const int64_t n = data->numel();
  if (data->dtype() == DType::Float16 || data->dtype() == DType::BFloat16) {
    // Only the sign bit set is -0, which counts as zero.
    const uint16_t* p = data->data<uint16_t>();
    for (int64_t i = 0; i < n; ++i)
      if (p[i] & 0x7fff) hits.push_back(i);
  } else {
    QFLOW_RETURN_IF_ERROR(dispatch_all(data->dtype(), [&]<typename T>() -> Status {
      const T* p = data->data<T>();
      for (int64_t i = 0; i < n; ++i)
        if (p[i] != T(0)) hits.push_back(i);
      return Status::ok();
    }));
  }
  const std::size_t rank = data->shape().size();
  const int64_t count = static_cast<int64_t>(hits.size());
  Tensor out(DType::Int64, {static_cast<int64_t>(rank), count});
  int64_t* dst = out.data<int64_t>();
  for (int64_t h = 0; h < count; ++h) {
    int64_t rest = hits[static_cast<std::size_t>(h)];
    for (std::size_t d = rank; d-- > 0;) {
      dst[static_cast<int64_t>(d) * count + h] = rest % data->shape()[d];
      rest /= data->shape()[d];
    }
  }
  context.outputs[0] = std::move(out);
  return Status::ok();
}

}  // namespace

void register_gather_kernels(KernelRegistry& registry) {
  registry.add_function("", "Gather", 1, kLatestOpset, gather);
  registry.add_function("", "GatherElements", 11, kLatestOpset, gather_elements);
  registry.add_function("", "GatherND", 11, kLatestOpset, gather_nd);
  registry.add_function("", "Scatter", 9, 10, scatter_elements);
  registry.add_function("", "ScatterElements", 11, kLatestOpset, scatter_elements);
  registry.add_function("", "ScatterND", 11, kLatestOpset, scatter_nd);
  registry.add_function("", "OneHot", 9, kLatestOpset, one_hot);
  registry.add_function("", "NonZero", 9, kLatestOpset, non_zero);
}

}  // namespace qflow

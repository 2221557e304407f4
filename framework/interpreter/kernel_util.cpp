// Axis and broadcasting helpers shared by kernels.
#include "framework/interpreter/kernel_util.h"

#include <algorithm>

namespace qflow {

int64_t dims_product(const Shape& shape, std::size_t begin, std::size_t end) {
  int64_t n = 1;
  for (std::size_t i = begin; i < end && i < shape.size(); ++i) n *= shape[i];
  return n;
}

Status check_float_input(const KernelContext& context, const Tensor& x) {
  if (x.dtype() != DType::Float32 && x.dtype() != DType::Float64)
    return unsupported(context.node.op_type() + " '" + context.node.name() + "': element type " +
                       std::string(dtype_name(x.dtype())) + " is not supported (float or double expected)");
  return Status::ok();
}

Expected<int64_t> normalize_axis(int64_t axis, int64_t rank) {
  const int64_t lo = -std::max<int64_t>(rank, 1), hi = std::max<int64_t>(rank, 1) - 1;
  if (axis < lo || axis > hi)
    return invalid_input("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

Expected<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  const std::size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da == db || db == 1) {
      out[i] = da;
    } else if (da == 1) {
      out[i] = db;
    } else {
      return invalid_input("shapes " + shape_to_string(a) + " and " + shape_to_string(b) + " cannot be broadcast");
    }
  }
  return out;
}

Expected<Shape> broadcast_shapes(const std::vector<Shape>& shapes) {
  Shape out;
  for (const Shape& s : shapes) {
    QFLOW_ASSIGN_OR_RETURN(out, broadcast_shapes(out, s));
  }
  return out;
}

std::vector<int64_t> contiguous_strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (std::size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  return strides;
}

std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out) {
  std::vector<int64_t> strides(out.size(), 0);
  const std::vector<int64_t> in_strides = contiguous_strides(in);
  const std::size_t offset = out.size() - in.size();
  for (std::size_t i = 0; i < in.size(); ++i) strides[offset + i] = in[i] == 1 ? 0 : in_strides[i];
  return strides;
}

}  // namespace qflow

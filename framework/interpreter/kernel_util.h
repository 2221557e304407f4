// Helpers shared by kernels: axis normalisation, broadcasting, dtype dispatch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "framework/interpreter/kernel.h"

namespace qflow {

// Maps a possibly negative axis into [0, rank); error when out of range.
Expected<int64_t> normalize_axis(int64_t axis, int64_t rank);

// The product of shape[begin, end) (end clamped to the rank; 1 when empty).
int64_t dims_product(const Shape& shape, std::size_t begin, std::size_t end);

// An error naming the node unless x holds float or double values.
Status check_float_input(const KernelContext& context, const Tensor& x);

// Numpy multidirectional broadcasting of two / many shapes.
Expected<Shape> broadcast_shapes(const Shape& a, const Shape& b);
Expected<Shape> broadcast_shapes(const std::vector<Shape>& shapes);

// Row-major element strides of a shape.
std::vector<int64_t> contiguous_strides(const Shape& shape);
// Strides (in elements of `in`) to walk `in` while iterating over `out` in row-major order;
// broadcast dimensions get stride 0. `in` must be broadcastable to `out`.
std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out);

// Calls f(out_index, a_index, b_index) for every element of `out`, where a and b are
// broadcast to `out`. Fast paths for equal shapes and scalars.
template <typename F>
void for_each_broadcast(const Shape& out, const Shape& a, const Shape& b, F&& f) {
  const int64_t n = shape_numel(out);
  if (n <= 0) return;
  if (a == out && b == out) {
    for (int64_t i = 0; i < n; ++i) f(i, i, i);
    return;
  }
  const int64_t na = shape_numel(a), nb = shape_numel(b);
  if (a == out && nb == 1) {
    for (int64_t i = 0; i < n; ++i) f(i, i, int64_t{0});
    return;
  }
  if (na == 1 && b == out) {
    for (int64_t i = 0; i < n; ++i) f(i, int64_t{0}, i);
    return;
  }
  const std::vector<int64_t> sa = broadcast_strides(a, out), sb = broadcast_strides(b, out);
  const std::size_t rank = out.size();
  std::vector<int64_t> index(rank, 0);
  int64_t ia = 0, ib = 0;
  for (int64_t i = 0; i < n; ++i) {
    f(i, ia, ib);
    for (std::size_t d = rank; d-- > 0;) {
      ++index[d];
      ia += sa[d];
      ib += sb[d];
      if (index[d] < out[d]) break;
      ia -= sa[d] * out[d];
      ib -= sb[d] * out[d];
      index[d] = 0;
    }
  }
}

// Calls body.template operator()<T>() with T the C++ type of `dtype`; returns an
// Unsupported status for dtypes outside the listed family.
#define QFLOW_DISPATCH_CASE(DT, T) \
  case DType::DT:                  \
    return body.template operator()<T>();

template <typename Body>
Status dispatch_numeric(DType dtype, Body&& body) {
  switch (dtype) {
    QFLOW_DISPATCH_CASE(Float32, float)
    QFLOW_DISPATCH_CASE(Float64, double)
    QFLOW_DISPATCH_CASE(Int8, int8_t)
    QFLOW_DISPATCH_CASE(UInt8, uint8_t)
    QFLOW_DISPATCH_CASE(Int16, int16_t)
    QFLOW_DISPATCH_CASE(UInt16, uint16_t)
    QFLOW_DISPATCH_CASE(Int32, int32_t)
    QFLOW_DISPATCH_CASE(UInt32, uint32_t)
    QFLOW_DISPATCH_CASE(Int64, int64_t)
    QFLOW_DISPATCH_CASE(UInt64, uint64_t)
    default:
      return unsupported(std::string("element type ") + std::string(dtype_name(dtype)) + " is not supported here");
  }
}

// Numeric types plus Bool: for data movement ops (Concat, Gather, Transpose, ...).
template <typename Body>
Status dispatch_all(DType dtype, Body&& body) {
  if (dtype == DType::Bool) return body.template operator()<bool>();
  if (dtype == DType::Float16 || dtype == DType::BFloat16) return body.template operator()<uint16_t>();
  return dispatch_numeric(dtype, std::forward<Body>(body));
}

template <typename Body>
Status dispatch_float(DType dtype, Body&& body) {
  switch (dtype) {
    QFLOW_DISPATCH_CASE(Float32, float)
    QFLOW_DISPATCH_CASE(Float64, double)
    default:
      return unsupported(std::string("element type ") + std::string(dtype_name(dtype)) + " is not supported here (float or double expected)");
  }
}

#undef QFLOW_DISPATCH_CASE

}  // namespace qflow

// Row-major Eigen views over raw tensor buffers, for kernels that hand their products to Eigen.
#pragma once

// Kernels split work themselves (deterministically); Eigen must never spawn its own threads.
#ifndef EIGEN_DONT_PARALLELIZE
#define EIGEN_DONT_PARALLELIZE
#endif
#include <Eigen/Core>

namespace qflow {

template <typename T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
// Views with an explicit row pitch, so a block of columns of a wider buffer can be addressed.
template <typename T>
using MatrixView = Eigen::Map<RowMatrix<T>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <typename T>
using ConstMatrixView = Eigen::Map<const RowMatrix<T>, Eigen::Unaligned, Eigen::OuterStride<>>;

template <typename T>
MatrixView<T> matrix_view(T* data, int64_t rows, int64_t cols, int64_t pitch) {
  return MatrixView<T>(data, rows, cols, Eigen::OuterStride<>(pitch));
}
template <typename T>
ConstMatrixView<T> matrix_view(const T* data, int64_t rows, int64_t cols, int64_t pitch) {
  return ConstMatrixView<T>(data, rows, cols, Eigen::OuterStride<>(pitch));
}

}  // namespace qflow

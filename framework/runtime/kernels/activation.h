// Activation functions shared by the element-wise kernels and the Conv/Gemm epilogue, so an
// activation fused into its producer gives bit-identical results to the separate node.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>

#include "framework/runtime/kernel.h"

namespace qflow::activation {

template <typename T>
T relu(T v) {
  return v > 0 ? v : T{0};
}

template <typename T>
T sigmoid(T v) {
  // Split by sign so exp never overflows.
  if (v >= 0) return T(1) / (T(1) + std::exp(-v));
  const T e = std::exp(v);
  return e / (T(1) + e);
}

template <typename T>
T hard_sigmoid(T v, double alpha, double beta) {
  return static_cast<T>(std::clamp(alpha * v + beta, 0.0, 1.0));
}

template <typename T>
T hard_swish(T v) {
  return v * std::clamp(v / T(6) + T(0.5), T(0), T(1));
}

// min(max(v, lo), hi): when lo > hi every element becomes hi, as numpy.clip does. NaN
// fails both comparisons and stays NaN. Written with std::max/std::min (whose operand
// order keeps exactly these results) so the loop becomes vector max/min instructions.
template <typename T>
T clip(T v, T lo, T hi) {
  return std::min(std::max(v, lo), hi);
}

// Applies `epilogue` to n floats in place.
inline void apply(const Epilogue& epilogue, float* data, int64_t n) {
  switch (epilogue.kind) {
    case Epilogue::Kind::None: return;
    case Epilogue::Kind::Relu:
      for (int64_t i = 0; i < n; ++i) data[i] = relu(data[i]);
      return;
    case Epilogue::Kind::Clip:
      for (int64_t i = 0; i < n; ++i) data[i] = clip(data[i], epilogue.lo, epilogue.hi);
      return;
    case Epilogue::Kind::Sigmoid:
      for (int64_t i = 0; i < n; ++i) data[i] = sigmoid(data[i]);
      return;
    case Epilogue::Kind::HardSigmoid:
      for (int64_t i = 0; i < n; ++i) data[i] = hard_sigmoid(data[i], epilogue.alpha, epilogue.beta);
      return;
    case Epilogue::Kind::HardSwish:
      for (int64_t i = 0; i < n; ++i) data[i] = hard_swish(data[i]);
      return;
  }
}

}  // namespace qflow::activation

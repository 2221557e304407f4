// Activation functions shared by the element-wise kernels and the Conv/Gemm epilogue, and the
// epilogue program itself, so nodes fused into their producer give bit-identical results to
// the separate nodes.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>

#include "framework/interpreter/kernel.h"

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

// min(max(v, lo), hi): when lo > hi every element becomes hi, as numpy.clip does. NaN
// fails both comparisons and stays NaN. Written with std::max/std::min (whose operand
// order keeps exactly these results) so the loop becomes vector max/min instructions.
template <typename T>
T clip(T v, T lo, T hi) {
  return std::min(std::max(v, lo), hi);
}

// In the input's type, as ONNX Runtime and the device runtime's CPU ops compute it.
template <typename T>
T hard_sigmoid(T v, T alpha, T beta) {
  return clip(alpha * v + beta, T(0), T(1));
}

template <typename T>
T hard_swish(T v) {
  return v * std::clamp(v / T(6) + T(0.5), T(0), T(1));
}

// QuantizeLinear then DequantizeLinear of v (scale s, integer range minus the zero point
// [lo, hi]): QuantizeLinear rounds v / s half to even, NaN to 0, and saturates; clipping
// first gives the same integer, as lo and hi are integers. DequantizeLinear's (q - z) * s
// is that integer times s; + 0.0f makes a -0 the +0 the integer had.
inline float fake_quant(float v, float s, float lo, float hi) {
  float t = v / s;
  t = t == t ? clip(t, lo, hi) : 0.0f;
  return (std::nearbyint(t) + 0.0f) * s;
}

// Applies one stage to n floats of output channel `channel` in place. Each loop is the
// expression of the node's own kernel (binary kernels compute `a op b` in float, BatchNorm
// `(x - mean) * k + b`), and this header is never compiled inside an FMA-enabled function,
// so no multiply-add gets contracted.
inline void apply_stage(const EpilogueStage& stage, float* data, int64_t n, int64_t channel) {
  using Kind = EpilogueStage::Kind;
  const float c = stage.constant;
  switch (stage.kind) {
    case Kind::Relu:
      for (int64_t i = 0; i < n; ++i) data[i] = relu(data[i]);
      return;
    case Kind::Clip:
      for (int64_t i = 0; i < n; ++i) data[i] = clip(data[i], stage.lo, stage.hi);
      return;
    case Kind::Sigmoid:
      for (int64_t i = 0; i < n; ++i) data[i] = sigmoid(data[i]);
      return;
    case Kind::HardSigmoid: {
      const auto alpha = static_cast<float>(stage.alpha), beta = static_cast<float>(stage.beta);
      for (int64_t i = 0; i < n; ++i) data[i] = hard_sigmoid(data[i], alpha, beta);
      return;
    }
    case Kind::HardSwish:
      for (int64_t i = 0; i < n; ++i) data[i] = hard_swish(data[i]);
      return;
    case Kind::BatchNorm: {
      const std::size_t p = static_cast<std::size_t>(channel);
      const float m = stage.mean[p], k = stage.factor[p], b = stage.bias[p];
      for (int64_t i = 0; i < n; ++i) data[i] = (data[i] - m) * k + b;
      return;
    }
    case Kind::Add:
      for (int64_t i = 0; i < n; ++i) data[i] = data[i] + c;
      return;
    case Kind::Mul:
      for (int64_t i = 0; i < n; ++i) data[i] = data[i] * c;
      return;
    case Kind::Sub:
      for (int64_t i = 0; i < n; ++i) data[i] = data[i] - c;
      return;
    case Kind::SubFrom:
      for (int64_t i = 0; i < n; ++i) data[i] = c - data[i];
      return;
    case Kind::Div:
      for (int64_t i = 0; i < n; ++i) data[i] = data[i] / c;
      return;
    case Kind::DivInto:
      for (int64_t i = 0; i < n; ++i) data[i] = c / data[i];
      return;
    case Kind::HardSwishDiamond: {
      const float lo = stage.lo, hi = stage.hi, d = stage.divisor;
      for (int64_t i = 0; i < n; ++i) {
        const float v = data[i];
        const float gate = clip(v + c, lo, hi);
        const float product = v * gate;
        data[i] = product / d;
      }
      return;
    }
    case Kind::HardSigmoidProduct: {
      const auto alpha = static_cast<float>(stage.alpha), beta = static_cast<float>(stage.beta);
      for (int64_t i = 0; i < n; ++i) data[i] = data[i] * hard_sigmoid(data[i], alpha, beta);
      return;
    }
    case Kind::HardSigmoidProductQuantized: {
      const auto alpha = static_cast<float>(stage.alpha), beta = static_cast<float>(stage.beta);
      for (int64_t i = 0; i < n; ++i) data[i] = data[i] * fake_quant(hard_sigmoid(data[i], alpha, beta), c, stage.lo, stage.hi);
      return;
    }
    case Kind::FakeQuant:
      for (int64_t i = 0; i < n; ++i) data[i] = fake_quant(data[i], c, stage.lo, stage.hi);
      return;
  }
}

// For each of `rows` rows of n floats (row r at data + r * ld): adds bias[r] (when given), then
// runs the program (when given) as output channel channel + r (channel < 0: no channel axis,
// every row -1). Vectorized for the CPU (activation_loops.cpp).
void finish_rows(const Epilogue* epilogue, float* data, int64_t rows, int64_t n, int64_t ld, int64_t channel,
                 const float* bias);
// out[i] = clip(in[i], lo, hi) for n floats, vectorized for the CPU.
void clip_floats(const float* in, float* out, int64_t n, float lo, float hi);

}  // namespace qflow::activation

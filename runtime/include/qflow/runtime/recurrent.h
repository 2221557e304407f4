// What the recurrent operators (RNN, GRU, LSTM) define once for every implementation: the
// activations (names, attribute use, defaults, formulas) and where layout 0 or 1 puts the
// rows of X, the states and Y. Shared by the interpreter's kernels and the runtime's
// cpu.LSTM so both read the attributes and compute the same way.
#pragma once

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace qflow::rnn {

enum class ActivationKind {
  Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, Softplus
};

struct Activation {
  ActivationKind kind = ActivationKind::Tanh;
  float alpha = 0.0f;
  float beta = 0.0f;

  template <typename T>
  T operator()(T x) const {
    const T a = static_cast<T>(alpha), b = static_cast<T>(beta);
    switch (kind) {
      case ActivationKind::Relu: return x > 0 ? x : T(0);
      case ActivationKind::Tanh: return std::tanh(x);
      case ActivationKind::Sigmoid: {
        // Split by sign so that exp never overflows.
        if (x >= 0) return T(1) / (T(1) + std::exp(-x));
        const T e = std::exp(x);
        return e / (T(1) + e);
      }
      case ActivationKind::Affine: return a * x + b;
      case ActivationKind::LeakyRelu: return x >= 0 ? x : a * x;
      // The recurrent operators' own definition: x >= alpha keeps x (the ThresholdedRelu
      // operator uses >).
      case ActivationKind::ThresholdedRelu: return x >= a ? x : T(0);
      case ActivationKind::ScaledTanh: return a * std::tanh(b * x);
      case ActivationKind::HardSigmoid: return std::min(std::max(a * x + b, T(0)), T(1));
      case ActivationKind::Elu: return x >= 0 ? x : a * (std::exp(x) - T(1));
      case ActivationKind::Softsign: return x / (T(1) + std::fabs(x));
      // log(1 + e^x), written so that e^x never overflows.
      case ActivationKind::Softplus: return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
    }
    return x;
  }
};

// How an activation name reads activation_alpha / activation_beta, and its defaults (those of
// the ONNX operator of the same name; ScaledTanh's are ONNX Runtime's).
struct ActivationSpec {
  const char* name;  // lower case
  ActivationKind kind;
  bool uses_alpha;
  bool uses_beta;
  float alpha;
  float beta;
};

inline constexpr ActivationSpec kActivationSpecs[] = {
    {"relu", ActivationKind::Relu, false, false, 0.0f, 0.0f},
    {"tanh", ActivationKind::Tanh, false, false, 0.0f, 0.0f},
    {"sigmoid", ActivationKind::Sigmoid, false, false, 0.0f, 0.0f},
    {"affine", ActivationKind::Affine, true, true, 1.0f, 0.0f},
    {"leakyrelu", ActivationKind::LeakyRelu, true, false, 0.01f, 0.0f},
    {"thresholdedrelu", ActivationKind::ThresholdedRelu, true, false, 1.0f, 0.0f},
    {"scaledtanh", ActivationKind::ScaledTanh, true, true, 1.0f, 1.0f},
    {"hardsigmoid", ActivationKind::HardSigmoid, true, true, 0.2f, 0.5f},
    {"elu", ActivationKind::Elu, true, false, 1.0f, 0.0f},
    {"softsign", ActivationKind::Softsign, false, false, 0.0f, 0.0f},
    {"softplus", ActivationKind::Softplus, false, false, 0.0f, 0.0f},
};

// The spec of an activation name in any case ("Sigmoid", "tanh"), or null.
inline const ActivationSpec* find_activation(std::string name) {
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const ActivationSpec& spec : kActivationSpecs)
    if (name == spec.name) return &spec;
  return nullptr;
}

// Extents and the layout-dependent positions of rows in X, the states and Y.
struct Dims {
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, directions = 1, layout = 0;

  int64_t x_row(int64_t t, int64_t b) const { return layout == 0 ? t * batch + b : b * seq + t; }
  int64_t y_offset(int64_t t, int64_t d, int64_t b) const {
    return (layout == 0 ? (t * directions + d) * batch + b : (b * seq + t) * directions + d) * hidden;
  }
  int64_t state_offset(int64_t d, int64_t b) const {
    return (layout == 0 ? d * batch + b : b * directions + d) * hidden;
  }
  std::vector<int64_t> y_shape() const {
    return layout == 0 ? std::vector<int64_t>{seq, directions, batch, hidden}
                       : std::vector<int64_t>{batch, seq, directions, hidden};
  }
  std::vector<int64_t> state_shape() const {
    return layout == 0 ? std::vector<int64_t>{directions, batch, hidden} : std::vector<int64_t>{batch, directions, hidden};
  }
};

}  // namespace qflow::rnn

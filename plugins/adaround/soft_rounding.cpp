// Soft rounding: full-batch Adam on the rectified-sigmoid rounding variables of one layer.
#include "soft_rounding.h"

#include <algorithm>
#include <cmath>

namespace qflow::adaround {

namespace {

constexpr double kZeta = 1.1;
constexpr double kGamma = -0.1;

// Rows of `m` times a per-group matrix of `per_group` (transposed when asked).
Matrix times_group(const LayerProblem& layer, const std::vector<Matrix>& per_group, const Matrix& m, bool transposed) {
  Matrix out(m.rows(), m.cols());
  for (Eigen::Index r = 0; r < m.rows(); ++r) {
    const Matrix& g = per_group[static_cast<std::size_t>(layer.group_of[static_cast<std::size_t>(r)])];
    if (transposed) out.row(r) = m.row(r) * g.transpose();
    else out.row(r) = m.row(r) * g;
  }
  return out;
}

// Rows w_r C^T: what the gradient of the error subtracts, w~_r G - w_r C^T being its half.
// With float inputs C = G and the gradient is (W~ - W) G.
Matrix target_of(const LayerProblem& layer) {
  return layer.cross.empty() ? times_group(layer, layer.grams, layer.weight, false)
                             : times_group(layer, layer.cross, layer.weight, true);
}

Matrix weights_of(const LayerProblem& layer, const Matrix& integers) {
  Matrix w(integers.rows(), integers.cols());
  for (Eigen::Index r = 0; r < w.rows(); ++r) w.row(r) = integers.row(r) * layer.scale[static_cast<std::size_t>(r)];
  return w;
}

double rectified_sigmoid(double v) { return std::clamp(1.0 / (1.0 + std::exp(-v)) * (kZeta - kGamma) + kGamma, 0.0, 1.0); }

}  // namespace

Matrix nearest_integers(const LayerProblem& layer) {
  Matrix q(layer.weight.rows(), layer.weight.cols());
  for (Eigen::Index r = 0; r < q.rows(); ++r)
    for (Eigen::Index k = 0; k < q.cols(); ++k)
      q(r, k) = std::clamp(std::nearbyint(layer.weight(r, k) / layer.scale[static_cast<std::size_t>(r)]), -layer.qmax, layer.qmax);
  return q;
}

double reconstruction_error(const LayerProblem& layer, const Matrix& integers) {
  const Matrix rounded = weights_of(layer, integers);
  if (layer.cross.empty()) {
    const Matrix delta = rounded - layer.weight;
    return times_group(layer, layer.grams, delta, false).cwiseProduct(delta).sum();
  }
  return times_group(layer, layer.grams, rounded, false).cwiseProduct(rounded).sum() -
         2.0 * target_of(layer).cwiseProduct(rounded).sum();
}

Matrix learned_integers(const LayerProblem& layer, const SoftRoundingOptions& options) {
  const Eigen::Index rows = layer.weight.rows(), cols = layer.weight.cols();
  Matrix floor_q(rows, cols), v(rows, cols);
  for (Eigen::Index r = 0; r < rows; ++r)
    for (Eigen::Index k = 0; k < cols; ++k) {
      const double x = layer.weight(r, k) / layer.scale[static_cast<std::size_t>(r)];
      floor_q(r, k) = std::floor(x);
      // h(V) = x - floor(x) at the start: the soft weights begin at the float weights.
      const double rest = std::clamp(x - floor_q(r, k), 1e-4, 1.0 - 1e-4);
      v(r, k) = -std::log((kZeta - kGamma) / (rest - kGamma) - 1.0);
    }
  Matrix m = Matrix::Zero(rows, cols), second = Matrix::Zero(rows, cols);
  constexpr double kBeta1 = 0.9, kBeta2 = 0.999, kEpsilon = 1e-8;
  const auto warmup_end = static_cast<int64_t>(options.warmup * static_cast<double>(options.iterations));
  Matrix h(rows, cols), soft(rows, cols), grad(rows, cols);
  const Matrix target = target_of(layer);
  for (int64_t it = 0; it < options.iterations; ++it) {
    for (Eigen::Index r = 0; r < rows; ++r)
      for (Eigen::Index k = 0; k < cols; ++k) {
        h(r, k) = rectified_sigmoid(v(r, k));
        const double q = floor_q(r, k) + h(r, k);
        // Clamped to the grid: a weight pushed past qmax moves no further.
        soft(r, k) = std::clamp(q, -layer.qmax, layer.qmax) * layer.scale[static_cast<std::size_t>(r)];
      }
    const Matrix rec = times_group(layer, layer.grams, soft, false) - target;  // d rec / d W~ = 2 rec
    const bool regularise = it >= warmup_end;
    const double progress = regularise && options.iterations > warmup_end
                                ? static_cast<double>(it - warmup_end) / static_cast<double>(options.iterations - warmup_end)
                                : 0.0;
    const double beta = options.beta_end + (options.beta_start - options.beta_end) * (1.0 - progress);
    for (Eigen::Index r = 0; r < rows; ++r)
      for (Eigen::Index k = 0; k < cols; ++k) {
        const double hv = h(r, k);
        if (hv <= 0.0 || hv >= 1.0) {  // the clamp of the rectified sigmoid stops the gradient
          grad(r, k) = 0.0;
          continue;
        }
        const double q = floor_q(r, k) + hv;
        double d_h = (q > -layer.qmax && q < layer.qmax) ? 2.0 * rec(r, k) * layer.scale[static_cast<std::size_t>(r)] : 0.0;
        if (regularise) {
          const double u = 2.0 * hv - 1.0;
          // d/dh of lambda * (1 - |2h - 1|^beta)
          d_h += options.lambda * -beta * std::pow(std::fabs(u), beta - 1.0) * (u > 0 ? 2.0 : -2.0);
        }
        const double sig = (hv - kGamma) / (kZeta - kGamma);
        grad(r, k) = d_h * (kZeta - kGamma) * sig * (1.0 - sig);
      }
    m = kBeta1 * m + (1.0 - kBeta1) * grad;
    second = kBeta2 * second + (1.0 - kBeta2) * grad.cwiseProduct(grad);
    const double c1 = 1.0 - std::pow(kBeta1, static_cast<double>(it + 1));
    const double c2 = 1.0 - std::pow(kBeta2, static_cast<double>(it + 1));
    v.array() -= options.learning_rate * (m.array() / c1) / ((second.array() / c2).sqrt() + kEpsilon);
  }
  Matrix q(rows, cols);
  for (Eigen::Index r = 0; r < rows; ++r)
    for (Eigen::Index k = 0; k < cols; ++k)
      q(r, k) = std::clamp(floor_q(r, k) + (rectified_sigmoid(v(r, k)) >= 0.5 ? 1.0 : 0.0), -layer.qmax, layer.qmax);
  return q;
}

}  // namespace qflow::adaround

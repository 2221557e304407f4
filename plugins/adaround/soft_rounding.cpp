// Soft rounding: full-batch Adam on the rectified-sigmoid rounding variables of one layer.
#include "soft_rounding.h"

#include <algorithm>
#include <cmath>

namespace qflow::adaround {

namespace {

constexpr double kZeta = 1.1;
constexpr double kGamma = -0.1;

// Rows of `delta` times the gram of their group: the gradient of the reconstruction error / 2.
Matrix times_gram(const LayerProblem& layer, const Matrix& delta) {
  Matrix out(delta.rows(), delta.cols());
  for (Eigen::Index r = 0; r < delta.rows(); ++r)
    out.row(r) = delta.row(r) * layer.grams[static_cast<std::size_t>(layer.group_of[static_cast<std::size_t>(r)])];
  return out;
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
  Matrix delta(integers.rows(), integers.cols());
  for (Eigen::Index r = 0; r < delta.rows(); ++r)
    delta.row(r) = integers.row(r) * layer.scale[static_cast<std::size_t>(r)] - layer.weight.row(r);
  return times_gram(layer, delta).cwiseProduct(delta).sum();
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
  Matrix h(rows, cols), delta(rows, cols), grad(rows, cols);
  for (int64_t it = 0; it < options.iterations; ++it) {
    for (Eigen::Index r = 0; r < rows; ++r)
      for (Eigen::Index k = 0; k < cols; ++k) {
        h(r, k) = rectified_sigmoid(v(r, k));
        const double q = floor_q(r, k) + h(r, k);
        // Clamped to the grid: a weight pushed past qmax moves no further.
        delta(r, k) = std::clamp(q, -layer.qmax, layer.qmax) * layer.scale[static_cast<std::size_t>(r)] - layer.weight(r, k);
      }
    const Matrix rec = times_gram(layer, delta);  // d rec / d W~ = 2 rec
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

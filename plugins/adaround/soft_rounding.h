// Soft rounding of one layer's weights (AdaRound, Nagel et al. 2020): the rounding direction of
// every weight learned so that the layer's output moves least on the calibration inputs.
#pragma once

#include <cstdint>
#include <vector>

#include <Eigen/Dense>

namespace qflow::adaround {

using Matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// A layer as a matrix product: output channel r reads the inputs of group group_of[r]. The
// rounded layer reads x~ where the float layer reads x (the same vector when the layer is
// fitted on float inputs; the input under the earlier layers' rounding otherwise), and the
// reconstruction error E ||W~ x~ - W x||^2, summed over output channels, is
//   sum_r (w~_r G w~_r^T - 2 w~_r C w_r^T + w_r F w_r^T)
// with, per group (for a Conv, x are the im2col patches), G = grams[g] = mean of x~ x~^T,
// C = cross[g] = mean of x~ x^T and F = mean of x x^T. With float inputs C = F = G and the
// error is sum_r d_r G d_r^T, d = W~ - W.
struct LayerProblem {
  Matrix weight;                  // [out channels, K]
  std::vector<double> scale;      // per output channel: the QDQ builder's float32 scale
  double qmax = 7.0;              // grid [-qmax, qmax]
  std::vector<Matrix> grams;      // per group, [K, K]
  std::vector<Matrix> cross;      // per group, [K, K]; empty: the layer reads float inputs
  std::vector<int64_t> group_of;  // per output channel
};

struct SoftRoundingOptions {
  int64_t iterations = 1000;
  double lambda = 0.01;        // weight of the rounding regulariser
  double beta_start = 20.0;    // annealed linearly to beta_end after the warm-up
  double beta_end = 2.0;
  double warmup = 0.2;         // fraction of iterations without the regulariser
  double learning_rate = 0.01; // Adam's step on V
};

// The grid integers of round-to-nearest (half to even, as the QDQ builder), clamped.
Matrix nearest_integers(const LayerProblem& layer);

// The grid integers AdaRound chooses: floor(w / s) + [h(V) >= 0.5], clamped, after
// `options.iterations` full-batch Adam steps on V from h(V) = frac(w / s). The rectified
// sigmoid is h(V) = clamp(sigmoid(V) (zeta - gamma) + gamma, 0, 1), zeta 1.1, gamma -0.1; the
// loss is the reconstruction error plus lambda * sum(1 - |2h - 1|^beta). Every sum runs in a
// fixed order on one thread, so the result depends on nothing but the inputs.
Matrix learned_integers(const LayerProblem& layer, const SoftRoundingOptions& options);

// The reconstruction error of weights s * q, without the term w_r F w_r^T that no rounding
// changes when the layer reads rounded inputs (exact with float inputs).
double reconstruction_error(const LayerProblem& layer, const Matrix& integers);

}  // namespace qflow::adaround

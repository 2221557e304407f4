// Thresholds from a histogram of |x|: percentile, KL divergence (entropy calibration), MSE,
// and the expected quantization error the MSE and mix calibrators minimise.
//
// A histogram here is what the `histogram` observer records (observer.h): `counts[k]` is the
// number of values with k*w <= |x| < (k+1)*w, w = range / counts.size(). Every function
// below sums in a fixed order, so equal inputs give bit-identical results, and assumes a
// histogram that check_histogram() accepted.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "qflow/core/status.h"
#include "qflow/plugin/calibrator.h"
#include "qflow/plugin/observer.h"
#include "qflow/plugin/quant_config.h"

namespace qflow {

// The smoothing weight of the KL divergence (see kl_divergences()).
inline constexpr double kKlEpsilon = 1e-4;

// Accepts a histogram with at least one bin, a finite range >= 0 and finite non-negative
// counts with a positive total. Errors name the calibrator `method` and the tensor `what`;
// a tensor without a histogram gets "<method> calibrator: tensor '<what>' has no histogram
// (observe with 'histogram')".
Status check_histogram(const TensorStatistics& stats, const std::string& method, const std::string& what);

// The |x| below which `percentile` percent (0 < percentile <= 100) of the counted values
// lie. Values are taken as spread uniformly inside their bin, so the result interpolates
// linearly inside the bin where the cumulative count reaches total * percentile / 100:
// k*w + w * (target - before) / counts[k], with `before` the count below bin k and k the
// first non-empty bin where before + counts[k] >= target. 100 gives the upper edge of
// the last non-empty bin.
double percentile_threshold(const std::vector<double>& counts, double range, double percentile);

// Entropy calibration as in TensorRT, for candidates i = target_bins .. counts.size()
// (1 <= target_bins <= counts.size()); element i - target_bins of the result is the
// divergence of candidate i:
//  * reference P: counts[0..i), with the outliers (the counts of bins >= i) added to bin i-1;
//  * candidate Q: counts[0..i) (without the outliers) merged into target_bins levels of
//    m = i / target_bins bins each, the last level also taking the i - m*target_bins bins
//    left over; each level's sum is then spread evenly over the bins of the level where P
//    is non-zero, bins where P is zero stay zero;
//  * P and Q are normalised to sum 1 (a Q without mass stays zero);
//  * where P > 0 and Q = 0 (only bin i-1 can be such a bin: its level holds no count but
//    receives the outliers), Q gets kKlEpsilon times P's probability there and is
//    renormalised: q' = q / (1 + eps*z) elsewhere, q' = eps*p / (1 + eps*z) there, z the P
//    mass of those bins. So Q' > 0 wherever P > 0, sums to 1, and such a candidate pays
//    about z*ln(1/eps) for the mass it cannot represent;
//  * KL(P||Q') = sum over p > 0 of p ln(p / q').
// Computed in closed form per level from prefix sums (long double) of counts, c*ln(c) and
// non-zero bins: the levels below the last are the same for all i with the same m, so the
// cost is O(bins) logarithms, not O(bins^2).
std::vector<double> kl_divergences(const std::vector<double>& counts, int64_t target_bins);

// The upper edge i*w of the candidate with the smallest kl_divergences() value among the
// candidates i >= first_candidate; on ties the smallest i.
double kl_threshold(const std::vector<double>& counts, double range, int64_t target_bins, int64_t first_candidate = 0);

// The smallest bin edge k (0 <= k <= counts.size()) with at most `clipped_percent` percent
// (0 <= clipped_percent <= 100) of the total count in bins >= k: a threshold at edge k*w or
// above clips no more than that share of the values. The floor that keeps a threshold
// search out of the region below a distribution's bulk: KL divergence rates a threshold at
// the bottom of a distribution whose mass lies away from zero (sigmoid gates in
// [0.06, 0.8]) as perfect, because all the clipped mass folds into one bin that the
// candidate then represents exactly.
int64_t bulk_edge(const std::vector<double>& counts, double clipped_percent);

// Expected squared error of symmetric quantization of |x| with clipping threshold
// `threshold` and `qmax` steps between 0 and the threshold (scale s = threshold / qmax),
// each bin's mass taken at its centre x_k = (k + 1/2) w:
//   x_k <= threshold: (x_k - s * round_half_even(x_k / s))^2   (rounding error)
//   x_k >  threshold: (x_k - threshold)^2                       (clipping error)
// weighted by counts[k] and divided by the total count. Threshold 0 clips everything to 0.
double expected_quantization_mse(const std::vector<double>& counts, double range, double threshold, double qmax);

// The bin edge k*w, k = 1 .. counts.size() (w up to the range), with the smallest
// expected_quantization_mse(); on ties the smallest edge. A range of 0 gives 0.
double mse_threshold(const std::vector<double>& counts, double range, double qmax);

// The qmax under which expected_quantization_mse() models a tensor quantized with `spec`, on
// its grid (activation_grid(), narrowed by activation_bits): symmetric signed types: the
// grid's qmax (127, 32767; 7 at 4 bits); otherwise the levels cover the observed range
// clipped to [-t, t] (quant_math.h), so all qmax - qmin steps lie on [0, t] when
// stats.min >= 0 (255, 65535; 15 at 4 bits) and about half of them when the range holds
// negative values ((qmax - qmin) / 2: 127.5, 32767.5).
double error_qmax(const QuantSpec& spec, const TensorStatistics& stats);

// The loop of the histogram calibrators: for every tensor of request.statistics (none is
// skipped), check_observed() and check_histogram(), then `threshold` (its error is returned
// as is), then activation_params() under request.spec_for(name). A 16-bit tensor takes its
// observed range max(|min|, |max|) instead of `threshold`: with a step 256 times finer than
// int8's, the clipping an 8-bit method trades for resolution is the larger error (PP-OCRv4
// rec, every tensor int16: percentile thresholds give output cosine 0.996, observed ranges
// 0.99985), and the precision search computes raised tensors the same way. That holds for
// every grid in a 16-bit container (activation_bits 9 to 16); 8-bit containers, narrowed or
// not, take `threshold`, which sees the grid through the spec.
using HistogramThreshold =
    std::function<Expected<double>(const std::string& name, const TensorStatistics& stats, const QuantSpec& spec)>;
Expected<QuantTable> calibrate_from_histograms(const CalibrationRequest& request, const std::string& method,
                                               const HistogramThreshold& threshold);

}  // namespace qflow

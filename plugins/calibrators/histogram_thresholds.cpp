// Histogram thresholds: percentile, KL (closed form per level), MSE and the error model.
#include "histogram_thresholds.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "qflow/quant/quant_math.h"

namespace qflow {

namespace {

// Round half to even for 0 <= v < 2^52: adding 2^52 leaves no fraction bits, so the FPU's
// round-to-nearest-even does the rounding. Same result as std::nearbyint for that range,
// without a libm call in the MSE inner loop.
inline double round_half_even_nonneg(double v) {
  constexpr double kTwo52 = 4503599627370496.0;
  return v < kTwo52 ? (v + kTwo52) - kTwo52 : v;
}

// Rounding error of a value x inside the threshold for scale s (s > 0).
inline double rounding_error(double x, double s) {
  const double e = x - s * round_half_even_nonneg(x / s);
  return e * e;
}

}  // namespace

Status check_histogram(const TensorStatistics& stats, const std::string& method, const std::string& what) {
  const std::string prefix = method + " calibrator: tensor '" + what + "'";
  if (stats.histogram.empty()) return invalid_input(prefix + " has no histogram (observe with 'histogram')");
  if (!std::isfinite(stats.histogram_range) || stats.histogram_range < 0.0)
    return invalid_input(prefix + ": histogram range " + std::to_string(stats.histogram_range) +
                         " is not a finite non-negative number");
  double total = 0.0;
  for (std::size_t k = 0; k < stats.histogram.size(); ++k) {
    const double c = stats.histogram[k];
    if (!std::isfinite(c) || c < 0.0)
      return invalid_input(prefix + ": histogram bin " + std::to_string(k) + " holds " + std::to_string(c) +
                           ", not a finite non-negative count");
    total += c;
  }
  if (!(total > 0.0) || !std::isfinite(total)) return invalid_input(prefix + ": histogram holds no counts");
  return Status::ok();
}

double percentile_threshold(const std::vector<double>& counts, double range, double percentile) {
  const double w = range / static_cast<double>(counts.size());
  double total = 0.0;
  for (double c : counts) total += c;
  const double target = total * (percentile / 100.0);
  double before = 0.0;
  std::size_t last_non_empty = 0;
  for (std::size_t k = 0; k < counts.size(); ++k) {
    const double c = counts[k];
    if (c <= 0.0) continue;
    if (before + c >= target) {
      const double fraction = std::clamp((target - before) / c, 0.0, 1.0);
      return (static_cast<double>(k) + fraction) * w;
    }
    before += c;
    last_non_empty = k;
  }
  // Only rounding in the running sum can leave the target unreached: the last non-empty
  // bin holds the top of the distribution.
  return static_cast<double>(last_non_empty + 1) * w;
}

std::vector<double> kl_divergences(const std::vector<double>& counts, int64_t target_bins) {
  const auto n = static_cast<int64_t>(counts.size());
  const int64_t levels = target_bins;
  if (levels < 1 || levels > n) return {};

  // ln(k) for the non-empty bin counts k in [1, n]: the same values std::log gives at each
  // use, computed once (the logs are most of this function's time).
  std::vector<long double> log_count(static_cast<std::size_t>(n) + 1, 0.0L);
  for (int64_t k = 1; k <= n; ++k) log_count[static_cast<std::size_t>(k)] = std::log(static_cast<long double>(k));
  // Prefix sums over bins [0, k): counts, c*ln(c) (0 for empty bins) and non-empty bins.
  std::vector<long double> mass(static_cast<std::size_t>(n) + 1, 0.0L);
  std::vector<long double> clogc(static_cast<std::size_t>(n) + 1, 0.0L);
  std::vector<int64_t> non_empty(static_cast<std::size_t>(n) + 1, 0);
  for (int64_t k = 0; k < n; ++k) {
    const long double c = counts[static_cast<std::size_t>(k)];
    const auto u = static_cast<std::size_t>(k);
    mass[u + 1] = mass[u] + c;
    clogc[u + 1] = clogc[u] + (c > 0.0L ? c * std::log(c) : 0.0L);
    non_empty[u + 1] = non_empty[u] + (c > 0.0L ? 1 : 0);
  }
  const long double total = mass[static_cast<std::size_t>(n)];
  const long double log_total = std::log(total);
  const long double log_inverse_epsilon = -std::log(static_cast<long double>(kKlEpsilon));
  auto at = [](const auto& prefix, int64_t k) { return prefix[static_cast<std::size_t>(k)]; };

  std::vector<double> divergences(static_cast<std::size_t>(n - levels + 1), 0.0);
  for (int64_t m = 1; m * levels <= n; ++m) {
    // Levels 0 .. levels-2 span [j*m, (j+1)*m) for every i in [m*levels, (m+1)*levels):
    // their part of sum_{p>0} a ln(a / (S/nz)) is shared. For these levels the reference
    // counts a equal the histogram counts, so A = S.
    long double shared = 0.0L;
    for (int64_t j = 0; j + 1 < levels; ++j) {
      const int64_t s = j * m;
      const int64_t e = s + m;
      const long double level_mass = at(mass, e) - at(mass, s);
      if (level_mass <= 0.0L) continue;
      // level_mass > 0, so the level has a non-empty bin.
      const int64_t level_non_empty = at(non_empty, e) - at(non_empty, s);
      shared += (at(clogc, e) - at(clogc, s)) - level_mass * std::log(level_mass) +
                level_mass * at(log_count, level_non_empty);
    }
    const int64_t last_start = (levels - 1) * m;
    const int64_t i_end = std::min(n, (m + 1) * levels - 1);
    for (int64_t i = m * levels; i <= i_end; ++i) {
      const long double outliers = total - at(mass, i);
      const long double last_bin = static_cast<long double>(counts[static_cast<std::size_t>(i - 1)]) + outliers;
      const long double level_mass = at(mass, i) - at(mass, last_start);  // Q's last level, no outliers
      long double sum = shared;
      long double represented = total;  // P mass where Q > 0
      if (level_mass > 0.0L) {
        const long double level_reference = level_mass + outliers;  // P's last level
        const int64_t level_non_empty = at(non_empty, i - 1) - at(non_empty, last_start) + (last_bin > 0.0L ? 1 : 0);
        const long double level_clogc =
            at(clogc, i - 1) - at(clogc, last_start) + (last_bin > 0.0L ? last_bin * std::log(last_bin) : 0.0L);
        sum += level_clogc - level_reference * std::log(level_mass) + level_reference * at(log_count, level_non_empty);
      } else {
        // The level holds no count; only bin i-1 can carry P mass (the outliers).
        represented = total - outliers;
      }
      // Normalisation: p = a / total, q = (S / nz) / (total - outliers).
      if (represented > 0.0L) sum += represented * (std::log(total - outliers) - log_total);
      long double divergence = sum / total;
      const long double unrepresented = (total - represented) / total;
      if (unrepresented > 0.0L)
        divergence += std::log1p(static_cast<long double>(kKlEpsilon) * unrepresented) +
                      unrepresented * log_inverse_epsilon;
      divergences[static_cast<std::size_t>(i - levels)] = static_cast<double>(divergence);
    }
  }
  return divergences;
}

double kl_threshold(const std::vector<double>& counts, double range, int64_t target_bins, int64_t first_candidate) {
  const std::vector<double> divergences = kl_divergences(counts, target_bins);
  // Element c is candidate c + target_bins; the last candidate (all bins) is always allowed.
  std::size_t best = static_cast<std::size_t>(
      std::clamp<int64_t>(first_candidate - target_bins, 0, static_cast<int64_t>(divergences.size()) - 1));
  for (std::size_t c = best + 1; c < divergences.size(); ++c)
    if (divergences[c] < divergences[best]) best = c;
  const double w = range / static_cast<double>(counts.size());
  return static_cast<double>(static_cast<int64_t>(best) + target_bins) * w;
}

int64_t bulk_edge(const std::vector<double>& counts, double clipped_percent) {
  double total = 0.0;
  for (double c : counts) total += c;
  const double allowed = total * (clipped_percent / 100.0);
  // Walk down from the top while the mass above stays within the allowance.
  double above = 0.0;
  auto k = static_cast<int64_t>(counts.size());
  while (k > 0 && above + counts[static_cast<std::size_t>(k - 1)] <= allowed) {
    above += counts[static_cast<std::size_t>(k - 1)];
    --k;
  }
  return k;
}

double expected_quantization_mse(const std::vector<double>& counts, double range, double threshold, double qmax) {
  const double w = range / static_cast<double>(counts.size());
  const double s = threshold / qmax;
  double total = 0.0;
  double error = 0.0;
  for (std::size_t k = 0; k < counts.size(); ++k) {
    const double c = counts[k];
    total += c;
    if (c == 0.0) continue;
    const double x = (static_cast<double>(k) + 0.5) * w;
    if (x <= threshold && s > 0.0) {
      error += c * rounding_error(x, s);
    } else if (x > threshold) {
      const double d = x - threshold;
      error += c * d * d;
    }  // x <= threshold with s == 0: x == threshold == 0, no error
  }
  return error / total;
}

double mse_threshold(const std::vector<double>& counts, double range, double qmax) {
  const auto n = counts.size();
  const double w = range / static_cast<double>(n);
  if (!(w > 0.0)) return 0.0;
  // Suffix sums over bins [k, n) of c, c*x and c*x^2 give each candidate's clipping error in
  // O(1): sum c (x - t)^2 = sum c x^2 - 2 t sum c x + t^2 sum c.
  std::vector<double> tail_c(n + 1, 0.0), tail_cx(n + 1, 0.0), tail_cxx(n + 1, 0.0);
  for (std::size_t k = n; k-- > 0;) {
    const double x = (static_cast<double>(k) + 0.5) * w;
    tail_c[k] = tail_c[k + 1] + counts[k];
    tail_cx[k] = tail_cx[k + 1] + counts[k] * x;
    tail_cxx[k] = tail_cxx[k + 1] + counts[k] * x * x;
  }
  double best_error = 0.0;
  std::size_t best = 0;
  for (std::size_t edge = 1; edge <= n; ++edge) {
    // Threshold edge*w: bins below `edge` have centres inside it, the others are clipped.
    const double t = static_cast<double>(edge) * w;
    const double s = t / qmax;
    double error = 0.0;
    for (std::size_t k = 0; k < edge; ++k) {
      if (counts[k] == 0.0) continue;
      error += counts[k] * rounding_error((static_cast<double>(k) + 0.5) * w, s);
    }
    error += std::max(0.0, tail_cxx[edge] - 2.0 * t * tail_cx[edge] + t * t * tail_c[edge]);
    if (edge == 1 || error < best_error) {
      best_error = error;
      best = edge;
    }
  }
  return static_cast<double>(best) * w;
}

double error_qmax(const QuantSpec& spec, const TensorStatistics& stats) {
  const DType dtype = spec.activation_dtype;
  if (quant_range(dtype).max == 0) return 1.0;  // not a quantized type: activation_params() refuses it
  const QuantRange range = activation_grid(spec);
  if (spec.symmetric && is_signed_quant(dtype)) return static_cast<double>(range.max);
  const auto steps = static_cast<double>(range.max - range.min);
  return stats.min >= 0.0 ? steps : steps / 2.0;
}

Expected<QuantTable> calibrate_from_histograms(const CalibrationRequest& request, const std::string& method,
                                               const HistogramThreshold& threshold) {
  if (!request.statistics) return invalid_input(method + " calibrator: the request carries no statistics");
  std::vector<const std::pair<const std::string, TensorStatistics>*> entries;
  for (const auto& entry : *request.statistics) entries.push_back(&entry);
  // Each tensor on its own (an mse search over 2048 bins is quadratic in them): contiguous
  // slices per thread, the results and the first error taken in name order.
  std::vector<Expected<QuantParams>> params(entries.size(), QuantParams{});
  auto calibrate_one = [&](std::size_t i) -> Expected<QuantParams> {
    const auto& [name, stats] = *entries[i];
    QFLOW_RETURN_IF_ERROR(check_observed(stats, method, name));
    QFLOW_RETURN_IF_ERROR(check_histogram(stats, method, name));
    const QuantSpec spec = request.spec_for(name);
    double t = observed_magnitude(stats);
    if (!is_16bit_quant(spec.activation_dtype)) {
      QFLOW_ASSIGN_OR_RETURN(t, threshold(name, stats, spec));
    }
    return activation_params(spec, stats, t, method, name);
  };
  const std::size_t workers = std::min<std::size_t>(static_cast<std::size_t>(std::max(1, request.threads)), entries.size());
  auto run_slice = [&](std::size_t w) {
    for (std::size_t i = entries.size() * w / workers; i < entries.size() * (w + 1) / workers; ++i) params[i] = calibrate_one(i);
  };
  std::vector<std::thread> helpers;
  for (std::size_t w = 1; w < workers; ++w) helpers.emplace_back(run_slice, w);
  if (workers > 0) run_slice(0);
  for (std::thread& t : helpers) t.join();
  QuantTable table;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (!params[i]) return params[i].status();
    table.emplace(entries[i]->first, std::move(params[i]).value());
  }
  return table;
}

}  // namespace qflow

// Tests of the KL (entropy) threshold: hand-computed divergences on tiny histograms, a
// direct O(bins^2) evaluation of the same definition, the calibrator, its speed, and the
// cases tests/builtin_plugins/kl_reference.py recomputes independently.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "plugins/calibrators/histogram_thresholds.h"
#include "plugins/calibrators/kl_calibrator.h"

namespace qflow {
namespace {

TensorStatistics histogram_stats(std::vector<double> counts, double range) {
  TensorStatistics s;
  for (double c : counts) s.count += static_cast<int64_t>(c);
  s.min = -range;
  s.max = range;
  s.histogram = std::move(counts);
  s.histogram_range = range;
  return s;
}

Expected<QuantTable> run(int64_t target_bins, const std::map<std::string, TensorStatistics>& stats) {
  Options options;
  options.set("target-bins", target_bins);
  options.set("max-clipped", 100.0);  // the plain search these cases define
  options.set("flatten-zero-bin", false);
  auto calibrator = KlCalibrator::create(options);
  if (!calibrator) return calibrator.status();
  CalibrationRequest request;
  request.statistics = &stats;
  return calibrator.value()->calibrate(request);
}

// The definition in histogram_thresholds.h evaluated bin by bin, without the closed form.
std::vector<double> direct_divergences(const std::vector<double>& c, int64_t levels) {
  const auto n = static_cast<int64_t>(c.size());
  double total = 0.0;
  for (double v : c) total += v;
  std::vector<double> out;
  for (int64_t i = levels; i <= n; ++i) {
    std::vector<double> p(c.begin(), c.begin() + i);
    for (int64_t k = i; k < n; ++k) p[static_cast<std::size_t>(i - 1)] += c[static_cast<std::size_t>(k)];
    const int64_t m = i / levels;
    std::vector<double> q(static_cast<std::size_t>(i), 0.0);
    for (int64_t j = 0; j < levels; ++j) {
      const int64_t s = j * m;
      const int64_t e = j + 1 == levels ? i : s + m;
      double sum = 0.0;
      int nz = 0;
      for (int64_t k = s; k < e; ++k) {
        sum += c[static_cast<std::size_t>(k)];
        nz += p[static_cast<std::size_t>(k)] > 0.0 ? 1 : 0;
      }
      for (int64_t k = s; k < e; ++k)
        if (p[static_cast<std::size_t>(k)] > 0.0) q[static_cast<std::size_t>(k)] = sum / nz;
    }
    double q_total = 0.0;
    for (double v : q) q_total += v;
    double z = 0.0;
    for (std::size_t k = 0; k < p.size(); ++k) {
      p[k] /= total;
      if (q_total > 0.0) q[k] /= q_total;
      if (p[k] > 0.0 && q[k] == 0.0) z += p[k];
    }
    double kl = 0.0;
    for (std::size_t k = 0; k < p.size(); ++k) {
      if (p[k] == 0.0) continue;
      const double smoothed = (q[k] == 0.0 ? kKlEpsilon * p[k] : q[k]) / (1.0 + kKlEpsilon * z);
      kl += p[k] * std::log(p[k] / smoothed);
    }
    out.push_back(kl);
  }
  return out;
}

// |x| of `values` counted into `bins` bins over [0, max |x|], as the histogram observer does.
std::vector<double> histogram_of(const std::vector<double>& values, int64_t bins, double& range) {
  range = 0.0;
  for (double v : values) range = std::max(range, std::fabs(v));
  std::vector<double> counts(static_cast<std::size_t>(bins), 0.0);
  for (double v : values) {
    const auto bin = std::min<std::size_t>(static_cast<std::size_t>(bins - 1),
                                           static_cast<std::size_t>(std::floor(std::fabs(v) / range * bins)));
    counts[bin] += 1.0;
  }
  return counts;
}

struct Case {
  std::string name;
  std::vector<double> counts;
  double range = 0.0;
  int64_t target_bins = 128;
};

// Seeded histograms: a Gaussian, a Laplacian with far outliers, a ReLU output (half of the
// values exactly 0), a uniform, a sparse one (few distinct values, empty bins everywhere),
// and bin counts that are not multiples of the target.
std::vector<Case> reference_cases() {
  std::mt19937_64 rng(20240611);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::exponential_distribution<double> exponential(1.0);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  const int samples = 200000;
  std::vector<Case> cases;
  auto add = [&](const std::string& name, const std::vector<double>& values, int64_t bins, int64_t target) {
    Case c;
    c.name = name;
    c.counts = histogram_of(values, bins, c.range);
    c.target_bins = target;
    cases.push_back(std::move(c));
  };
  std::vector<double> v;
  for (int k = 0; k < samples; ++k) v.push_back(normal(rng));
  add("gaussian", v, 2048, 128);
  v.clear();
  for (int k = 0; k < samples; ++k) v.push_back((k % 2 ? 1.0 : -1.0) * exponential(rng));
  for (int k = 0; k < samples / 1000; ++k) v.push_back(20.0 + 30.0 * std::fabs(uniform(rng)));
  add("laplacian-outliers", v, 2048, 128);
  v.clear();
  for (int k = 0; k < samples; ++k) v.push_back(std::max(0.0, normal(rng)));
  add("relu", v, 2048, 128);
  v.clear();
  for (int k = 0; k < samples; ++k) v.push_back(uniform(rng));
  add("uniform", v, 2048, 128);
  v.clear();
  for (int k = 0; k < samples; ++k) v.push_back(std::round(4.0 * normal(rng)) / 4.0);
  add("sparse", v, 2048, 128);
  v.clear();
  for (int k = 0; k < samples / 10; ++k) v.push_back(normal(rng));
  add("gaussian-300-bins", v, 300, 128);
  add("gaussian-257-bins-16-levels", v, 257, 16);
  return cases;
}

TEST_CASE("kl: hand-computed divergences, 4 bins into 2 levels") {
  // counts {4, 2, 1, 1}, total 8:
  //  i=2: P = {4, 2+2}/8, Q = {4, 2}/6:           0.5 ln(0.75) + 0.5 ln(1.5)        = 0.5 ln(1.125)
  //  i=3: P = {4, 2, 1+1}/8, Q = {4, 1.5, 1.5}/7:  0.5 ln(7/8) + 0.5 ln(7/6)         = 0.5 ln(49/48)
  //  i=4: P = {4, 2, 1, 1}/8, Q = {3, 3, 1, 1}/8:  0.5 ln(4/3) + 0.25 ln(2/3)
  const std::vector<double> counts = {4, 2, 1, 1};
  const std::vector<double> d = kl_divergences(counts, 2);
  REQUIRE(d.size() == 3);
  CHECK(d[0] == doctest::Approx(0.5 * std::log(1.125)).epsilon(1e-12));
  CHECK(d[1] == doctest::Approx(0.5 * std::log(49.0 / 48.0)).epsilon(1e-12));
  CHECK(d[2] == doctest::Approx(0.5 * std::log(4.0 / 3.0) + 0.25 * std::log(2.0 / 3.0)).epsilon(1e-12));
  CHECK(kl_threshold(counts, 4.0, 2) == 3.0);  // i = 3, bin width 1
  CHECK(kl_threshold(counts, 2.0, 2) == 1.5);
}

TEST_CASE("kl: P mass that Q cannot hold is smoothed with epsilon") {
  // counts {1, 0, 0, 3}: for i = 2 and 3 the last level of Q holds nothing while P puts the
  // outliers (3/4) in bin i-1: KL = 1/4 ln(1/4 (1 + 3e/4)) + 3/4 ln((1 + 3e/4) / e)
  //                              = 1/4 ln(1/4) + ln(1 + 3e/4) + 3/4 ln(1/e).
  // For i = 4, Q = P exactly.
  const std::vector<double> counts = {1, 0, 0, 3};
  const double e = kKlEpsilon;
  const double expected = 0.25 * std::log(0.25) + std::log1p(0.75 * e) + 0.75 * std::log(1.0 / e);
  const std::vector<double> d = kl_divergences(counts, 2);
  REQUIRE(d.size() == 3);
  CHECK(d[0] == doctest::Approx(expected).epsilon(1e-12));
  CHECK(d[1] == doctest::Approx(expected).epsilon(1e-12));
  CHECK(d[2] == doctest::Approx(0.0));
  CHECK(kl_threshold(counts, 4.0, 2) == 4.0);

  // Everything beyond the first levels: Q is empty, z = 1: ln(1 + e) + ln(1/e).
  const std::vector<double> far = kl_divergences({0, 0, 0, 5}, 2);
  CHECK(far[0] == doctest::Approx(std::log1p(e) - std::log(e)).epsilon(1e-12));
  CHECK(far[2] == doctest::Approx(0.0));
}

TEST_CASE("kl: ties go to the smallest candidate") {
  // counts {2, 2, 0, 0}: every candidate reproduces P exactly.
  const std::vector<double> d = kl_divergences({2, 2, 0, 0}, 2);
  for (double v : d) CHECK(v == doctest::Approx(0.0).scale(1.0));
  CHECK(kl_threshold({2, 2, 0, 0}, 4.0, 2) == 2.0);
  // One level: every candidate merges all into one level.
  CHECK(kl_divergences({3, 1}, 1).size() == 2);
}

TEST_CASE("kl: the closed form matches a bin-by-bin evaluation of the definition") {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> count(0, 50);
  std::bernoulli_distribution empty(0.3);
  for (int64_t bins : {8, 37, 64, 130}) {
    for (int64_t levels : {int64_t{1}, int64_t{3}, int64_t{8}}) {
      std::vector<double> counts(static_cast<std::size_t>(bins));
      for (double& c : counts) c = empty(rng) ? 0.0 : count(rng);
      counts.back() += 1.0;
      const std::vector<double> fast = kl_divergences(counts, levels);
      const std::vector<double> slow = direct_divergences(counts, levels);
      REQUIRE(fast.size() == slow.size());
      for (std::size_t k = 0; k < fast.size(); ++k) {
        INFO("bins " << bins << " levels " << levels << " candidate " << k + levels);
        CHECK(fast[k] == doctest::Approx(slow[k]).epsilon(1e-9).scale(1.0));
      }
    }
  }
}

TEST_CASE("kl: the calibrator applies the threshold and checks target-bins per tensor") {
  auto table = run(2, {{"t", histogram_stats({4, 2, 1, 1}, 4.0)}});
  REQUIRE(table.has_value());
  CHECK(table->at("t").threshold == 3.0);
  CHECK(table->at("t").scale[0] == static_cast<float>(3.0 / 127.0));
  CHECK(table->at("t").method == "kl");

  auto too_few = run(128, {{"small", histogram_stats({4, 2, 1, 1}, 4.0)}});
  REQUIRE_FALSE(too_few.has_value());
  CHECK(too_few.status().message() == "kl calibrator: tensor 'small': target-bins 128 exceeds the histogram's 4 bins");

  TensorStatistics bare;
  bare.count = 2;
  bare.min = 0.0;
  bare.max = 1.0;
  auto missing = run(2, {{"x", bare}});
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.status().message() == "kl calibrator: tensor 'x' has no histogram (observe with 'histogram')");

  Options zero;
  zero.set("target-bins", int64_t{0});
  CHECK_FALSE(KlCalibrator::create(zero).has_value());
  const ComponentInfo info = KlCalibrator::info();
  REQUIRE(info.options.size() == 3);
  CHECK(info.options[0].name == "target-bins");
  CHECK(std::get<int64_t>(info.options[0].default_value) == 128);
  CHECK(info.options[1].name == "flatten-zero-bin");
  CHECK(std::get<bool>(info.options[1].default_value));
  CHECK(info.options[2].name == "max-clipped");
  CHECK(std::get<double>(info.options[2].default_value) == kKlMaxClippedPercent);
}

TEST_CASE("kl: flatten-zero-bin keeps a spike of zeros from pulling the threshold down") {
  // ReLU-like: half of the mass exactly 0 (bin 0), the rest decaying evenly up to the range.
  std::vector<double> counts(2048);
  for (std::size_t k = 0; k < counts.size(); ++k) counts[k] = 2048.0 - static_cast<double>(k);
  counts[0] = 2048.0 * 2048.0 / 2.0;
  const std::map<std::string, TensorStatistics> stats = {{"relu", histogram_stats(counts, 6.0)}};
  auto calibrate = [&](bool flatten) {
    Options options;
    options.set("target-bins", int64_t{128});
    options.set("flatten-zero-bin", flatten);
    options.set("max-clipped", 100.0);
    CalibrationRequest request;
    request.statistics = &stats;
    auto table = KlCalibrator::create(options).value()->calibrate(request);
    REQUIRE(table.has_value());
    return table->at("relu").threshold;
  };
  std::vector<double> flattened = counts;
  flattened[0] = flattened[1];
  CHECK(calibrate(true) == kl_threshold(flattened, 6.0, 128));
  CHECK(calibrate(false) == kl_threshold(counts, 6.0, 128));
  CHECK(calibrate(true) > calibrate(false));
}

TEST_CASE("kl: a Gaussian clips in its tail, outliers far away are clipped") {
  for (const Case& c : reference_cases()) {
    INFO(c.name);
    const double t = kl_threshold(c.counts, c.range, c.target_bins);
    CHECK(t > 0.0);
    CHECK(t <= c.range);
    if (c.name == "gaussian") {
      CHECK(t > 2.0);  // keeps the body of N(0, 1)...
      CHECK(t < c.range);
    }
    if (c.name == "laplacian-outliers") CHECK(t < 20.0);  // ...and drops the outliers at 20..50
  }
}

// Writes the reference cases with qflow's divergences and thresholds as JSON to the file
// named by QFLOW_KL_REFERENCE_JSON (kl_reference.py runs this case and checks the file).
TEST_CASE("kl: reference cases for kl_reference.py") {
  const std::vector<Case> cases = reference_cases();
  REQUIRE(cases.size() == 7);
  const char* path = std::getenv("QFLOW_KL_REFERENCE_JSON");
  if (path == nullptr) return;
  std::ofstream out(path);
  REQUIRE(out.good());
  auto number = [](double v) {
    char buffer[40];
    std::snprintf(buffer, sizeof buffer, "%.17g", v);
    return std::string(buffer);
  };
  out << "{\"epsilon\": " << number(kKlEpsilon) << ", \"cases\": [\n";
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    out << "{\"name\": \"" << c.name << "\", \"range\": " << number(c.range) << ", \"target_bins\": " << c.target_bins
        << ", \"threshold\": " << number(kl_threshold(c.counts, c.range, c.target_bins)) << ",\n \"counts\": [";
    for (std::size_t b = 0; b < c.counts.size(); ++b) out << (b ? ", " : "") << number(c.counts[b]);
    out << "],\n \"divergences\": [";
    const std::vector<double> d = kl_divergences(c.counts, c.target_bins);
    for (std::size_t b = 0; b < d.size(); ++b) out << (b ? ", " : "") << number(d[b]);
    out << "]}" << (k + 1 < cases.size() ? ",\n" : "\n");
  }
  out << "]}\n";
  REQUIRE(out.good());
}

TEST_CASE("kl: 2048 bins into 128 levels takes well under 20 ms (median of 20 runs printed)") {
  const std::vector<Case> cases = reference_cases();
  const Case& gaussian = cases.front();
  REQUIRE(gaussian.counts.size() == 2048);
  std::vector<double> ms;
  double sink = 0.0;
  for (int run = 0; run < 20; ++run) {
    const auto start = std::chrono::steady_clock::now();
    sink += kl_threshold(gaussian.counts, gaussian.range, 128);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  const double median = (ms[9] + ms[10]) / 2.0;
  std::printf("kl_threshold, 2048 bins, 128 levels: median %.3f ms over 20 runs\n", median);
  CHECK(sink > 0.0);
  CHECK(median < 20.0);
}

}  // namespace
}  // namespace qflow

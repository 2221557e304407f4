// Tests of the histogram observer: hand-computed bins, the two-pass sharding protocol, state format.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "plugins/observers/histogram_observer.h"

namespace qflow {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

Tensor floats(const std::vector<float>& v) { return Tensor::from_vector<float>({static_cast<int64_t>(v.size())}, v); }

HistogramObserver make(int64_t bins) {
  auto created = HistogramObserver::create([&] {
    Options o;
    o.set("bins", bins);
    return o;
  }());
  REQUIRE(created.has_value());
  return *dynamic_cast<HistogramObserver*>(created.value().get());
}

// One observer over both passes, as the host runs it without shards.
HistogramObserver run_whole(const std::vector<Tensor>& samples, int64_t bins) {
  HistogramObserver obs = make(bins);
  for (int pass = 0; pass < obs.passes(); ++pass) {
    REQUIRE(obs.begin_pass(pass).is_ok());
    for (const Tensor& t : samples) REQUIRE(obs.observe(t).is_ok());
  }
  return obs;
}

// The sharding protocol: `cuts0`/`cuts1` split the samples into shards for each pass;
// `reverse` merges the shards in the opposite order.
std::string run_sharded(const std::vector<Tensor>& samples, int64_t bins, const std::vector<std::size_t>& cuts0,
                        const std::vector<std::size_t>& cuts1, bool reverse) {
  auto shards = [&](const std::vector<std::size_t>& cuts) {
    std::vector<std::vector<Tensor>> out(cuts.size() + 1);
    std::size_t shard = 0;
    for (std::size_t i = 0; i < samples.size(); ++i) {
      while (shard < cuts.size() && i >= cuts[shard]) ++shard;
      out[shard].push_back(samples[i]);
    }
    if (reverse) std::reverse(out.begin(), out.end());
    return out;
  };
  std::vector<HistogramObserver> pass0;
  for (const auto& shard : shards(cuts0)) {
    pass0.push_back(make(bins));
    REQUIRE(pass0.back().begin_pass(0).is_ok());
    for (const Tensor& t : shard) REQUIRE(pass0.back().observe(t).is_ok());
  }
  HistogramObserver merged = pass0[0];
  for (std::size_t i = 1; i < pass0.size(); ++i) REQUIRE(merged.merge(pass0[i]).is_ok());
  const std::string summary = merged.serialize();
  std::vector<HistogramObserver> pass1;
  for (const auto& shard : shards(cuts1)) {
    pass1.push_back(make(bins));
    REQUIRE(pass1.back().deserialize(summary).is_ok());
    REQUIRE(pass1.back().begin_pass(1).is_ok());
    for (const Tensor& t : shard) REQUIRE(pass1.back().observe(t).is_ok());
  }
  HistogramObserver result = pass1[0];
  for (std::size_t i = 1; i < pass1.size(); ++i) REQUIRE(result.merge(pass1[i]).is_ok());
  return result.serialize();
}

TEST_CASE("histogram: hand-computed bins, top edge in the last bin, NaN/Inf only counted") {
  // Range from pass 0: max(|-2|, |1.5|) = 2; bins of width 0.5.
  const std::vector<Tensor> samples = {floats({-2.0f, 1.0f, 0.5f, 0.0f, kNaN, kInf}), floats({1.5f, 0.49f, -kInf, -0.0f})};
  const HistogramObserver obs = run_whole(samples, 4);
  const TensorStatistics s = obs.statistics();
  CHECK(s.count == 7);
  CHECK(s.nan_count == 1);
  CHECK(s.inf_count == 2);
  CHECK(s.min == -2.0);
  CHECK(s.max == 1.5);
  CHECK(s.histogram_range == 2.0);
  // |x|: 2 -> last bin (top edge), 1 -> 2, 0.5 -> 1, 0 -> 0, 1.5 -> 3, 0.49 -> 0, 0 -> 0.
  CHECK(s.histogram == std::vector<double>{3, 1, 1, 2});
}

TEST_CASE("histogram: an all-zero tensor has range 0 and everything in bin 0") {
  const HistogramObserver obs = run_whole({floats({0.0f, -0.0f, 0.0f, kNaN})}, 8);
  const TensorStatistics s = obs.statistics();
  CHECK(s.count == 3);
  CHECK(s.nan_count == 1);
  CHECK(s.histogram_range == 0.0);
  CHECK(s.histogram == std::vector<double>{3, 0, 0, 0, 0, 0, 0, 0});

  const HistogramObserver none = run_whole({floats({kNaN, kInf})}, 2);
  CHECK(none.statistics().count == 0);
  CHECK(none.statistics().histogram == std::vector<double>{0, 0});
}

TEST_CASE("histogram: pass 0 alone has no histogram; options are checked") {
  HistogramObserver obs = make(16);
  CHECK(obs.passes() == 2);
  REQUIRE(obs.observe(floats({1.0f, -3.0f})).is_ok());
  const TensorStatistics s = obs.statistics();
  CHECK(s.histogram.empty());
  CHECK(s.min == -3.0);
  const ComponentInfo info = HistogramObserver::info();
  CHECK(info.name == "histogram");
  REQUIRE(info.options.size() == 1);
  CHECK(std::get<int64_t>(info.options[0].default_value) == 2048);
  for (int64_t bad : {int64_t{0}, int64_t{-1}, HistogramObserver::kMaxBins + 1}) {
    Options o;
    o.set("bins", bad);
    CHECK(HistogramObserver::create(o).status().code() == StatusCode::InvalidInput);
  }
}

TEST_CASE("histogram: any sharding and merge order gives the bytes of one observer") {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<Tensor> samples;
  for (int i = 0; i < 9; ++i) {
    std::vector<float> v(23);
    for (float& x : v) x = dist(rng);
    if (i % 3 == 0) v[5] = kNaN;
    if (i % 4 == 2) v[7] = kInf;
    samples.push_back(floats(v));
  }
  const std::string expected = run_whole(samples, 64).serialize();
  const std::vector<std::vector<std::size_t>> splits = {{}, {4}, {1, 2, 8}, {3, 3, 6}, {0, 9}};
  for (const auto& cuts0 : splits)
    for (const auto& cuts1 : splits)
      for (bool reverse : {false, true}) CHECK(run_sharded(samples, 64, cuts0, cuts1, reverse) == expected);
}

TEST_CASE("histogram: protocol violations are errors") {
  HistogramObserver a = make(4), b = make(4);
  REQUIRE(a.observe(floats({1.0f})).is_ok());
  REQUIRE(b.observe(floats({3.0f})).is_ok());
  HistogramObserver a1 = a;
  REQUIRE(a1.begin_pass(1).is_ok());
  CHECK_FALSE(a1.begin_pass(1).is_ok());  // would lose nothing but signals a host bug
  CHECK_FALSE(a1.begin_pass(0).is_ok());
  CHECK_FALSE(a.begin_pass(2).is_ok());
  // Different passes never merge.
  CHECK(a.merge(a1).code() == StatusCode::InvalidInput);
  // Pass-1 states from different pass-0 summaries do not merge.
  HistogramObserver b1 = b;
  REQUIRE(b1.begin_pass(1).is_ok());
  const Status st = a1.merge(b1);
  CHECK(st.code() == StatusCode::InvalidInput);
  CHECK(st.message().find("pass-0 summaries") != std::string::npos);
  // A value beyond the pass-0 range in pass 1.
  CHECK(a1.observe(floats({1.5f})).code() == StatusCode::InvalidInput);
  // Different bin counts.
  HistogramObserver c = make(8);
  CHECK(c.merge(a).code() == StatusCode::InvalidInput);
}

// The binning as the observer defines it, one value at a time.
std::vector<double> reference_bins(const std::vector<float>& values, double top, int64_t bins) {
  std::vector<double> h(static_cast<std::size_t>(bins), 0.0);
  for (float x : values) {
    if (!std::isfinite(x)) continue;
    const double a = std::fabs(static_cast<double>(x));
    const auto bin = top > 0.0 ? std::min(static_cast<std::size_t>(bins - 1),
                                          static_cast<std::size_t>(std::floor(a / top * static_cast<double>(bins))))
                               : std::size_t{0};
    h[bin] += 1.0;
  }
  return h;
}

TEST_CASE("histogram: the blocked pass 1 equals per-value binning across block edges") {
  std::mt19937 rng(23);
  std::normal_distribution<float> dist(0.0f, 1.5f);
  for (std::size_t n : {std::size_t{1}, std::size_t{255}, std::size_t{256}, std::size_t{257}, std::size_t{1000}}) {
    for (int64_t bins : {int64_t{1}, int64_t{7}, int64_t{2048}}) {
      std::vector<float> v(n);
      for (float& x : v) {
        const unsigned r = rng() % 16;
        x = r == 0 ? kNaN : r == 1 ? -kInf : r == 2 ? -0.0f : dist(rng);
      }
      const HistogramObserver obs = run_whole({floats(v)}, bins);
      const TensorStatistics s = obs.statistics();
      CHECK(s.histogram == reference_bins(v, s.histogram_range, bins));
    }
  }
}

TEST_CASE("histogram: values on and beside bin edges go where the division puts them") {
  // Every float within a few ulps of k * top / bins: where indexing by a multiplication with
  // 1 / top can round across the edge, the observer must index by the division.
  for (const float top : {3.7f, 6.0f, 0.1f, 1000.3f}) {
    for (int64_t bins : {int64_t{7}, int64_t{2048}, int64_t{3000}}) {
      CAPTURE(top);
      CAPTURE(bins);
      std::vector<float> v = {top, -top};
      for (int64_t k = 1; k < bins; k += std::max<int64_t>(1, bins / 97)) {
        float edge = static_cast<float>(static_cast<double>(top) * static_cast<double>(k) / static_cast<double>(bins));
        for (int step = 0; step < 3; ++step) edge = std::nextafter(edge, 0.0f);
        for (int step = 0; step < 7; ++step, edge = std::nextafter(edge, top)) v.push_back(step % 2 ? -edge : edge);
      }
      const HistogramObserver obs = run_whole({floats(v)}, bins);
      const TensorStatistics s = obs.statistics();
      CHECK(s.histogram == reference_bins(v, s.histogram_range, bins));
    }
  }
}

// Pass 1 starting from a state whose range is `top` (not necessarily a float).
HistogramObserver pass1_with_range(double top) {
  HistogramObserver seed = make(4);
  REQUIRE(seed.observe(floats({-0.5f, 0.5f})).is_ok());
  std::string state = seed.serialize();
  // Header: magic, version, pass, bins (4+4+4+8), counts (3*8), then min and max (f64).
  std::memcpy(state.data() + 52, &top, sizeof top);
  HistogramObserver obs = make(4);
  REQUIRE(obs.deserialize(state).is_ok());
  REQUIRE(obs.begin_pass(1).is_ok());
  return obs;
}

TEST_CASE("histogram: the pass-1 range check is exact when the range is not a float") {
  const float one_up = std::nextafter(1.0f, 2.0f);
  const float one_down = std::nextafter(1.0f, 0.0f);
  // top just above 1: 1 is inside, the next float is outside.
  HistogramObserver above = pass1_with_range(1.0 + std::ldexp(1.0, -40));
  CHECK(above.observe(floats({1.0f, -1.0f, kInf, kNaN})).is_ok());
  CHECK(above.observe(floats({0.0f, -one_up})).code() == StatusCode::InvalidInput);
  // top just below 1: the float below 1 is inside, 1 is outside.
  HistogramObserver below = pass1_with_range(1.0 - std::ldexp(1.0, -40));
  CHECK(below.observe(floats({one_down, -one_down})).is_ok());
  CHECK(below.observe(floats({1.0f})).code() == StatusCode::InvalidInput);
  // A range beyond the largest float holds every finite value.
  HistogramObserver huge = pass1_with_range(1e300);
  CHECK(huge.observe(floats({std::numeric_limits<float>::max(), -std::numeric_limits<float>::max()})).is_ok());
}

TEST_CASE("histogram: state round trip in both passes; truncated and foreign bytes are refused") {
  HistogramObserver obs = make(4);
  REQUIRE(obs.observe(floats({-1.0f, 0.25f, kNaN})).is_ok());
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1) {
      REQUIRE(obs.begin_pass(1).is_ok());
      REQUIRE(obs.observe(floats({-1.0f, 0.25f, kNaN})).is_ok());
    }
    const std::string bytes = obs.serialize();
    CHECK(bytes.size() == 60 + (pass == 1 ? 32u : 0u));
    HistogramObserver restored = make(4);
    REQUIRE(restored.deserialize(bytes).is_ok());
    CHECK(restored.serialize() == bytes);
    CHECK(restored.statistics().histogram == obs.statistics().histogram);

    HistogramObserver target = make(4);
    REQUIRE(target.observe(floats({9.0f})).is_ok());
    const std::string before = target.serialize();
    for (std::size_t n = 0; n < bytes.size(); ++n) CHECK_FALSE(target.deserialize(bytes.substr(0, n)).is_ok());
    CHECK_FALSE(target.deserialize(bytes + '\0').is_ok());
    CHECK(make(8).deserialize(bytes).code() == StatusCode::InvalidInput);  // bins differ
    CHECK(target.serialize() == before);
  }
  // A histogram holding more values than pass 0 counted.
  std::string inflated = obs.serialize();
  inflated[60] = 9;
  CHECK_FALSE(make(4).deserialize(inflated).is_ok());
  std::string bad_pass = obs.serialize();
  bad_pass[8] = 2;
  CHECK_FALSE(make(4).deserialize(bad_pass).is_ok());
  std::mt19937 rng(5);
  HistogramObserver target = make(4);
  for (int n = 0; n < 300; ++n) {
    std::string noise(static_cast<std::size_t>(rng() % 120), '\0');
    for (char& ch : noise) ch = static_cast<char>(rng());
    if (n % 2 == 0 && noise.size() >= 4) noise.replace(0, 4, "QFHG");
    CHECK_FALSE(target.deserialize(noise).is_ok());
  }
}

}  // namespace
}  // namespace qflow

// Tests of the moving-average-minmax observer: averaging updates, weighted merge, exact counts, state.
#include <doctest/doctest.h>

#include <limits>
#include <random>
#include <string>
#include <vector>

#include "plugins/observers/moving_average_minmax_observer.h"

namespace qflow {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

Tensor floats(const std::vector<float>& v) { return Tensor::from_vector<float>({static_cast<int64_t>(v.size())}, v); }

Options with_constant(double c) {
  Options o;
  o.set("averaging-constant", c);
  return o;
}

TEST_CASE("moving-average-minmax: first call sets the range, later calls average towards theirs") {
  MovingAverageMinMaxObserver obs(0.5);
  REQUIRE(obs.observe(floats({1.0f, -2.0f})).is_ok());
  CHECK(obs.statistics().min == -2.0);
  CHECK(obs.statistics().max == 1.0);
  REQUIRE(obs.observe(floats({4.0f, 0.0f, kNaN})).is_ok());
  // min = -2 + 0.5 * (0 - -2) = -1; max = 1 + 0.5 * (4 - 1) = 2.5
  CHECK(obs.statistics().min == -1.0);
  CHECK(obs.statistics().max == 2.5);
  // Only NaN/Inf: counted, the averages stay.
  REQUIRE(obs.observe(floats({kNaN, kInf, -kInf})).is_ok());
  const TensorStatistics s = obs.statistics();
  CHECK(s.min == -1.0);
  CHECK(s.max == 2.5);
  CHECK(s.count == 4);
  CHECK(s.nan_count == 2);
  CHECK(s.inf_count == 2);
}

TEST_CASE("moving-average-minmax: the default constant is PyTorch's 0.01 and the order matters") {
  auto created = MovingAverageMinMaxObserver::create(with_constant(0.01));
  REQUIRE(created.has_value());
  const ComponentInfo info = MovingAverageMinMaxObserver::info();
  CHECK(info.name == "moving-average-minmax");
  REQUIRE(info.options.size() == 1);
  CHECK(std::get<double>(info.options[0].default_value) == 0.01);
  MovingAverageMinMaxObserver a(0.01), b(0.01);
  REQUIRE(a.observe(floats({0.0f, 1.0f})).is_ok());
  REQUIRE(a.observe(floats({0.0f, 3.0f})).is_ok());
  REQUIRE(b.observe(floats({0.0f, 3.0f})).is_ok());
  REQUIRE(b.observe(floats({0.0f, 1.0f})).is_ok());
  CHECK(a.statistics().max == 1.0 + 0.01 * 2.0);
  CHECK(b.statistics().max == 3.0 + 0.01 * -2.0);
  for (double bad : {0.0, -0.5, 1.5}) CHECK(MovingAverageMinMaxObserver::create(with_constant(bad)).status().code() ==
                                             StatusCode::InvalidInput);
  CHECK(MovingAverageMinMaxObserver::create(with_constant(1.0)).has_value());
}

TEST_CASE("moving-average-minmax: merge is count-weighted, symmetric, and counts are exact") {
  MovingAverageMinMaxObserver a(0.5), b(0.5);
  REQUIRE(a.observe(floats({1.0f, -2.0f})).is_ok());
  REQUIRE(a.observe(floats({4.0f, 0.0f, kNaN})).is_ok());  // count 4, range [-1, 2.5]
  REQUIRE(b.observe(floats({2.0f, 3.0f, 6.0f, 1.0f, 0.0f, 5.0f, kInf})).is_ok());  // count 6, range [0, 6]
  MovingAverageMinMaxObserver ab = a, ba = b;
  REQUIRE(ab.merge(b).is_ok());
  REQUIRE(ba.merge(a).is_ok());
  const TensorStatistics s = ab.statistics();
  CHECK(s.min == (-1.0 * 4 + 0.0 * 6) / 10);
  CHECK(s.max == (2.5 * 4 + 6.0 * 6) / 10);
  CHECK(s.count == 10);
  CHECK(s.nan_count == 1);
  CHECK(s.inf_count == 1);
  CHECK(ab.serialize() == ba.serialize());
  // An empty state is neutral.
  MovingAverageMinMaxObserver empty(0.5), e = empty;
  REQUIRE(e.merge(a).is_ok());
  CHECK(e.serialize() == a.serialize());
  MovingAverageMinMaxObserver other_constant(0.25);
  CHECK(ab.merge(other_constant).code() == StatusCode::InvalidInput);
}

TEST_CASE("moving-average-minmax: counts merge exactly for any split") {
  std::mt19937 rng(2);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<Tensor> samples;
  for (int i = 0; i < 8; ++i) {
    std::vector<float> v(11);
    for (float& x : v) x = dist(rng);
    if (i % 2) v[0] = kNaN;
    if (i % 3 == 0) v[1] = kInf;
    samples.push_back(floats(v));
  }
  MovingAverageMinMaxObserver all(0.1);
  for (const Tensor& t : samples) REQUIRE(all.observe(t).is_ok());
  for (std::size_t split = 0; split <= samples.size(); ++split) {
    MovingAverageMinMaxObserver left(0.1), right(0.1);
    for (std::size_t i = 0; i < samples.size(); ++i) REQUIRE((i < split ? left : right).observe(samples[i]).is_ok());
    REQUIRE(left.merge(right).is_ok());
    CHECK(left.statistics().count == all.statistics().count);
    CHECK(left.statistics().nan_count == all.statistics().nan_count);
    CHECK(left.statistics().inf_count == all.statistics().inf_count);
  }
}

TEST_CASE("moving-average-minmax: state round trip; truncated and foreign bytes are refused") {
  MovingAverageMinMaxObserver obs(0.5);
  REQUIRE(obs.observe(floats({-0.75f, 3.0f, kNaN})).is_ok());
  REQUIRE(obs.observe(floats({1.0f, 2.0f})).is_ok());
  const std::string bytes = obs.serialize();
  CHECK(bytes.size() == 64);
  MovingAverageMinMaxObserver restored(0.5);
  REQUIRE(restored.deserialize(bytes).is_ok());
  CHECK(restored.serialize() == bytes);
  CHECK(restored.statistics().min == obs.statistics().min);
  // Continuing after a round trip continues the average, not a fresh start.
  REQUIRE(restored.observe(floats({0.0f})).is_ok());
  REQUIRE(obs.observe(floats({0.0f})).is_ok());
  CHECK(restored.serialize() == obs.serialize());

  MovingAverageMinMaxObserver target(0.5);
  const std::string before = target.serialize();
  for (std::size_t n = 0; n < bytes.size(); ++n) CHECK_FALSE(target.deserialize(bytes.substr(0, n)).is_ok());
  CHECK_FALSE(target.deserialize(bytes + "x").is_ok());
  CHECK(MovingAverageMinMaxObserver(0.25).deserialize(bytes).code() == StatusCode::InvalidInput);
  std::string no_updates = bytes;
  for (int i = 40; i < 48; ++i) no_updates[static_cast<std::size_t>(i)] = 0;  // updates = 0 with values counted
  CHECK_FALSE(target.deserialize(no_updates).is_ok());
  CHECK(target.serialize() == before);
}

}  // namespace
}  // namespace qflow

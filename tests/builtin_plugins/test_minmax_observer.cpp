// Tests of the minmax observer: range, NaN/Inf accounting, exact merge, state round trip.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "plugins/observers/minmax_observer.h"

namespace qflow {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

Tensor floats(const std::vector<float>& v) { return Tensor::from_vector<float>({static_cast<int64_t>(v.size())}, v); }

TEST_CASE("minmax: range and count of plain values") {
  MinMaxObserver obs;
  REQUIRE(obs.observe(floats({0.5f, -2.25f, 3.0f, 1.0f})).is_ok());
  REQUIRE(obs.observe(floats({-1.0f, 4.5f})).is_ok());
  const TensorStatistics s = obs.statistics();
  CHECK(s.count == 6);
  CHECK(s.min == -2.25);
  CHECK(s.max == 4.5);
  CHECK(s.nan_count == 0);
  CHECK(s.inf_count == 0);
}

TEST_CASE("minmax: NaN and Inf are counted, never part of the range") {
  MinMaxObserver obs;
  REQUIRE(obs.observe(floats({kNaN, 1.0f, kInf, -kInf, -3.0f, kNaN})).is_ok());
  const TensorStatistics s = obs.statistics();
  CHECK(s.count == 2);
  CHECK(s.nan_count == 2);
  CHECK(s.inf_count == 2);
  CHECK(s.min == -3.0);
  CHECK(s.max == 1.0);
}

TEST_CASE("minmax: a tensor of only NaN leaves the range empty") {
  MinMaxObserver obs;
  REQUIRE(obs.observe(floats({kNaN, kNaN})).is_ok());
  const TensorStatistics s = obs.statistics();
  CHECK(s.count == 0);
  CHECK(s.nan_count == 2);
  CHECK(std::isinf(s.min));
  CHECK(s.min > 0);
  CHECK(std::isinf(s.max));
  CHECK(s.max < 0);
}

TEST_CASE("minmax: non-float tensors are refused") {
  MinMaxObserver obs;
  const Status st = obs.observe(Tensor::from_vector<int32_t>({2}, {1, 2}));
  CHECK(st.code() == StatusCode::InvalidInput);
  CHECK(st.message().find("int32") != std::string::npos);
}

TEST_CASE("minmax: merge of any split equals one pass over all samples") {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<Tensor> samples;
  for (int i = 0; i < 12; ++i) {
    std::vector<float> v(17);
    for (float& x : v) x = dist(rng);
    if (i % 5 == 0) v[3] = kNaN;
    if (i % 4 == 1) v[9] = -kInf;
    samples.push_back(floats(v));
  }
  MinMaxObserver all;
  for (const Tensor& t : samples) REQUIRE(all.observe(t).is_ok());
  const std::string expected = all.serialize();

  for (std::size_t split = 0; split <= samples.size(); ++split) {
    MinMaxObserver left, right;
    for (std::size_t i = 0; i < samples.size(); ++i) REQUIRE((i < split ? left : right).observe(samples[i]).is_ok());
    MinMaxObserver merged_lr = left, merged_rl = right;
    REQUIRE(merged_lr.merge(right).is_ok());
    REQUIRE(merged_rl.merge(left).is_ok());
    CHECK(merged_lr.serialize() == expected);
    CHECK(merged_rl.serialize() == expected);
  }
}

TEST_CASE("minmax: -0 and +0 give the same state whichever comes first") {
  MinMaxObserver a, b;
  REQUIRE(a.observe(floats({-0.0f, 0.0f})).is_ok());
  REQUIRE(b.observe(floats({0.0f})).is_ok());
  MinMaxObserver c;
  REQUIRE(c.observe(floats({-0.0f})).is_ok());
  REQUIRE(b.merge(c).is_ok());
  CHECK(a.serialize() == b.serialize());
  CHECK_FALSE(std::signbit(a.statistics().min));
}

TEST_CASE("minmax: serialize/deserialize round trip is byte exact") {
  MinMaxObserver obs;
  REQUIRE(obs.observe(floats({-0.1f, 7.75f, kNaN, kInf})).is_ok());
  const std::string bytes = obs.serialize();
  CHECK(bytes.size() == 48);
  MinMaxObserver restored;
  REQUIRE(restored.deserialize(bytes).is_ok());
  CHECK(restored.serialize() == bytes);
  const TensorStatistics a = obs.statistics(), b = restored.statistics();
  CHECK(a.count == b.count);
  CHECK(a.nan_count == b.nan_count);
  CHECK(a.inf_count == b.inf_count);
  CHECK(a.min == b.min);
  CHECK(a.max == b.max);

  MinMaxObserver empty, empty_restored;
  REQUIRE(empty_restored.deserialize(empty.serialize()).is_ok());
  CHECK(empty_restored.statistics().count == 0);
}

TEST_CASE("minmax: malformed state is refused and leaves the observer unchanged") {
  MinMaxObserver obs;
  REQUIRE(obs.observe(floats({1.0f, 2.0f})).is_ok());
  const std::string good = obs.serialize();
  MinMaxObserver target;
  REQUIRE(target.observe(floats({-5.0f})).is_ok());
  const std::string before = target.serialize();

  std::vector<std::string> bad = {"", "QFMM", good.substr(0, 47), good + "x", std::string(48, '\0')};
  std::string wrong_version = good;
  wrong_version[4] = 2;
  bad.push_back(wrong_version);
  std::string negative = good;
  negative[15] = static_cast<char>(0x80);  // count's sign bit
  bad.push_back(negative);
  std::string reversed = good;  // min = 2, max = 1
  for (int i = 0; i < 8; ++i) std::swap(reversed[32 + i], reversed[40 + i]);
  bad.push_back(reversed);
  std::string nan_min = good;
  for (int i = 0; i < 8; ++i) nan_min[32 + i] = static_cast<char>(0xFF);
  bad.push_back(nan_min);

  std::mt19937 rng(3);
  for (int n = 0; n < 200; ++n) {
    std::string noise(static_cast<std::size_t>(rng() % 64), '\0');
    for (char& c : noise) c = static_cast<char>(rng());
    bad.push_back(noise);
  }
  for (const std::string& bytes : bad) {
    const Status st = target.deserialize(bytes);
    CHECK_FALSE(st.is_ok());
    CHECK(target.serialize() == before);
  }
}

TEST_CASE("minmax: merging with a different observer type is refused") {
  struct Other final : Observer {
    Status observe(const Tensor&) override { return Status::ok(); }
    Status merge(const Observer&) override { return Status::ok(); }
    std::string serialize() const override { return {}; }
    Status deserialize(std::string_view) override { return Status::ok(); }
    TensorStatistics statistics() const override { return {}; }
  };
  MinMaxObserver obs;
  Other other;
  CHECK(obs.merge(other).code() == StatusCode::InvalidInput);
}

TEST_CASE("minmax: component metadata") {
  const ComponentInfo info = MinMaxObserver::info();
  CHECK(info.kind == ComponentKind::Observer);
  CHECK(info.name == "minmax");
  CHECK(info.options.empty());
  auto created = MinMaxObserver::create(Options{});
  REQUIRE(created.has_value());
  CHECK(created.value() != nullptr);
}

}  // namespace
}  // namespace qflow

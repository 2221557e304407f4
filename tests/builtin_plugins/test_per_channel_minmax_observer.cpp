// Tests of the per-channel-minmax observer: channel ranges, axis handling, exact merge, state format.
#include <doctest/doctest.h>

#include <limits>
#include <random>
#include <string>
#include <vector>

#include "plugins/observers/per_channel_minmax_observer.h"

namespace qflow {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr double kDInf = std::numeric_limits<double>::infinity();

TEST_CASE("per-channel-minmax: hand-computed channel ranges along axis 1") {
  PerChannelMinMaxObserver obs(1);
  // [2, 3, 2]: n=0 c=0 {1, -1}, c=1 {2, NaN}, c=2 {Inf, 0.5}; n=1 c=0 {3, 0}, c=1 {-4, 2}, c=2 {NaN, -Inf}
  REQUIRE(obs.observe(Tensor::from_vector<float>({2, 3, 2}, {1, -1, 2, kNaN, kInf, 0.5f, 3, 0, -4, 2, kNaN, -kInf}))
              .is_ok());
  const TensorStatistics s = obs.statistics();
  CHECK(s.axis == 1);
  CHECK(s.channel_min == std::vector<double>{-1, -4, 0.5});
  CHECK(s.channel_max == std::vector<double>{3, 2, 0.5});
  CHECK(s.min == -4.0);
  CHECK(s.max == 3.0);
  CHECK(s.count == 8);
  CHECK(s.nan_count == 2);
  CHECK(s.inf_count == 2);
}

TEST_CASE("per-channel-minmax: negative axes count from the end; empty channels keep infinities") {
  PerChannelMinMaxObserver obs(-1);
  REQUIRE(obs.observe(Tensor::from_vector<float>({2, 2}, {1, kNaN, -2, kNaN})).is_ok());
  const TensorStatistics s = obs.statistics();
  CHECK(s.axis == 1);
  CHECK(s.channel_min == std::vector<double>{-2, kDInf});
  CHECK(s.channel_max == std::vector<double>{1, -kDInf});
  CHECK(s.min == -2.0);
  CHECK(s.max == 1.0);
  auto created = PerChannelMinMaxObserver::create([] {
    Options o;
    o.set("axis", int64_t{-3});
    return o;
  }());
  REQUIRE(created.has_value());
  REQUIRE(created.value()->observe(Tensor::from_vector<float>({3, 1, 2}, {1, 2, 3, 4, 5, 6})).is_ok());
  CHECK(created.value()->statistics().channel_max == std::vector<double>{2, 4, 6});
  CHECK(std::get<int64_t>(PerChannelMinMaxObserver::info().options.at(0).default_value) == 1);
}

TEST_CASE("per-channel-minmax: rank below the axis and changing channel counts are errors") {
  PerChannelMinMaxObserver obs(1);
  const Status rank = obs.observe(Tensor::from_vector<float>({4}, {1, 2, 3, 4}));
  CHECK(rank.code() == StatusCode::InvalidInput);
  CHECK(rank.message().find("[4]") != std::string::npos);
  CHECK(PerChannelMinMaxObserver(-3).observe(Tensor::from_vector<float>({2, 2}, {1, 2, 3, 4})).code() ==
        StatusCode::InvalidInput);
  REQUIRE(obs.observe(Tensor(DType::Float32, {1, 3})).is_ok());
  const Status changed = obs.observe(Tensor(DType::Float32, {1, 4}));
  CHECK(changed.code() == StatusCode::InvalidInput);
  CHECK(changed.message().find("[1, 4]") != std::string::npos);
  PerChannelMinMaxObserver other(1);
  REQUIRE(other.observe(Tensor(DType::Float32, {1, 5})).is_ok());
  const Status merged = obs.merge(other);
  CHECK(merged.code() == StatusCode::InvalidInput);
  CHECK(merged.message().find("channel count mismatch") != std::string::npos);
  CHECK(obs.merge(PerChannelMinMaxObserver(0)).code() == StatusCode::InvalidInput);  // other axis option
}

TEST_CASE("per-channel-minmax: merge of any split in any order equals one observer") {
  std::mt19937 rng(9);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<Tensor> samples;
  for (int i = 0; i < 10; ++i) {
    std::vector<float> v(2 * 3 * 4);
    for (float& x : v) x = dist(rng);
    if (i % 3 == 0) v[static_cast<std::size_t>(i)] = kNaN;
    if (i % 4 == 1) v[7] = -kInf;
    if (i == 5) v[2] = -0.0f;
    samples.push_back(Tensor::from_vector<float>({2, 3, 4}, v));
  }
  PerChannelMinMaxObserver all(1);
  for (const Tensor& t : samples) REQUIRE(all.observe(t).is_ok());
  const std::string expected = all.serialize();
  for (std::size_t a = 0; a <= samples.size(); a += 3)
    for (std::size_t b = a; b <= samples.size(); b += 2) {
      PerChannelMinMaxObserver parts[3] = {PerChannelMinMaxObserver(1), PerChannelMinMaxObserver(1),
                                           PerChannelMinMaxObserver(1)};
      for (std::size_t i = 0; i < samples.size(); ++i) REQUIRE(parts[i < a ? 0 : i < b ? 1 : 2].observe(samples[i]).is_ok());
      PerChannelMinMaxObserver forward = parts[0], backward = parts[2];
      REQUIRE(forward.merge(parts[1]).is_ok());
      REQUIRE(forward.merge(parts[2]).is_ok());
      REQUIRE(backward.merge(parts[1]).is_ok());
      REQUIRE(backward.merge(parts[0]).is_ok());
      CHECK(forward.serialize() == expected);
      CHECK(backward.serialize() == expected);
    }
}

TEST_CASE("per-channel-minmax: state round trip; truncated and inconsistent bytes are refused") {
  PerChannelMinMaxObserver obs(0);
  REQUIRE(obs.observe(Tensor::from_vector<float>({3, 1}, {1.5f, kNaN, -2.0f})).is_ok());
  const std::string bytes = obs.serialize();
  CHECK(bytes.size() == 72 + 3 * 16);
  PerChannelMinMaxObserver restored(0);
  REQUIRE(restored.deserialize(bytes).is_ok());
  CHECK(restored.serialize() == bytes);
  CHECK(restored.statistics().channel_min == obs.statistics().channel_min);
  PerChannelMinMaxObserver fresh(0), fresh_restored(0);
  REQUIRE(fresh_restored.deserialize(fresh.serialize()).is_ok());
  CHECK(fresh_restored.statistics().axis == -1);

  PerChannelMinMaxObserver target(0);
  const std::string before = target.serialize();
  for (std::size_t n = 0; n < bytes.size(); ++n) CHECK_FALSE(target.deserialize(bytes.substr(0, n)).is_ok());
  CHECK_FALSE(target.deserialize(bytes + std::string(16, '\0')).is_ok());
  CHECK(PerChannelMinMaxObserver(1).deserialize(bytes).code() == StatusCode::InvalidInput);
  std::string wrong_overall = bytes;
  wrong_overall[63] = static_cast<char>(wrong_overall[63] ^ 0x40);  // overall min no longer the channel minimum
  CHECK_FALSE(target.deserialize(wrong_overall).is_ok());
  std::string huge_channels = bytes;
  huge_channels[31] = 0x7F;
  CHECK_FALSE(target.deserialize(huge_channels).is_ok());
  CHECK(target.serialize() == before);
  std::mt19937 rng(1);
  for (int n = 0; n < 300; ++n) {
    std::string noise(static_cast<std::size_t>(rng() % 160), '\0');
    for (char& ch : noise) ch = static_cast<char>(rng());
    CHECK_FALSE(target.deserialize(noise).is_ok());
  }
}

}  // namespace
}  // namespace qflow
